import type { PostgresEventLog } from '../../src/events/postgres/log.js'
import { openPostgresStore } from '../../src/projections/postgres/open.js'
import { postgresPorts } from '../../src/projections/store-ports.js'
import { usePostgres } from '../support/use-postgres.js'
import { describeWorkspaceContract } from './workspace-contract.js'

/**
 * The workspace's history over the store's ports on a real PostgreSQL server (`npm run test:postgres`): a new
 * database per test; a restart kills the server (`pg_ctl stop -m immediate`) and starts it again.
 */
const server = usePostgres()

describeWorkspaceContract('PostgreSQL', async () => {
  const url = await server().database()
  let log: PostgresEventLog = await openPostgresStore(url)
  return {
    ports: postgresPorts(log),
    async restart() {
      await server().crash()
      await log.close().catch(() => undefined)
      await server().restart()
      log = await openPostgresStore(url)
      return postgresPorts(log)
    },
    close: () => log.close(),
  }
})
