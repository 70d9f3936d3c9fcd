import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sqliteLog } from '../../src/events/log.js'
import { openStore } from '../../src/projections/open.js'
import { sqliteReadModels } from '../../src/projections/read-models.js'
import { describeReadModelContract } from './read-models-contract.js'

/** The read-model contract on SQLite: a temporary file, its log and read models through the ports. */
describeReadModelContract('SQLite', {
  async open() {
    const dir = mkdtempSync(join(tmpdir(), 'chronicle-read-models-'))
    const store = openStore(join(dir, 'chronicle.db'))
    return {
      log: sqliteLog(store),
      models: sqliteReadModels(store),
      close: async () => {
        store.close()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  },
})
