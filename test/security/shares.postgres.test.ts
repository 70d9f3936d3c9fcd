import { onPostgres } from '../support/postgres-servers.js'
import { usePostgres } from '../support/use-postgres.js'
import { describeShares } from './shares-contract.js'

/** Share links played by an attacker on a server whose store is a real PostgreSQL's. */
describeShares('PostgreSQL', onPostgres(usePostgres()))
