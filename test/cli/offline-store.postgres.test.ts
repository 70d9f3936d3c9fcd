import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { Args } from '../../src/cli/args.js'
import type { Terminal } from '../../src/cli/terminal.js'
import { exportCommand, rebuildCommand, restoreCommand, verifyCommand } from '../../src/cli/offline.js'
import { openPostgresStore } from '../../src/projections/postgres/open.js'
import { usePostgres } from '../support/use-postgres.js'

/**
 * `chronicle rebuild` and `chronicle verify` with CHRONICLE_DATABASE_URL
 * naming a real PostgreSQL server: they work on that store — verify finds a
 * damaged read model, rebuild projects it again, verify then passes; export
 * reads it — and a command that works on SQLite's store only (restore)
 * refuses, instead of writing a file the server would never read.
 */
const postgres = usePostgres()
const args = (...positionals: string[]): Args => ({ positionals, flags: new Map() })
/** A terminal that keeps its lines. */
const terminal = (lines: string[]): Terminal => ({
  write: (text) => lines.push(text),
  line: (text = '') => lines.push(text),
  paint: (_style, text) => text,
  width: undefined,
})

describe('the offline commands on a PostgreSQL store', () => {
  const saved = { ...process.env }
  let url: string
  beforeEach(async () => {
    url = await postgres().database()
    const root = mkdtempSync(join(tmpdir(), 'chronicle-offline-pg-'))
    Object.assign(process.env, {
      CHRONICLE_DATABASE_URL: url,
      CHRONICLE_DATA_DIR: join(root, 'data'),
      CHRONICLE_URL: 'http://127.0.0.1:9', // no server answers: the writers may run
      HOME: join(root, 'home'),
    })
  })
  afterEach(() => {
    process.env = { ...saved }
  })

  it('verify names a damaged read model, rebuild projects it again from the log, verify then passes', async () => {
    const log = await openPostgresStore(url)
    await log.append('ses_a', [{ type: 'session.created', data: { directory: '/w', agent: 'build', model: null } }], {
      meta: { actor: 'user' },
    })
    await log.append('ses_a', [{ type: 'session.renamed', data: { title: 'the real title' } }], {
      meta: { actor: 'user' },
    })
    await log.close()
    const db = new pg.Client({ connectionString: url })
    await db.connect()
    await db.query(`UPDATE sessions SET data = replace(data, 'the real title', 'forged') WHERE id = 'ses_a'`)
    await db.end()

    const before: string[] = []
    expect(await verifyCommand(args(), terminal(before))).toBe(1)
    expect(before.join('\n')).toMatch(/DIFF ses_a session/)
    expect(before.join('\n')).toContain('chain intact: 2 events')
    expect(before.at(-1)).toBe('no search index (the server builds it when it starts)')

    const rebuilt: string[] = []
    expect(await rebuildCommand(args(), terminal(rebuilt))).toBe(0)
    expect(rebuilt[0]).toMatch(/^rebuilt 1 sessions from 2 events in \d+ ms$/)
    expect(rebuilt[1]).toMatch(/^rebuilt the search index: 1 documents from 2 events in \d+ ms$/)

    const after: string[] = []
    expect(await verifyCommand(args(), terminal(after))).toBe(0)
    expect(after.slice(-2)).toEqual([
      '1 sessions checked, 0 differences',
      'search index through seq 2 of 2: 1 documents checked, 0 differences',
    ])
  })

  it('export reads the configured PostgreSQL store; restore, which installs an SQLite backup, refuses there', async () => {
    const log = await openPostgresStore(url)
    await log.append('ses_a', [{ type: 'session.created', data: { directory: '/w', agent: 'build', model: null } }], {
      meta: { actor: 'user' },
    })
    const chain = await log.chainOf('ses_a')
    await log.close()
    const lines: string[] = []
    expect(await exportCommand(args('ses_a'), terminal(lines))).toBe(0)
    expect(lines.map((l) => JSON.parse(l))).toEqual([
      { chronicle: 'session-export', format: expect.any(Number), sessionId: 'ses_a' },
      expect.objectContaining({
        seq: 1,
        sessionId: 'ses_a',
        type: 'session.created',
        hash: chain[0]?.hash?.toString('hex'),
      }),
    ])
    await expect(restoreCommand(args('/tmp/no-backup-here'), terminal([]))).rejects.toThrow(
      /the configured store is PostgreSQL .*export, import, audit, rebuild, verify and store copy work on PostgreSQL/,
    )
  })
})
