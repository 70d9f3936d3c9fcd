import { openPostgresStore } from '../../src/projections/postgres/open.js'
import { postgresReadModels } from '../../src/projections/postgres/read-models.js'
import { usePostgres } from '../support/use-postgres.js'
import { describeReadModelContract } from './read-models-contract.js'

/** The read-model contract on a real PostgreSQL server (`npm run test:postgres`): a new database per test. */
const server = usePostgres()

describeReadModelContract('PostgreSQL', {
  async open() {
    const log = await openPostgresStore(await server().database())
    return { log, models: postgresReadModels(log), close: () => log.close() }
  },
})
