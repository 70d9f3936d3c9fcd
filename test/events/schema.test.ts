import Database from 'better-sqlite3'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { MIGRATIONS, migrate, schemaVersion, type Migration } from '../../src/events/schema.js'
import { EventStore } from '../../src/events/store.js'
import { openStore } from '../../src/projections/open.js'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import type { Part } from '../../src/projections/fold/model.js'
import { messageRow } from '../../src/projections/rows/message-rows.js'
import { encodePart } from '../../src/projections/rows/part-rows.js'
import { getParts, loadView } from '../../src/projections/queries/read-model.js'
import { rebuild } from '../../src/projections/upkeep/rebuild.js'
import { verify } from '../../src/projections/upkeep/verify.js'
import { created, delta, tempDirs, userMeta } from './fixtures/store.js'

const dirs = tempDirs()
afterEach(() => dirs.cleanup())

const recorded = (db: Database.Database) =>
  db.prepare('SELECT version, name FROM schema_migrations ORDER BY version').all()

describe('schema migrations', () => {
  it('are numbered 1, 2, 3… with no gaps or duplicates', () => {
    expect(MIGRATIONS.map((m) => m.version)).toEqual(MIGRATIONS.map((_, i) => i + 1))
  })

  it('apply once, in order, each recorded in schema_migrations; re-opening is a no-op', () => {
    const path = join(dirs.make(), 'm.db')
    const db = new Database(path)
    expect(migrate(db)).toBe(MIGRATIONS.length)
    expect(recorded(db)).toEqual(MIGRATIONS.map(({ version, name }) => ({ version, name })))
    expect(schemaVersion(db)).toBe(MIGRATIONS.length)
    const tables = db
      .prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view', 'trigger') ORDER BY name")
      .pluck()
      .all()
    expect(tables).toEqual(
      expect.arrayContaining([
        'events',
        'events_no_delete',
        'events_no_update',
        'messages',
        'parts',
        'schema_migrations',
        'sessions',
      ]),
    )
    expect(tables).not.toContain('part_text')
    const appliedAt = db.prepare('SELECT applied_at FROM schema_migrations').pluck().all()
    expect(migrate(db)).toBe(0)
    db.close()
    // Opening the store runs migrate again: nothing changes.
    const store = EventStore.open(path)
    expect(recorded(store.asCommitted.reader())).toEqual(MIGRATIONS.map(({ version, name }) => ({ version, name })))
    expect(store.asCommitted.reader().prepare('SELECT applied_at FROM schema_migrations').pluck().all()).toEqual(
      appliedAt,
    )
    store.close()
  })

  it('bring an older file up to date, applying only what it lacks', () => {
    const db = new Database(':memory:')
    expect(migrate(db, MIGRATIONS.slice(0, 1))).toBe(1)
    expect(schemaVersion(db)).toBe(1)
    expect(migrate(db)).toBe(MIGRATIONS.length - 1)
    expect(schemaVersion(db)).toBe(MIGRATIONS.length)
  })

  it('roll back a migration that fails, leaving it unrecorded', () => {
    const db = new Database(':memory:')
    migrate(db)
    const broken: Migration = {
      version: MIGRATIONS.length + 1,
      name: 'broken',
      sql: 'CREATE TABLE half (x); CREATE TABLE events (y);',
    }
    expect(() => migrate(db, [...MIGRATIONS, broken])).toThrow('events already exists')
    expect(schemaVersion(db)).toBe(MIGRATIONS.length)
    expect(db.prepare("SELECT COUNT(*) FROM sqlite_master WHERE name = 'half'").pluck().get()).toBe(0)
    const fixed: Migration = { ...broken, name: 'fixed', sql: 'CREATE TABLE half (x);' }
    expect(migrate(db, [...MIGRATIONS, fixed])).toBe(1)
    expect(migrate(db, [...MIGRATIONS, fixed])).toBe(0)
  })

  it('are not applied twice when two connections open one new file', () => {
    const path = join(dirs.make(), 'two.db')
    const a = EventStore.open(path)
    const b = EventStore.open(path)
    const late = new Database(path)
    expect(migrate(late, MIGRATIONS)).toBe(0)
    expect(recorded(late)).toHaveLength(MIGRATIONS.length)
    late.close()
    a.close()
    b.close()
  })

  it('read parts stored whole by older code unchanged, through every later migration', () => {
    const path = join(dirs.make(), 'old.db')
    const db = new Database(path)
    migrate(db, MIGRATIONS.slice(0, 2))
    const text = {
      id: 'prt_1',
      sessionId: 'ses_a',
      messageId: 'msg_1',
      type: 'text',
      text: 'héllo 😀 '.repeat(300),
      ended: true,
    }
    const tool = {
      id: 'prt_2',
      sessionId: 'ses_a',
      messageId: 'msg_1',
      type: 'tool',
      callId: 'c',
      tool: 'read',
      state: 'completed',
      rawInput: '{"filePath":"a"}',
      input: { filePath: 'a' },
      output: 'x',
    }
    const step = {
      id: 'prt_3',
      sessionId: 'ses_a',
      messageId: 'msg_1',
      type: 'step-start',
      step: 1,
      contextDigest: 'd',
    }
    const insert = db.prepare('INSERT INTO parts (session_id, id, message_id, data) VALUES (?, ?, ?, ?)')
    for (const p of [text, tool, step]) insert.run('ses_a', p.id, 'msg_1', JSON.stringify(p))
    migrate(db)
    expect(getParts({ reader: () => db }, 'ses_a')).toEqual([text, tool, step])
    db.close()
  })

  it('9 folds the slices of streaming parts back into their rows, and streaming goes on from the log', () => {
    // The same history twice: once through today's store (the reference), once
    // as a store at migration 8 whose read models are in the layout code of
    // that time wrote (slices in part_text, an updated_at column).
    const meta = { meta: userMeta }
    const history: ChronicleEvent[] = [
      created(),
      { type: 'message.created', data: { messageId: 'msg_1', role: 'assistant', agent: 'build', model: null } },
      { type: 'text.started', data: { messageId: 'msg_1', partId: 'prt_1' } },
      { type: 'tool.input.started', data: { messageId: 'msg_1', partId: 'prt_2', callId: 'c1', tool: 'read' } },
      delta('prt_1', 'a'.repeat(1500)),
      { type: 'tool.input.delta', data: { partId: 'prt_2', delta: '{"filePath":' } },
    ]
    const reference = openStore(join(dirs.make(), 'reference.db'))
    reference.append('ses_a', history, meta)
    const view = loadView(reference, 'ses_a')

    const path = join(dirs.make(), 'v8.db')
    const db = new Database(path)
    migrate(db, MIGRATIONS.slice(0, 8))
    const copy = db.prepare(
      'INSERT INTO events (seq, session_id, version, type, schema_version, data, meta, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    )
    for (const e of reference.readSession('ses_a'))
      copy.run(
        e.seq,
        e.sessionId,
        e.version,
        e.type,
        e.schemaVersion,
        JSON.stringify(e.data),
        JSON.stringify(e.meta),
        Date.parse(e.at),
      )
    const session = view.session as NonNullable<typeof view.session>
    db.prepare('INSERT INTO sessions (id, parent_id, archived, updated_at, data) VALUES (?, NULL, 0, ?, ?)').run(
      'ses_a',
      session.updatedAt,
      JSON.stringify(session),
    )
    for (const m of view.messages.values())
      db.prepare('INSERT INTO messages (session_id, id, data) VALUES (?, ?, ?)').run(
        'ses_a',
        m.id,
        messageRow('ses_a', m.id, m),
      )
    const slice = db.prepare('INSERT INTO part_text (session_id, part_id, n, start, text) VALUES (?, ?, ?, ?, ?)')
    for (const p of view.parts.values()) {
      const field = p.type === 'tool' ? 'rawInput' : 'text'
      const value = (p as unknown as Record<string, string>)[field] as string
      db.prepare('INSERT INTO parts (session_id, id, message_id, data) VALUES (?, ?, ?, ?)').run(
        'ses_a',
        p.id,
        'msg_1',
        encodePart('ses_a', { ...p, [field]: '' } as Part),
      )
      for (let n = 0; n * 1024 < value.length; n++)
        slice.run('ses_a', p.id, n, n * 1024, value.slice(n * 1024, (n + 1) * 1024))
    }
    db.close()

    const store = openStore(path)
    expect(schemaVersion(store.asCommitted.reader())).toBe(MIGRATIONS.length)
    expect(loadView(store, 'ses_a')).toEqual(view)
    expect(store.asCommitted.reader().prepare('SELECT id, through FROM parts ORDER BY id').all()).toEqual([
      { id: 'prt_1', through: 6 },
      { id: 'prt_2', through: 6 },
    ])
    const more: ChronicleEvent[] = [
      delta('prt_1', 'b'),
      { type: 'tool.input.delta', data: { partId: 'prt_2', delta: '"a"}' } },
      { type: 'text.ended', data: { partId: 'prt_1' } },
    ]
    for (const s of [store, reference]) s.append('ses_a', more, meta)
    // (the two appends commit a moment apart)
    const timeless = (s: EventStore) => ({
      ...loadView(s, 'ses_a'),
      session: { ...loadView(s, 'ses_a').session, updatedAt: '' },
    })
    expect(timeless(store)).toEqual(timeless(reference))
    expect(getParts(store, 'ses_a')).toMatchObject([
      { text: `${'a'.repeat(1500)}b`, ended: true },
      { rawInput: '{"filePath":"a"}' },
    ])
    expect(verify(store).differences).toEqual([])
    rebuild(store)
    expect(timeless(store)).toEqual(timeless(reference))
    store.close()
    reference.close()
  })
})
