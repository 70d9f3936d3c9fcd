import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { checkChain } from '../../src/events/chain-check.js'
import { openStore } from '../../src/projections/open.js'
import { conversation } from '../projections/scenarios.js'
import { runInProcess } from '../cli/helpers.js'
import { usePostgres } from '../support/use-postgres.js'

/**
 * A PostgreSQL store is backed up with PostgreSQL's own tools (docs/BACKUP.md
 * "PostgreSQL"): pg_dump of the database, pg_restore into an empty one, then
 * `chronicle verify --url` there — every chain recomputed, every session
 * against a fold of its log, and its head the one recorded at the dump.
 */
const postgres = usePostgres()
const dir = mkdtempSync(join(tmpdir(), 'chronicle-pgdump-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('pg_dump and pg_restore, then chronicle verify --url', () => {
  it('the restored database verifies with the same head; another head is a mismatch, exit 1', async () => {
    const data = join(dir, 'data')
    mkdirSync(data)
    const store = openStore(join(data, 'chronicle.db'))
    conversation(store, 'ses_dump', 4)
    const head = checkChain(store.asCommitted.reader()).head
    store.close()
    const env = { CHRONICLE_DATA_DIR: data, CHRONICLE_URL: 'http://127.0.0.1:9' }
    const source = await postgres().database()
    expect((await runInProcess(['store', 'copy', '--to', source], env)).code).toBe(0)

    const dump = join(dir, 'chronicle.dump')
    execFileSync('pg_dump', ['--format=custom', '--file', dump, '--dbname', source])
    const restored = await postgres().database()
    execFileSync('pg_restore', ['--no-owner', '--exit-on-error', '--dbname', restored, dump])

    const verified = await runInProcess(['verify', '--url', restored, '--head', `${head.seq}:${head.digest}`], env)
    expect([verified.code, verified.stdout]).toEqual([
      0,
      `chain intact: ${head.seq} events; head ${head.seq}:${head.digest}\n1 sessions checked, 0 differences\nno search index (the server builds it when it starts)\n`,
    ])
    const other = await runInProcess(['verify', '--url', restored, '--head', `${head.seq}:${'0'.repeat(64)}`], env)
    expect(other.code).toBe(1)
    expect(other.stdout).toContain(`MISMATCH its head is ${head.seq}:${head.digest}, not ${head.seq}:${'0'.repeat(64)}`)
  })
})
