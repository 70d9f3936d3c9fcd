import Database from 'better-sqlite3'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { MIGRATIONS, migrate, schemaVersion, type Migration } from '../../src/events/schema.js'
import { EventStore } from '../../src/events/store.js'
import { openStore } from '../../src/projections/open.js'
import { getParts } from '../../src/projections/read-model.js'
import { rebuild } from '../../src/projections/rebuild.js'
import { verify } from '../../src/projections/verify.js'
import { created, tempDirs, userMeta } from './fixtures/store.js'

const dirs = tempDirs()
afterEach(() => dirs.cleanup())

const recorded = (db: Database.Database) => db.prepare('SELECT version, name FROM schema_migrations ORDER BY version').all()

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
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view', 'trigger') ORDER BY name").pluck().all()
    expect(tables).toEqual(expect.arrayContaining(['events', 'events_no_delete', 'events_no_update', 'messages', 'part_text', 'parts', 'schema_migrations', 'sessions']))
    const appliedAt = db.prepare('SELECT applied_at FROM schema_migrations').pluck().all()
    expect(migrate(db)).toBe(0)
    db.close()
    // Opening the store runs migrate again: nothing changes.
    const store = EventStore.open(path)
    expect(recorded(store.db)).toEqual(MIGRATIONS.map(({ version, name }) => ({ version, name })))
    expect(store.db.prepare('SELECT applied_at FROM schema_migrations').pluck().all()).toEqual(appliedAt)
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
    const broken: Migration = { version: MIGRATIONS.length + 1, name: 'broken', sql: 'CREATE TABLE half (x); CREATE TABLE events (y);' }
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

  it('3 moves the text of parts stored by older code into slices, unchanged', () => {
    const path = join(dirs.make(), 'old.db')
    const db = new Database(path)
    migrate(db, MIGRATIONS.slice(0, 2))
    const text = { id: 'prt_1', sessionId: 'ses_a', messageId: 'msg_1', type: 'text', text: 'héllo 😀 '.repeat(300), ended: true }
    const tool = { id: 'prt_2', sessionId: 'ses_a', messageId: 'msg_1', type: 'tool', callId: 'c', tool: 'read', state: 'pending', rawInput: '{"filePath":' }
    const step = { id: 'prt_3', sessionId: 'ses_a', messageId: 'msg_1', type: 'step-start', step: 1, contextDigest: 'd' }
    const insert = db.prepare('INSERT INTO parts (session_id, id, message_id, data) VALUES (?, ?, ?, ?)')
    for (const p of [text, tool, step]) insert.run('ses_a', p.id, 'msg_1', JSON.stringify(p))
    migrate(db)
    expect(getParts(db, 'ses_a')).toEqual([text, tool, step])
    expect(db.prepare('SELECT part_id, n, start FROM part_text ORDER BY part_id').all()).toEqual([
      { part_id: 'prt_1', n: 0, start: 0 },
      { part_id: 'prt_2', n: 0, start: 0 },
    ])
    db.close()
  })

  it('3 leaves a store whose streaming parts keep growing correctly from an oversized slice', () => {
    const path = join(dirs.make(), 'grow.db')
    const store = openStore(path)
    store.append('ses_a', [created(), { type: 'message.created', data: { messageId: 'msg_1', role: 'assistant', agent: 'build', model: null } }, { type: 'text.started', data: { messageId: 'msg_1', partId: 'prt_1' } }, { type: 'text.delta', data: { partId: 'prt_1', text: 'a'.repeat(5000) } }], { meta: userMeta })
    // As migration 3 leaves old text: all of it in slice 0.
    store.db.exec("DELETE FROM part_text; INSERT INTO part_text (session_id, part_id, n, start, text) VALUES ('ses_a', 'prt_1', 0, 0, '" + 'a'.repeat(5000) + "')")
    store.close()
    const reopened = openStore(path)
    reopened.append('ses_a', [{ type: 'text.delta', data: { partId: 'prt_1', text: 'b'.repeat(3000) } }], { meta: userMeta })
    expect(getParts(reopened.db, 'ses_a')[0]).toMatchObject({ text: 'a'.repeat(5000) + 'b'.repeat(3000) })
    expect(verify(reopened).differences).toEqual([])
    reopened.close()
  })
})

describe('a live store after rebuild', () => {
  it('keeps appending to a part whose old single-slice text it re-cut, across a rebuild', () => {
    const path = join(dirs.make(), 'rebuilt.db')
    const old = openStore(path)
    old.append('ses_a', [created(), { type: 'message.created', data: { messageId: 'msg_1', role: 'assistant', agent: 'build', model: null } }, { type: 'text.started', data: { messageId: 'msg_1', partId: 'prt_1' } }, { type: 'text.delta', data: { partId: 'prt_1', text: 'a'.repeat(3000) } }], { meta: userMeta })
    // As migration 3 leaves text stored by older code: all of it in slice 0.
    old.db.exec("DELETE FROM part_text; INSERT INTO part_text (session_id, part_id, n, start, text) VALUES ('ses_a', 'prt_1', 0, 0, '" + 'a'.repeat(3000) + "')")
    old.close()
    const store = openStore(path)
    store.append('ses_a', [{ type: 'text.delta', data: { partId: 'prt_1', text: 'b' } }], { meta: userMeta })
    rebuild(store)
    store.append('ses_a', [{ type: 'text.delta', data: { partId: 'prt_1', text: 'c'.repeat(2000) } }], { meta: userMeta })
    expect(getParts(store.db, 'ses_a')[0]).toMatchObject({ text: `${'a'.repeat(3000)}b${'c'.repeat(2000)}` })
    expect(store.db.prepare('SELECT n, start, length(text) AS length FROM part_text ORDER BY n').all()).toEqual([
      { n: 0, start: 0, length: 1024 },
      { n: 1, start: 1024, length: 1024 },
      { n: 2, start: 2048, length: 1024 },
      { n: 3, start: 3072, length: 1024 },
      { n: 4, start: 4096, length: 905 },
    ])
    expect(verify(store).differences).toEqual([])
    store.close()
  })
})
