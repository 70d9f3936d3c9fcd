import { openPostgresStore } from '../../src/projections/postgres/open.js'
import { postgresPorts } from '../../src/projections/store-ports.js'
import { usePostgres } from '../support/use-postgres.js'
import { executeContract } from './execute-contract.js'

const server = usePostgres()

executeContract('PostgreSQL', async () => {
  const log = await openPostgresStore(await server().database())
  return { ports: postgresPorts(log), close: () => log.close() }
})
