import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore } from '../../src/projections/open.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'
import { executeContract } from './execute-contract.js'

executeContract('SQLite', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-execute-'))
  const store = openStore(join(dir, 'chronicle.db'))
  return {
    ports: sqlitePorts(store),
    close: async () => {
      store.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
})
