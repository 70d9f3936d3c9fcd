import { onPostgres } from '../support/postgres-servers.js'
import { usePostgres } from '../support/use-postgres.js'
import { describeRoles } from './roles-contract.js'
import { dataDirAndDump } from './stored-bytes.js'

/** Principals, roles, tokens and attribution on a server whose store is a real PostgreSQL's. */
describeRoles('PostgreSQL', onPostgres(usePostgres()), dataDirAndDump)
