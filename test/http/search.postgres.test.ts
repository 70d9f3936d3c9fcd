import { onPostgres } from '../support/postgres-servers.js'
import { usePostgres } from '../support/use-postgres.js'
import { describeSearchRoutes } from './search-contract.js'

/** GET /search and the WebSocket `search` on a server whose store is a real PostgreSQL's, its index in the same database. */
describeSearchRoutes('PostgreSQL', onPostgres(usePostgres()))
