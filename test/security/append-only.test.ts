import Database from 'better-sqlite3'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { decideSession } from '../../src/commands/session.js'
import { registerFunctions } from '../../src/events/schema.js'
import { openStore } from '../../src/projections/open.js'
import { executeNow } from '../support/execute-now.js'

/**
 * Finding 7 (docs/SECURITY.md): the log is append-only against any
 * connection, not only the store's. `INSERT OR REPLACE` deletes the row it
 * conflicts with without firing DELETE triggers (unless recursive_triggers is
 * on), and an upsert rewrites it: both are refused on the log and on the
 * lookup tables its rows are joined from. A plain connection opened on the
 * file — what a tamperer would use — plays the attacker.
 */

let raw: Database.Database | undefined
afterEach(() => raw?.close())

function loggedDb(): { path: string; row: Record<string, unknown> } {
  const path = join(mkdtempSync(join(tmpdir(), 'chronicle-append-only-')), 'chronicle.db')
  const store = openStore(path)
  executeNow(
    store,
    'ses_a',
    (s) => decideSession({ type: 'create', directory: '/w', agent: 'build', model: null }, s, 'ses_a'),
    { meta: { actor: 'user' } },
  )
  executeNow(store, 'ses_a', () => [{ type: 'session.renamed', data: { title: 'the original title' } }], {
    meta: { actor: 'user' },
  })
  store.close()
  raw = new Database(path)
  registerFunctions(raw)
  return { path, row: raw.prepare('SELECT * FROM event_log WHERE seq = 2').get() as Record<string, unknown> }
}

const IMMUTABLE = /events are immutable: an insert may not replace a logged (event|row)/

describe('no statement replaces a logged row', () => {
  const attacks: [string, (db: Database.Database, row: Record<string, unknown>) => unknown][] = [
    [
      'INSERT OR REPLACE on event_log (same seq)',
      (db, r) =>
        db
          .prepare(
            'INSERT OR REPLACE INTO event_log (seq, stream, version, type, schema_version, data, meta, at, part) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
          )
          .run(r.seq, r.stream, r.version, r.type, r.schema_version, '{"title":"rewritten"}', r.meta, r.at, null),
    ],
    [
      'REPLACE INTO event_log (same stream and version, new seq)',
      (db, r) =>
        db
          .prepare(
            'REPLACE INTO event_log (stream, version, type, schema_version, data, meta, at, part) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
          )
          .run(r.stream, r.version, r.type, r.schema_version, '{"title":"rewritten"}', r.meta, r.at, null),
    ],
    [
      'an upsert on event_log',
      (db, r) =>
        db
          .prepare(
            'INSERT INTO event_log (seq, stream, version, type, schema_version, data, meta, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (seq) DO UPDATE SET data = excluded.data',
          )
          .run(r.seq, r.stream, r.version, r.type, r.schema_version, '{"title":"rewritten"}', r.meta, r.at),
    ],
    [
      'INSERT OR REPLACE on streams (renames a session id)',
      (db) => db.prepare("INSERT OR REPLACE INTO streams (id, session_id) VALUES (1, 'ses_forged')").run(),
    ],
    [
      'INSERT OR REPLACE on event_types (retypes every event)',
      (db) => db.prepare("INSERT OR REPLACE INTO event_types (id, type) VALUES (1, 'session.archived')").run(),
    ],
    [
      'INSERT OR REPLACE on event_metas (re-attributes events)',
      (db) => db.prepare(`INSERT OR REPLACE INTO event_metas (id, meta) VALUES (1, '{"actor":"runtime"}')`).run(),
    ],
    [
      'an upsert on event_parts',
      (db) => {
        db.prepare("INSERT INTO event_parts (id, part_id) VALUES (1000, 'prt_a')").run()
        return db
          .prepare(
            "INSERT INTO event_parts (id, part_id) VALUES (1000, 'prt_b') ON CONFLICT (id) DO UPDATE SET part_id = excluded.part_id",
          )
          .run()
      },
    ],
  ]

  it.each(attacks)('%s is refused and the log is unchanged', (_name, attack) => {
    const { row } = loggedDb()
    const db = raw as Database.Database
    const before = db.prepare('SELECT seq, session_id, version, type, data, meta FROM events ORDER BY seq').all()
    expect(() => attack(db, row)).toThrow(IMMUTABLE)
    expect(db.prepare('SELECT seq, session_id, version, type, data, meta FROM events ORDER BY seq').all()).toEqual(
      before,
    )
  })

  it('the events view still takes new rows, interning what is missing', () => {
    loggedDb()
    const db = raw as Database.Database
    db.prepare(
      "INSERT INTO events (seq, session_id, version, type, schema_version, data, meta, at) VALUES (NULL, 'ses_new', 1, 'session.archived', 1, '{}', '{\"actor\":\"user\"}', 0)",
    ).run()
    db.prepare(
      "INSERT INTO events (seq, session_id, version, type, schema_version, data, meta, at) VALUES (NULL, 'ses_new', 2, 'session.archived', 1, '{}', '{\"actor\":\"user\"}', 0)",
    ).run()
    expect(db.prepare("SELECT version, type FROM events WHERE session_id = 'ses_new' ORDER BY seq").all()).toEqual([
      { version: 1, type: 'session.archived' },
      { version: 2, type: 'session.archived' },
    ])
  })
})
