import { onPostgres } from '../support/postgres-servers.js'
import { usePostgres } from '../support/use-postgres.js'
import { describeRoutes } from './routes-contract.js'

/** The HTTP routes (time travel and fork among them) on a server whose store is a real PostgreSQL's. */
describeRoutes('PostgreSQL', onPostgres(usePostgres()))
