import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import Database from 'better-sqlite3'
import { afterAll, describe, expect, it } from 'vitest'
import { ChronicleError } from '../../src/events/errors.js'
import { MIGRATIONS, registerFunctions } from '../../src/events/schema.js'
import { openStore } from '../../src/projections/open.js'
import { verify } from '../../src/projections/upkeep/verify.js'
import { run } from '../cli/helpers.js'

/**
 * An upgrade that cannot be done leaves the store as it was, and says why
 * (docs/UPGRADES.md): a migration that fails part-way rolls back every
 * pending one; a store written by a newer Chronicle is refused, never
 * "repaired".
 */
const root = mkdtempSync(join(tmpdir(), 'chronicle-upgrade-refusals-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

/** A copy of the store schema version 1 wrote (test/fixtures/stores), in a data dir of its own. */
function firstVersionStore(): { dataDir: string; file: string } {
  const dataDir = mkdtempSync(join(root, 'data-'))
  const file = join(dataDir, 'chronicle.db')
  const fixture = join(import.meta.dirname, '../fixtures/stores/v01-acb1f72/store.db.gz')
  writeFileSync(file, gunzipSync(readFileSync(fixture)))
  return { dataDir, file }
}

/** Every table's and index's definition and every row, as text: what "the store as it was" means. */
function contents(file: string): string {
  const db = new Database(file, { readonly: true })
  registerFunctions(db)
  try {
    const schema = db.prepare('SELECT type, name, sql FROM sqlite_master ORDER BY type, name').all() as {
      type: string
      name: string
    }[]
    const hex = (_k: string, v: unknown) => (Buffer.isBuffer(v) ? v.toString('hex') : v)
    // some version-1 tables are WITHOUT ROWID: rows are compared as a sorted list
    const rows = schema
      .filter((s) => s.type === 'table')
      .map((s) => [
        s.name,
        db
          .prepare(`SELECT * FROM "${s.name}"`)
          .all()
          .map((r) => JSON.stringify(r, hex))
          .sort(),
      ])
    return JSON.stringify({ schema, rows })
  } finally {
    db.close()
  }
}

function opening(file: string): ChronicleError {
  try {
    openStore(file, { snapshotOnCommit: false }).close()
  } catch (err) {
    if (err instanceof ChronicleError) return err
    throw err
  }
  throw new Error('the store opened')
}

describe('a migration that fails part-way', () => {
  it('rolls back every pending migration, names the one that failed, and the store opens once its cause is gone', () => {
    const { file } = firstVersionStore()
    // Something of the user's where migration 13 puts its table: 2 to 12 apply, then 13 fails.
    const db = new Database(file)
    db.exec('CREATE TABLE log_chain (note TEXT)')
    db.close()
    const before = contents(file)

    const err = opening(file)
    expect(err.code).toBe('MIGRATION_FAILED')
    expect(err.message).toBe(
      'schema migration 13 (hash chains) failed: table log_chain already exists. Nothing was changed: the store is still at schema version 1. Keep the file; `chronicle verify` with the previous version checks it, and a backup can be restored (docs/UPGRADES.md)',
    )
    expect(contents(file)).toBe(before)

    const fixed = new Database(file)
    fixed.exec('DROP TABLE log_chain')
    fixed.close()
    const store = openStore(file, { snapshotOnCommit: false })
    try {
      const report = verify(store)
      expect(report.differences).toEqual([])
      expect(report.chain.breaks).toEqual([])
    } finally {
      store.close()
    }
  })
})

describe('a store written by a newer Chronicle', () => {
  /** The fixture brought up to date, then marked as a later version had migrated it. */
  function newerStore(): { dataDir: string; file: string } {
    const store = firstVersionStore()
    openStore(store.file, { snapshotOnCommit: false }).close()
    const db = new Database(store.file)
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
      MIGRATIONS.length + 1,
      'from the future',
      Date.now(),
    )
    db.close()
    return store
  }

  it('is refused on opening, with what to do, and left as it is', () => {
    const { file } = newerStore()
    const before = contents(file)
    const err = opening(file)
    expect(err.code).toBe('STORE_TOO_NEW')
    expect(err.message).toBe(
      `this store was written by a newer Chronicle (schema version ${MIGRATIONS.length + 1}; this one knows up to ${MIGRATIONS.length}): it is left as it is. Run that version (or newer) on it, or restore a backup taken before the upgrade (docs/UPGRADES.md)`,
    )
    expect(contents(file)).toBe(before)
  })

  it('is not served: `chronicle serve` says so and exits', async () => {
    const { dataDir, file } = newerStore()
    const before = contents(file)
    const serve = run(['serve'], { CHRONICLE_DATA_DIR: dataDir, CHRONICLE_PORT: '0', CHRONICLE_LOG_LEVEL: 'warn' })
    expect(await serve.exited).toBe(1)
    expect(serve.stderr).toContain(
      `chronicle: this store was written by a newer Chronicle (schema version ${MIGRATIONS.length + 1}; this one knows up to ${MIGRATIONS.length})`,
    )
    expect(contents(file)).toBe(before)
  }, 30_000)

  it('is not "repaired" by rebuild or verify either', async () => {
    const { dataDir, file } = newerStore()
    const before = contents(file)
    for (const command of ['rebuild', 'verify']) {
      const cli = run([command], { CHRONICLE_DATA_DIR: dataDir, CHRONICLE_URL: 'http://127.0.0.1:9' })
      expect(await cli.exited).toBe(1)
      expect(cli.stderr).toContain('chronicle: this store was written by a newer Chronicle')
    }
    expect(contents(file)).toBe(before)
  }, 30_000)
})
