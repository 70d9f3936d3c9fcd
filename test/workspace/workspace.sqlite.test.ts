import { join } from 'node:path'
import type { EventStore } from '../../src/events/store.js'
import { openStore } from '../../src/projections/open.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'
import { tempDir } from './helpers.js'
import { describeWorkspaceContract } from './workspace-contract.js'

/** The workspace's history over the store's ports on SQLite: a temporary file, closed and opened again on restart. */
describeWorkspaceContract('SQLite', async () => {
  const { dir, cleanup } = tempDir('sqlite')
  const file = join(dir, 'chronicle.db')
  let store: EventStore = openStore(file)
  return {
    ports: sqlitePorts(store),
    async restart() {
      store.close()
      store = openStore(file)
      return sqlitePorts(store)
    },
    async close() {
      store.close()
      cleanup()
    },
  }
})
