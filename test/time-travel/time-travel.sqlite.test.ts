import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sqliteLog } from '../../src/events/log.js'
import { openStore } from '../../src/projections/open.js'
import { sqliteReadModels } from '../../src/projections/read-models.js'
import { sqliteTimeTravel } from '../../src/projections/time-travel/port.js'
import { describeTimeTravelContract } from './time-travel-contract.js'

/** The time-travel contract on SQLite: a temporary file, through the ports. */
describeTimeTravelContract('SQLite', {
  async open(snapshotEvery) {
    const dir = mkdtempSync(join(tmpdir(), 'chronicle-time-travel-'))
    const store = openStore(join(dir, 'chronicle.db'), { snapshotEvery })
    return {
      log: sqliteLog(store),
      travel: sqliteTimeTravel(store, { snapshotEvery }),
      models: sqliteReadModels(store),
      close: async () => {
        store.close()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  },
})
