import { afterAll, beforeAll } from 'vitest'
import { PostgresEventLog } from '../../src/events/postgres/log.js'
import { type PostgresServer, startPostgres } from '../support/postgres.js'
import { describeLogContract } from './log-contract.js'

/** The event log contract on a real PostgreSQL server (`npm run test:postgres`): a new database per test. */
let server: PostgresServer
beforeAll(async () => {
  server = await startPostgres()
}, 60_000)
afterAll(async () => {
  await server?.stop()
})

describeLogContract('PostgreSQL', {
  async database() {
    const url = await server.database()
    return {
      open: (options) => PostgresEventLog.open(url, options ?? {}),
      cleanup: async () => {},
    }
  },
})
