import { onPostgres } from '../support/postgres-servers.js'
import { usePostgres } from '../support/use-postgres.js'
import { describeWebSocket } from './ws-contract.js'

/** The WebSocket protocol (subscriptions, forks, time travel) on a server whose store is a real PostgreSQL's. */
describeWebSocket('PostgreSQL', onPostgres(usePostgres()))
