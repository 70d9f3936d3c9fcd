import { PostgresEventLog } from '../../src/events/postgres/log.js'
import { usePostgres } from '../support/use-postgres.js'
import { describeLogContract } from './log-contract.js'

/** The event log contract on a real PostgreSQL server (`npm run test:postgres`): a new database per test. */
const server = usePostgres()

describeLogContract('PostgreSQL', {
  async database() {
    const url = await server().database()
    return {
      open: (options) => PostgresEventLog.open(url, options ?? {}),
      cleanup: async () => {},
    }
  },
})
