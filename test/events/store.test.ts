import Database from 'better-sqlite3'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { StoredEvent } from '../../src/events/envelope.js'
import { ChronicleError } from '../../src/events/errors.js'
import { EventStore } from '../../src/events/store.js'
import { registerFunctions } from '../../src/events/schema.js'
import { openStore } from '../../src/projections/open.js'
import { getParts, getSession } from '../../src/projections/queries/read-model.js'
import { count, created, delta, modelMeta, renamed, tempDirs, userMeta } from './fixtures/store.js'

const dirs = tempDirs()
afterEach(() => dirs.cleanup())

/** The error a function throws (fails the test when it does not throw). */
function thrown(fn: () => unknown): ChronicleError {
  try {
    fn()
  } catch (err) {
    expect(err).toBeInstanceOf(ChronicleError)
    return err as ChronicleError
  }
  throw new Error('expected a ChronicleError')
}

async function rejected(p: Promise<unknown>): Promise<ChronicleError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(ChronicleError)
  return err as ChronicleError
}

describe('append', () => {
  it('stores the events in one transaction and returns them with seq, version and envelope', () => {
    const store = EventStore.open(':memory:', { now: () => Date.UTC(2026, 0, 2, 3, 4, 5) })
    const stored = store.append('ses_a', [created(), renamed('first')], { meta: userMeta })
    expect(stored).toEqual([
      {
        seq: 1,
        sessionId: 'ses_a',
        version: 1,
        type: 'session.created',
        schemaVersion: 1,
        data: { directory: '/work/repo', agent: 'build', model: 'scripted:test' },
        meta: userMeta,
        at: '2026-01-02T03:04:05.000Z',
      },
      {
        seq: 2,
        sessionId: 'ses_a',
        version: 2,
        type: 'session.renamed',
        schemaVersion: 1,
        data: { title: 'first' },
        meta: userMeta,
        at: '2026-01-02T03:04:05.000Z',
      },
    ])
    expect(store.readSession('ses_a')).toEqual(stored)
    expect([store.head(), store.version('ses_a'), store.version('ses_none')]).toEqual([2, 2, 0])
  })

  it('rejects a stale expectedVersion with a typed VERSION_CONFLICT and writes nothing', () => {
    const store = EventStore.open(':memory:')
    store.append('ses_a', [created()], { meta: userMeta, expectedVersion: 0 })
    const err = thrown(() => store.append('ses_a', [renamed('late')], { meta: userMeta, expectedVersion: 0 }))
    expect([err.code, err.status, err.details]).toEqual([
      'VERSION_CONFLICT',
      409,
      { sessionId: 'ses_a', actual: 1, expected: 0 },
    ])
    expect(thrown(() => store.append('ses_a', [renamed('ahead')], { meta: userMeta, expectedVersion: 5 })).code).toBe(
      'VERSION_CONFLICT',
    )
    expect(store.readSession('ses_a').map((e) => e.type)).toEqual(['session.created'])
    store.append('ses_a', [renamed('right')], { meta: userMeta, expectedVersion: 1 })
    expect(store.version('ses_a')).toBe(2)
  })

  it('of an empty batch returns [] and writes and announces nothing', async () => {
    const store = EventStore.open(':memory:')
    const commits: number[] = []
    store.onCommit((events) => commits.push(events.length))
    expect(store.append('ses_a', [], { meta: userMeta })).toEqual([])
    expect(await store.enqueue('ses_a', [], { meta: userMeta })).toEqual([])
    expect([store.head(), count(store.asCommitted.reader(), 'events'), commits]).toEqual([0, 0, []])
  })

  it('rolls back entirely when the projection throws: events and read models untouched', () => {
    const store = openStore(':memory:')
    store.append(
      'ses_a',
      [
        created(),
        { type: 'message.created', data: { messageId: 'msg_1', role: 'assistant', agent: 'build', model: null } },
        { type: 'text.started', data: { messageId: 'msg_1', partId: 'prt_1' } },
        delta('prt_1', 'hello'),
      ],
      { meta: modelMeta },
    )
    const before = {
      session: getSession(store, 'ses_a'),
      parts: getParts(store, 'ses_a'),
      events: count(store.asCommitted.reader(), 'events'),
    }
    // The second delta names a part that does not exist: evolve throws inside the append transaction.
    const err = thrown(() =>
      store.append('ses_a', [renamed('renamed'), delta('prt_1', ' world'), delta('prt_missing', '!')], {
        meta: modelMeta,
      }),
    )
    expect(err.code).toBe('CORRUPT_EVENT')
    expect({
      session: getSession(store, 'ses_a'),
      parts: getParts(store, 'ses_a'),
      events: count(store.asCommitted.reader(), 'events'),
    }).toEqual(before)
    expect([store.head(), store.version('ses_a')]).toEqual([4, 4])
    // The store is still usable and the cached projection state did not leak the rolled-back batch.
    store.append('ses_a', [delta('prt_1', ' again')], { meta: modelMeta })
    expect(getParts(store, 'ses_a')[0]).toMatchObject({ text: 'hello again' })
    expect(getSession(store, 'ses_a')).toMatchObject({ title: 'New session', version: 5, lastSeq: 5 })
  })

  it('a hook that throws rolls back the events it was given', () => {
    const store = EventStore.open(':memory:', {
      project: (_db, events) => {
        if (events.some((e) => e.type === 'session.archived')) throw new Error('projection failed')
      },
    })
    store.append('ses_a', [created()], { meta: userMeta })
    expect(() =>
      store.append('ses_a', [renamed('x'), { type: 'session.archived', data: {} }], { meta: userMeta }),
    ).toThrow('projection failed')
    expect(store.readSession('ses_a').map((e) => e.type)).toEqual(['session.created'])
  })

  it('requires session.created or session.forked first, and only first', () => {
    const store = EventStore.open(':memory:')
    expect(thrown(() => store.append('ses_a', [renamed('no session')], { meta: userMeta })).code).toBe(
      'SESSION_NOT_FOUND',
    )
    store.append('ses_a', [created()], { meta: userMeta })
    expect(thrown(() => store.append('ses_a', [created()], { meta: userMeta })).code).toBe('INVALID_EVENT')
    expect(
      thrown(() =>
        store.append('ses_a', [{ type: 'session.forked', data: { from: { sessionId: 'ses_b', seq: 1 } } }], {
          meta: userMeta,
        }),
      ).code,
    ).toBe('INVALID_EVENT')
    expect(count(store.asCommitted.reader(), 'events')).toBe(1)
  })

  it('rejects an event that fails its schema with INVALID_EVENT before touching the database', async () => {
    const store = EventStore.open(':memory:')
    store.append('ses_a', [created()], { meta: userMeta })
    const queued = store.enqueue('ses_a', [renamed('queued')], { meta: userMeta })
    const bad = { type: 'text.delta', data: { partId: 'prt_1' } } as never
    const err = thrown(() => store.append('ses_a', [renamed('ok'), bad], { meta: userMeta }))
    expect(err.code).toBe('INVALID_EVENT')
    expect(err.message).toContain('event 1 (text.delta) fails its schema')
    expect(err.details).toEqual({
      issues: [{ path: 'data.text', message: 'Invalid input: expected string, received undefined' }],
    })
    // Not even the queued batch was flushed by the rejected call.
    expect(count(store.asCommitted.reader(), 'events')).toBe(1)
    expect(
      (await rejected(store.enqueue('ses_a', [{ type: 'no.such.event', data: {} } as never], { meta: userMeta }))).code,
    ).toBe('INVALID_EVENT')
    expect((await queued).map((e) => e.version)).toEqual([2])
    expect(
      thrown(() => store.append('ses_a', [{ type: 'session.renamed', data: { title: '' } }], { meta: userMeta })).code,
    ).toBe('INVALID_EVENT')
  })

  it('stores only schema fields: unknown keys are stripped', () => {
    const store = EventStore.open(':memory:')
    const [e] = store.append(
      'ses_a',
      [{ type: 'session.created', data: { directory: '/r', agent: 'build', model: null, secret: 'x' } as never }],
      { meta: userMeta },
    )
    expect(e?.data).toEqual({ directory: '/r', agent: 'build', model: null })
    expect(store.asCommitted.reader().prepare('SELECT data FROM events').pluck().get()).toBe(
      '{"directory":"/r","agent":"build","model":null}',
    )
  })
})

describe('the events table', () => {
  it('refuses UPDATE and DELETE', () => {
    const store = EventStore.open(':memory:')
    store.append('ses_a', [created()], { meta: userMeta })
    expect(() => store.asCommitted.reader().prepare("UPDATE events SET type = 'session.renamed'").run()).toThrow(
      'events are immutable: UPDATE is not allowed',
    )
    expect(() => store.asCommitted.reader().prepare('DELETE FROM events').run()).toThrow(
      'events are immutable: DELETE is not allowed',
    )
    expect(store.readSession('ses_a').map((e) => e.type)).toEqual(['session.created'])
  })

  it('refuses UPDATE and DELETE on the lookup tables an event is joined from', () => {
    const store = EventStore.open(':memory:')
    store.append('ses_a', [created(), { type: 'text.delta', data: { partId: 'prt_1', text: 'hi' } }], {
      meta: userMeta,
    })
    const before = store.readSession('ses_a')
    for (const [table, column] of [
      ['streams', 'session_id'],
      ['event_types', 'type'],
      ['event_metas', 'meta'],
      ['event_parts', 'part_id'],
    ]) {
      expect(
        () => store.asCommitted.reader().prepare(`UPDATE ${table} SET ${column} = 'rewritten'`).run(),
        table,
      ).toThrow('events are immutable: UPDATE is not allowed')
      expect(() => store.asCommitted.reader().prepare(`DELETE FROM ${table}`).run(), table).toThrow(
        'events are immutable: DELETE is not allowed',
      )
    }
    expect(store.readSession('ses_a')).toEqual(before)
  })

  it('keeps (session, version) unique even for a raw insert', () => {
    const store = EventStore.open(':memory:')
    store.append('ses_a', [created()], { meta: userMeta })
    // refused before the UNIQUE constraint by the trigger that also stops INSERT OR REPLACE (migration 11)
    expect(() =>
      rawInsert(store.asCommitted.reader(), { version: 1, type: 'session.renamed', data: '{"title":"dup"}' }),
    ).toThrow('events are immutable: an insert may not replace a logged event')
  })
})

/** Writes a row around the store, as a bug or a hand edit of the file would. */
function rawInsert(db: Database.Database, row: { version: number; type: string; data: string; meta?: string }): number {
  db.prepare(
    "INSERT INTO events (session_id, version, type, schema_version, data, meta, at) VALUES ('ses_a', ?, ?, 1, ?, ?, 0)",
  ).run(row.version, row.type, row.data, row.meta ?? '{"actor":"user"}')
  // `events` is a view whose trigger writes event_log: lastInsertRowid does not reach the caller.
  return db.prepare('SELECT MAX(seq) FROM events').pluck().get() as number
}

describe('the versions an append starts from', () => {
  it('follow commits made through another connection', () => {
    const path = join(dirs.make(), 'two.db')
    const a = EventStore.open(path)
    const b = EventStore.open(path)
    a.append('ses_a', [created()], { meta: userMeta })
    b.append('ses_a', [renamed('from b')], { meta: userMeta })
    expect(a.append('ses_a', [renamed('from a')], { meta: userMeta }).map((e) => e.version)).toEqual([3])
    expect(() => a.append('ses_a', [renamed('stale')], { meta: userMeta, expectedVersion: 2 })).toThrow(
      expect.objectContaining({ code: 'VERSION_CONFLICT' }),
    )
    a.close()
    b.close()
  })

  it('survive a write around the store on its own connection: the next append still takes the next version', async () => {
    const store = EventStore.open(':memory:')
    store.append('ses_a', [created(), renamed('one')], { meta: userMeta })
    rawInsert(store.asCommitted.reader(), { version: 3, type: 'session.renamed', data: '{"title":"around"}' })
    expect(
      store.append('ses_a', [renamed('two')], { meta: userMeta, expectedVersion: 3 }).map((e) => e.version),
    ).toEqual([4])
    rawInsert(store.asCommitted.reader(), { version: 5, type: 'session.renamed', data: '{"title":"around again"}' })
    expect((await store.enqueue('ses_a', [renamed('three')], { meta: userMeta })).map((e) => e.version)).toEqual([6])
    expect(store.readSession('ses_a').map((e) => e.version)).toEqual([1, 2, 3, 4, 5, 6])
  })
})

describe('reading a damaged log', () => {
  it.each([
    ['an unknown type', { type: 'session.exploded', data: '{}' }, 'has unknown type "session.exploded"'],
    ['a corrupt JSON body', { type: 'session.renamed', data: '{"title":' }, 'has a corrupt JSON body'],
    [
      'data that fails its schema',
      { type: 'session.renamed', data: '{"title":42}' },
      '(session.renamed) does not match its schema',
    ],
    [
      'a meta that is not an object',
      { type: 'session.renamed', data: '{"title":"t"}', meta: 'null' },
      'does not match its schema',
    ],
  ])('names the seq of %s with CORRUPT_EVENT', (_what, row, message) => {
    const store = EventStore.open(':memory:')
    store.append('ses_a', [created(), renamed('fine')], { meta: userMeta })
    const seq = rawInsert(store.asCommitted.reader(), { version: 3, ...row })
    for (const read of [
      () => store.readSession('ses_a'),
      () => store.readAll(0),
      () => store.get(seq),
      () => [...store.iterateSession('ses_a')],
    ]) {
      const err = thrown(read)
      expect([err.code, err.message, err.details]).toEqual([
        'CORRUPT_EVENT',
        expect.stringContaining(`event at seq ${seq} `),
        { seq },
      ])
      expect(err.message).toContain(message)
    }
    expect(store.readSession('ses_a', { upTo: seq - 1 }).map((e) => e.seq)).toEqual([1, 2])
  })
})

describe('the batching appender', () => {
  it('commits every append made within one tick in one transaction, in call order', async () => {
    const store = EventStore.open(':memory:')
    store.append('ses_a', [created()], { meta: userMeta })
    store.append('ses_b', [created()], { meta: userMeta })
    const commits: number[][] = []
    store.onCommit((events) => commits.push(events.map((e) => e.seq)))
    const a = [
      store.enqueue('ses_a', [renamed('a1')], { meta: userMeta }),
      store.enqueue('ses_b', [renamed('b1'), renamed('b2')], { meta: userMeta }),
      store.enqueue('ses_a', [renamed('a2')], { meta: userMeta }),
    ]
    expect(count(store.asCommitted.reader(), 'events')).toBe(2) // nothing yet: the flush waits for the end of the tick
    const [a1, b, a2] = await Promise.all(a)
    expect([a1?.map((e) => e.version), b?.map((e) => e.version), a2?.map((e) => e.version)]).toEqual([[2], [2, 3], [3]])
    expect(commits).toEqual([[3, 4, 5, 6]])
    await store.enqueue('ses_a', [renamed('next tick')], { meta: userMeta })
    expect(commits).toEqual([[3, 4, 5, 6], [7]])
  })

  it('append() first commits what is queued, so per-session order follows call order', async () => {
    const store = EventStore.open(':memory:')
    store.append('ses_a', [created()], { meta: userMeta })
    const queued = store.enqueue('ses_a', [renamed('queued first')], { meta: userMeta })
    store.append('ses_a', [renamed('appended second')], { meta: userMeta })
    expect((await queued)[0]?.version).toBe(2)
    expect(store.readSession('ses_a').map((e) => (e.type === 'session.renamed' ? e.data.title : e.type))).toEqual([
      'session.created',
      'queued first',
      'appended second',
    ])
  })

  it('one bad append does not sink the others in its batch', async () => {
    const store = EventStore.open(':memory:')
    store.append('ses_a', [created()], { meta: userMeta })
    const commits: number[][] = []
    store.onCommit((events) => commits.push(events.map((e) => e.seq)))
    const good1 = store.enqueue('ses_a', [renamed('good 1')], { meta: userMeta })
    const bad = store.enqueue('ses_a', [renamed('stale')], { meta: userMeta, expectedVersion: 1 })
    const good2 = store.enqueue('ses_b', [created()], { meta: userMeta })
    const orphan = store.enqueue('ses_c', [renamed('no session')], { meta: userMeta })
    expect((await good1).map((e) => e.seq)).toEqual([2])
    expect((await rejected(bad)).code).toBe('VERSION_CONFLICT')
    expect((await good2).map((e) => e.seq)).toEqual([3])
    expect((await rejected(orphan)).code).toBe('SESSION_NOT_FOUND')
    expect(commits).toEqual([[2], [3]])
    expect(count(store.asCommitted.reader(), 'events')).toBe(3)
  })

  it('rejects an enqueue on a closed store, and close() commits what was queued', async () => {
    const dir = dirs.make()
    const store = EventStore.open(join(dir, 'c.db'))
    store.append('ses_a', [created()], { meta: userMeta })
    const queued = store.enqueue('ses_a', [renamed('before close')], { meta: userMeta })
    store.close()
    expect((await queued).map((e) => e.version)).toEqual([2])
    expect((await rejected(store.enqueue('ses_a', [renamed('after')], { meta: userMeta }))).message).toBe(
      'the event store is closed',
    )
    const reopened = EventStore.open(join(dir, 'c.db'))
    expect(reopened.version('ses_a')).toBe(2)
    reopened.close()
  })
})

describe('durability classes', () => {
  it("'full' commits with synchronous=FULL and then returns to NORMAL; a batch with one 'full' append is FULL", async () => {
    const seen: number[] = []
    const store = EventStore.open(join(dirs.make(), 'd.db'), {
      project: (db) => {
        seen.push(db.pragma('synchronous', { simple: true }) as number)
      },
    })
    const level = () => store.asCommitted.reader().pragma('synchronous', { simple: true })
    store.append('ses_a', [created()], { meta: userMeta })
    store.append('ses_a', [renamed('acknowledged')], { meta: userMeta, durability: 'full' })
    expect(level()).toBe(1)
    await Promise.all([
      store.enqueue('ses_a', [renamed('streamed')], { meta: modelMeta }),
      store.enqueue('ses_a', [renamed('ack')], { meta: userMeta, durability: 'full' }),
    ])
    await store.enqueue('ses_a', [renamed('normal')], { meta: userMeta })
    // 1 = NORMAL, 2 = FULL, as seen inside each commit's transaction
    expect(seen).toEqual([1, 2, 2, 1])
    expect(level()).toBe(1)
    store.close()
  })
  it('checkpoints the WAL every 4 MiB of it, whatever the page size (SQLite counts pages)', () => {
    const dir = dirs.make()
    const written = (path: string, pageSize?: number) => {
      if (pageSize) {
        const db = new Database(path)
        db.pragma(`page_size = ${pageSize}`) // a file made by older code, with SQLite's default pages
        db.pragma('journal_mode = WAL')
        db.close()
      }
      const store = EventStore.open(path)
      const db = store.asCommitted.reader()
      const pages = db.pragma('wal_autocheckpoint', { simple: true }) as number
      const size = db.pragma('page_size', { simple: true }) as number
      store.close()
      return { size, bytes: pages * size }
    }
    expect(written(join(dir, 'new.db'))).toEqual({ size: 2048, bytes: 4 * 2 ** 20 })
    expect(written(join(dir, 'old.db'), 4096)).toEqual({ size: 4096, bytes: 4 * 2 ** 20 })
  })
})

describe('commit notifications', () => {
  it('come after the commit: another connection can already read the events', () => {
    const path = join(dirs.make(), 'n.db')
    const store = EventStore.open(path)
    const reader = new Database(path, { readonly: true })
    registerFunctions(reader) // the events view inflates large data through it (migration 7)
    const visible: number[] = []
    store.onCommit((events) => {
      for (const e of events)
        visible.push(reader.prepare('SELECT COUNT(*) FROM events WHERE seq = ?').pluck().get(e.seq) as number)
    })
    store.append('ses_a', [created(), renamed('x')], { meta: userMeta })
    expect(visible).toEqual([1, 1])
    reader.close()
    store.close()
  })

  it('reach every listener in seq order even when a listener appends', () => {
    const store = EventStore.open(':memory:')
    const first: number[] = []
    const second: number[] = []
    store.onCommit((events) => {
      first.push(...events.map((e) => e.seq))
      if (events.some((e) => e.type === 'session.created'))
        store.append('ses_a', [renamed('reaction')], { meta: userMeta })
    })
    store.onCommit((events) => second.push(...events.map((e) => e.seq)))
    store.onCommit(() => {
      throw new Error('a broken listener')
    })
    store.append('ses_a', [created()], { meta: userMeta })
    expect(first).toEqual([1, 2])
    expect(second).toEqual([1, 2])
  })

  it('stop after unsubscribing', () => {
    const store = EventStore.open(':memory:')
    const seen: StoredEvent[] = []
    const off = store.onCommit((events) => seen.push(...events))
    store.append('ses_a', [created()], { meta: userMeta })
    off()
    store.append('ses_a', [renamed('unheard')], { meta: userMeta })
    expect(seen.map((e) => e.seq)).toEqual([1])
  })
})

describe('reads', () => {
  it('page a session by seq, forwards and backwards, and all events after a global seq', () => {
    const store = EventStore.open(':memory:')
    store.append('ses_a', [created()], { meta: userMeta })
    store.append('ses_b', [created()], { meta: userMeta })
    for (let i = 0; i < 5; i++) {
      store.append('ses_a', [renamed(`a${i}`)], { meta: userMeta })
      store.append('ses_b', [renamed(`b${i}`)], { meta: userMeta })
    }
    const seqs = (events: StoredEvent[]) => events.map((e) => e.seq)
    expect(seqs(store.readSession('ses_a'))).toEqual([1, 3, 5, 7, 9, 11])
    expect(seqs(store.readSession('ses_a', { after: 3, upTo: 9 }))).toEqual([5, 7, 9])
    expect(seqs(store.readSession('ses_a', { after: 4, limit: 2 }))).toEqual([5, 7])
    expect(seqs(store.readSessionBackward('ses_a', 9, 2))).toEqual([7, 5])
    expect(seqs([...store.iterateSession('ses_a', { pageSize: 2 })])).toEqual([1, 3, 5, 7, 9, 11])
    expect(seqs([...store.iterateSession('ses_a', { after: 2, upTo: 10, pageSize: 2 })])).toEqual([3, 5, 7, 9])
    expect(seqs(store.readAll(8, 3))).toEqual([9, 10, 11])
    expect(seqs([...store.iterateAll(5, 2)])).toEqual([6, 7, 8, 9, 10, 11, 12])
    expect(seqs(store.readFiltered(['ses_b', 'ses_x'], 4, 10))).toEqual([6, 8, 10, 12])
    expect(store.get(4)?.sessionId).toBe('ses_b')
    expect(store.get(99)).toBeUndefined()
    // Cursors that are another session's seqs, or beyond the head, work the same.
    expect(seqs(store.readSession('ses_a', { after: 6, upTo: 10 }))).toEqual([7, 9])
    expect(seqs(store.readSession('ses_a', { after: 11 }))).toEqual([])
    expect(seqs(store.readSession('ses_a', { upTo: 0 }))).toEqual([])
    expect(seqs(store.readSessionBackward('ses_a', 100, 3))).toEqual([11, 9, 7])
    expect(seqs(store.readSessionBackward('ses_a', 1, 3))).toEqual([])
    expect([
      store.versionAt('ses_a', 0),
      store.versionAt('ses_a', 6),
      store.versionAt('ses_a', 7),
      store.versionAt('ses_a', 999),
      store.versionAt('ses_x', 5),
    ]).toEqual([0, 3, 4, 6, 0])
  })

  it('page a long session by seq with every cursor, forwards and backwards', () => {
    const store = EventStore.open(':memory:')
    store.append('ses_a', [created()], { meta: userMeta })
    store.append('ses_b', [created()], { meta: userMeta })
    for (let i = 0; i < 300; i++) store.append(i % 3 ? 'ses_a' : 'ses_b', [renamed(`t${i}`)], { meta: userMeta })
    const all = store.readSession('ses_a').map((e) => e.seq)
    for (let cursor = 0; cursor <= store.head() + 1; cursor += 7) {
      expect(store.readSession('ses_a', { after: cursor, limit: 5 }).map((e) => e.seq)).toEqual(
        all.filter((s) => s > cursor).slice(0, 5),
      )
      expect(store.readSessionBackward('ses_a', cursor, 5).map((e) => e.seq)).toEqual(
        all
          .filter((s) => s < cursor)
          .reverse()
          .slice(0, 5),
      )
      expect(
        [...store.iterateSession('ses_a', { after: cursor, upTo: cursor + 50, pageSize: 4 })].map((e) => e.seq),
      ).toEqual(all.filter((s) => s > cursor && s <= cursor + 50))
    }
  })
})
