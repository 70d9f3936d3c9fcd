import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sqliteLog } from '../../src/events/log.js'
import { EventStore } from '../../src/events/store.js'
import { describeLogContract } from './log-contract.js'

/** The event log contract on SQLite: a temporary file, opened by one connection a server. */
describeLogContract('SQLite', {
  async database() {
    const dir = mkdtempSync(join(tmpdir(), 'chronicle-log-'))
    return {
      open: async (options) => sqliteLog(EventStore.open(join(dir, 'chronicle.db'), options ?? {})),
      cleanup: async () => rmSync(dir, { recursive: true, force: true }),
    }
  },
})
