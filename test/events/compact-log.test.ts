import Database from 'better-sqlite3'
import { join } from 'node:path'
import { deflateRawSync } from 'node:zlib'
import { afterEach, describe, expect, it } from 'vitest'
import { deflated, inflated, MIGRATIONS, metaKey, migrate, windowFor } from '../../src/events/schema.js'
import { EventStore } from '../../src/events/store.js'
import { created, delta, modelMeta, renamed, tempDirs, userMeta } from './fixtures/store.js'

/**
 * Migration 5 stores events in event_log with the session id, type and meta
 * interned as integers; `events` is a view with the original columns. These
 * pin that nothing a reader sees changes, and that an interned id never
 * outlives the transaction that made it.
 */

const dirs = tempDirs()
afterEach(() => dirs.cleanup())

const events = (store: EventStore) => store.readAll(0, 10_000)

describe('the compact event log', () => {
  it('5 carries every event of an older file over unchanged, seqs included', () => {
    const path = join(dirs.make(), 'old.db')
    const db = new Database(path)
    migrate(db, MIGRATIONS.slice(0, 4))
    const insert = db.prepare(
      'INSERT INTO events (seq, session_id, version, type, schema_version, data, meta, at) VALUES (?, ?, ?, ?, 1, ?, ?, ?)',
    )
    insert.run(
      3,
      'ses_a',
      1,
      'session.created',
      '{"directory":"/r","agent":"build","model":null}',
      '{"actor":"user"}',
      1000,
    )
    insert.run(
      7,
      'ses_b',
      1,
      'session.created',
      '{"directory":"/s","agent":"build","model":null}',
      '{"actor":"user"}',
      2000,
    )
    insert.run(9, 'ses_a', 2, 'session.renamed', '{"title":"t"}', '{"actor":"model","run":"run_1"}', 3000)
    db.close()
    const store = EventStore.open(path)
    expect(events(store).map((e) => [e.seq, e.sessionId, e.version, e.type, e.data, e.meta, e.at])).toEqual([
      [
        3,
        'ses_a',
        1,
        'session.created',
        { directory: '/r', agent: 'build', model: null },
        { actor: 'user' },
        new Date(1000).toISOString(),
      ],
      [
        7,
        'ses_b',
        1,
        'session.created',
        { directory: '/s', agent: 'build', model: null },
        { actor: 'user' },
        new Date(2000).toISOString(),
      ],
      [
        9,
        'ses_a',
        2,
        'session.renamed',
        { title: 't' },
        { actor: 'model', run: 'run_1' },
        new Date(3000).toISOString(),
      ],
    ])
    expect(store.append('ses_a', [renamed('u')], { meta: userMeta }).map((e) => [e.seq, e.version])).toEqual([[10, 3]])
    expect(store.asCommitted.reader().prepare('SELECT COUNT(*) FROM streams').pluck().get()).toBe(2)
    store.close()
  })

  it('stores each session id, type and meta once, however many events repeat it', () => {
    const store = EventStore.open(':memory:')
    store.append('ses_a', [created()], { meta: userMeta })
    store.append('ses_a', [renamed('x'), renamed('y'), renamed('z')], { meta: modelMeta })
    store.append('ses_b', [created(), renamed('x')], { meta: modelMeta })
    const count = (table: string) => store.asCommitted.reader().prepare(`SELECT COUNT(*) FROM ${table}`).pluck().get()
    expect([count('event_log'), count('streams'), count('event_types'), count('event_metas')]).toEqual([6, 2, 2, 2])
    expect(events(store).map((e) => [e.sessionId, e.type, e.meta])).toEqual([
      ['ses_a', 'session.created', userMeta],
      ['ses_a', 'session.renamed', modelMeta],
      ['ses_a', 'session.renamed', modelMeta],
      ['ses_a', 'session.renamed', modelMeta],
      ['ses_b', 'session.created', modelMeta],
      ['ses_b', 'session.renamed', modelMeta],
    ])
  })

  it('forgets the ids a rolled-back batch made: the retry stores them again', async () => {
    const store = EventStore.open(':memory:')
    store.append('ses_a', [created()], { meta: userMeta })
    // The batch interns a new session, type and meta, then fails on the conflict and rolls
    // back; each append is retried alone, and ses_b's must not reuse the vanished ids.
    const meta = { actor: 'runtime' as const, run: 'run_9' }
    const fresh = store.enqueue('ses_b', [created(), delta('prt_1', 'hi')], { meta })
    const conflicting = store.enqueue('ses_a', [renamed('x')], { meta: userMeta, expectedVersion: 5 })
    store.reader() // commits what is queued, in one batch
    await expect(conflicting).rejects.toMatchObject({ code: 'VERSION_CONFLICT' })
    expect((await fresh).map((e) => [e.seq, e.version])).toEqual([
      [2, 1],
      [3, 2],
    ])
    expect(events(store).map((e) => [e.seq, e.sessionId, e.type, e.meta])).toEqual([
      [1, 'ses_a', 'session.created', userMeta],
      [2, 'ses_b', 'session.created', meta],
      [3, 'ses_b', 'text.delta', meta],
    ])
  })

  it("does not remember ids made inside a caller's transaction that the caller rolls back", () => {
    const store = EventStore.open(':memory:')
    const meta = { actor: 'user' as const, request: 'req_1' }
    const caller = store.asCommitted.reader().transaction(() => {
      store.append('ses_c', [created(), renamed('c')], { meta })
      throw new Error('the caller fails')
    })
    expect(() => caller()).toThrow('the caller fails')
    expect(store.version('ses_c')).toBe(0)
    expect(store.asCommitted.reader().prepare('SELECT COUNT(*) FROM streams').pluck().get()).toBe(0)
    store.append('ses_c', [created(), renamed('c')], { meta })
    expect(events(store).map((e) => [e.sessionId, e.version, e.type, e.meta])).toEqual([
      ['ses_c', 1, 'session.created', meta],
      ['ses_c', 2, 'session.renamed', meta],
    ])
  })

  it('6 stores a leading plain partId as an integer and gives the same JSON back, byte for byte', () => {
    const store = EventStore.open(':memory:')
    const quoted = 'prt_"q"\\é'
    const written = [
      created(),
      { type: 'message.created', data: { messageId: 'msg_1', role: 'assistant', agent: 'build', model: null } },
      { type: 'text.started', data: { messageId: 'msg_1', partId: 'prt_1' } },
      delta('prt_1', 'hello'),
      delta('prt_1', ' world'),
      delta(quoted, 'x'),
      { type: 'text.ended', data: { partId: 'prt_1' } },
    ] as const
    store.append('ses_a', [...written], { meta: userMeta })
    const stored = store.asCommitted.reader().prepare('SELECT part, data FROM event_log ORDER BY seq').all()
    expect(stored).toEqual([
      { part: null, data: JSON.stringify(written[0].data) },
      { part: null, data: JSON.stringify(written[1].data) },
      { part: null, data: JSON.stringify(written[2].data) }, // partId is not its first key
      { part: 1, data: ',"text":"hello"}' },
      { part: 1, data: ',"text":" world"}' },
      { part: null, data: JSON.stringify(written[5].data) }, // an id JSON escapes stays whole
      { part: 1, data: '}' },
    ])
    expect(store.asCommitted.reader().prepare('SELECT data FROM events ORDER BY seq').pluck().all()).toEqual(
      written.map((e) => JSON.stringify(e.data)),
    )
    expect(
      store.asCommitted
        .reader()
        .prepare("SELECT COUNT(*) FROM events WHERE data ->> '$.partId' = 'prt_1'")
        .pluck()
        .get(),
    ).toBe(4)
    expect(events(store).map((e) => e.data)).toEqual(written.map((e) => e.data))
  })

  it('7 stores data of DEFLATE_FROM characters or more deflated, and every reader gets the JSON back byte for byte', () => {
    const store = EventStore.open(':memory:')
    const output = 'lorem ipsum é ✓ '.repeat(40)
    const written = [
      created(),
      { type: 'session.renamed', data: { title: 'ab'.repeat(200) } },
      { type: 'tool.completed', data: { partId: 'prt_1', output, title: 't' } },
      { type: 'tool.completed', data: { partId: 'prt_2', output: 'short' } },
    ] as const
    store.append('ses_a', [...written], { meta: userMeta })
    const stored = store.asCommitted
      .reader()
      .prepare('SELECT part, typeof(data) AS kind FROM event_log ORDER BY seq')
      .all()
    expect(stored).toEqual([
      { part: null, kind: 'text' },
      { part: null, kind: 'blob' },
      { part: 1, kind: 'blob' }, // the rest after the interned partId is what is deflated
      { part: 2, kind: 'text' },
    ])
    const blobs = store.asCommitted
      .reader()
      .prepare("SELECT SUM(length(data)) FROM event_log WHERE typeof(data) = 'blob'")
      .pluck()
      .get() as number
    expect(blobs).toBeLessThan(JSON.stringify(written[1].data).length)
    expect(store.asCommitted.reader().prepare('SELECT data FROM events ORDER BY seq').pluck().all()).toEqual(
      written.map((e) => JSON.stringify(e.data)),
    )
    expect(
      store.asCommitted
        .reader()
        .prepare("SELECT data ->> '$.output' FROM events WHERE type = 'tool.completed' ORDER BY seq")
        .pluck()
        .all(),
    ).toEqual([output, 'short'])
    expect(events(store).map((e) => e.data)).toEqual(written.map((e) => e.data))
  })

  it('7 deflates with a window as large as the data: the same size as the default window, read back alike', () => {
    for (const size of [256, 511, 513, 4_000, 40_000, 100_000]) {
      const words = Array.from({ length: size / 4 }, (_, i) => `w${(i * 7919) % 997}`)
      const json = JSON.stringify({ text: words.join(' ').slice(0, size) })
      const packed = deflated(json) as Buffer
      expect(Buffer.isBuffer(packed)).toBe(true)
      expect(2 ** windowFor(Buffer.byteLength(json))).toBeGreaterThanOrEqual(Math.min(Buffer.byteLength(json), 2 ** 15))
      expect(packed.length).toBeLessThanOrEqual(deflateRawSync(json).length)
      expect(inflated(packed)).toBe(json)
    }
  })

  it('8 keeps each meta once, found by its tail, in files that had them and for the view trigger alike', () => {
    const path = join(dirs.make(), 'metas.db')
    const db = new Database(path)
    migrate(db, MIGRATIONS.slice(0, 7))
    const insert = db.prepare(
      'INSERT INTO events (seq, session_id, version, type, schema_version, data, meta, at) VALUES (?, ?, ?, ?, 1, ?, ?, ?)',
    )
    insert.run(
      1,
      'ses_a',
      1,
      'session.created',
      '{"directory":"/r","agent":"build","model":null}',
      '{"actor":"user"}',
      1000,
    )
    insert.run(2, 'ses_a', 2, 'session.renamed', '{"title":"t"}', '{"actor":"model","run":"run_1"}', 2000)
    db.close()
    const store = EventStore.open(path)
    const metas = () => store.asCommitted.reader().prepare('SELECT id, meta FROM event_metas ORDER BY id').all()
    expect(metas()).toEqual([
      { id: 1, meta: '{"actor":"user"}' },
      { id: 2, meta: '{"actor":"model","run":"run_1"}' },
    ])
    // same tail as run_1's model meta, different meta: a new row
    store.append('ses_a', [renamed('u')], { meta: { actor: 'runtime', run: 'run_1' } })
    store.append('ses_a', [renamed('v')], { meta: modelMeta })
    store.asCommitted
      .reader()
      .prepare(
        'INSERT INTO events (seq, session_id, version, type, schema_version, data, meta, at) VALUES (?, ?, ?, ?, 1, ?, ?, ?)',
      )
      .run(9, 'ses_a', 5, 'session.renamed', '{"title":"w"}', '{"actor":"runtime","run":"run_1"}', 3000)
    expect(metas()).toEqual([
      { id: 1, meta: '{"actor":"user"}' },
      { id: 2, meta: '{"actor":"model","run":"run_1"}' },
      { id: 3, meta: '{"actor":"runtime","run":"run_1"}' },
    ])
    expect(events(store).map((e) => [e.version, e.meta])).toEqual([
      [1, { actor: 'user' }],
      [2, { actor: 'model', run: 'run_1' }],
      [3, { actor: 'runtime', run: 'run_1' }],
      [4, { actor: 'model', run: 'run_1' }],
      [5, { actor: 'runtime', run: 'run_1' }],
    ])
    store.close()
  })

  it("16 finds each meta by a hash of the whole: metas that end alike, as every session's first input does, share no key", () => {
    const path = join(dirs.make(), 'keys.db')
    const db = new Database(path)
    migrate(db, MIGRATIONS.slice(0, 15))
    const insert = db.prepare(
      'INSERT INTO events (seq, session_id, version, type, schema_version, data, meta, at) VALUES (?, ?, 1, ?, 1, ?, ?, ?)',
    )
    // one session each, each first input named in_1 by its client, each sent by a request of its own
    const input = (k: number) => `{"actor":"user","commandId":"req-${k}","input":"in_1"}`
    for (let k = 1; k <= 200; k++)
      insert.run(k, `ses_${k}`, 'session.created', '{"directory":"/r","agent":"build","model":null}', input(k), k)
    db.close()
    const store = EventStore.open(path)
    const reader = store.asCommitted.reader()
    const metas = () =>
      reader.prepare('SELECT meta, key FROM event_metas ORDER BY id').all() as { meta: string; key: number }[]
    expect(metas().every((m) => m.key === metaKey(m.meta))).toBe(true)
    const widest = () =>
      reader.prepare('SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM event_metas GROUP BY key)').pluck()
    expect(widest().get()).toBe(1)
    // a lookup reads the key's index, then compares the one row it finds
    const plan = reader.prepare('EXPLAIN QUERY PLAN SELECT id FROM event_metas WHERE key = ? AND meta = ?').all(1, 'x')
    expect(JSON.stringify(plan)).toContain('event_metas_by_key')

    // the store and the view's trigger find a meta they hold, and add one they do not, with its key
    store.append('ses_1', [renamed('u')], { meta: JSON.parse(input(1)) })
    store.append('ses_2', [renamed('v')], { meta: JSON.parse(input(201)) })
    const insertIntoView = reader.prepare(
      'INSERT INTO events (seq, session_id, version, type, schema_version, data, meta, at) VALUES (?, ?, ?, ?, 1, ?, ?, ?)',
    )
    insertIntoView.run(203, 'ses_3', 2, 'session.renamed', '{"title":"w"}', input(202), 3000)
    insertIntoView.run(204, 'ses_4', 2, 'session.renamed', '{"title":"x"}', input(4), 4000)
    expect(metas().map((m) => m.meta)).toEqual(Array.from({ length: 202 }, (_, k) => input(k + 1)))
    expect(metas().every((m) => m.key === metaKey(m.meta))).toBe(true)
    expect(widest().get()).toBe(1)
    expect(store.readAll(200, 10).map((e) => [e.sessionId, e.meta.commandId])).toEqual([
      ['ses_1', 'req-1'],
      ['ses_2', 'req-201'],
      ['ses_3', 'req-202'],
      ['ses_4', 'req-4'],
    ])
    store.close()
  })
})
