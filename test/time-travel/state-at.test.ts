import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { isChronicleError } from '../../src/events/errors.js'
import type { EventStore } from '../../src/events/store.js'
import { openStore } from '../../src/projections/open.js'
import { loadView } from '../../src/projections/queries/read-model.js'
import { emptyView } from '../../src/projections/fold/model.js'
import { SNAPSHOT_FORMAT, snapshotCache } from '../../src/projections/time-travel/snapshots.js'
import { rebuildSnapshots, stateAt } from '../../src/projections/time-travel/time-travel.js'
import { asState, json, plainStateAt, snapshotRows } from './helpers.js'
import { recordSession } from './recorded.js'

const stores: EventStore[] = []
function open(path = ':memory:', snapshotEvery = 4): EventStore {
  const store = openStore(path, { snapshotEvery })
  stores.push(store)
  return store
}
afterEach(() => {
  for (const s of stores.splice(0)) s.close()
})

function expectCode(fn: () => unknown, code: string, message?: RegExp): void {
  try {
    fn()
  } catch (err) {
    expect(isChronicleError(err) && err.code).toBe(code)
    if (message) expect((err as Error).message).toMatch(message)
    return
  }
  throw new Error(`expected ${code}`)
}

describe('stateAt', () => {
  it('equals the plain fold of the log right after every event, and writes snapshot rows on the way', () => {
    const store = open()
    const seqs = recordSession(store)
    for (const seq of seqs) expect(json(stateAt(store, 'ses_rec', seq))).toEqual(plainStateAt(store, 'ses_rec', seq))
    expect(snapshotRows(store)).toBe(Math.floor(seqs.length / 4))
  })

  it('shows a half-streamed text part half-written and a called tool running', () => {
    const store = open()
    const seqs = recordSession(store)
    const at = (type: string, pred: (data: Record<string, unknown>) => boolean) =>
      seqs.find((s) => {
        const e = store.get(s)
        return e?.type === type && pred(e.data as Record<string, unknown>)
      }) as number
    const midText = stateAt(
      store,
      'ses_rec',
      at('text.delta', (d) => d.text === 'look at '),
    )
    expect(midText.parts.find((p) => p.id === 'prt_t1')).toMatchObject({
      type: 'text',
      text: 'Let me look at ',
      ended: false,
    })
    expect(midText.session.status).toBe('busy')
    const waiting = stateAt(
      store,
      'ses_rec',
      at('permission.requested', (d) => d.requestId === 'per_1'),
    )
    expect(waiting.parts.find((p) => p.id === 'prt_c2')).toMatchObject({
      type: 'tool',
      state: 'running',
      input: { command: 'rm -rf build' },
    })
    expect(waiting.session.status).toBe('waiting')
    expect(waiting.session.pendingPermissions.map((p) => p.requestId)).toEqual(['per_1'])
  })

  it('without a seq is the current read model', () => {
    const store = open()
    const seqs = recordSession(store)
    const now = stateAt(store, 'ses_rec')
    expect(now.seq).toBe(seqs[seqs.length - 1])
    expect(json(now)).toEqual(asState(loadView(store, 'ses_rec'), now.seq))
  })

  it('gives the same answers after the snapshot table is emptied, or has a hole in a chain', () => {
    const store = open()
    const seqs = recordSession(store)
    const before = seqs.map((seq) => json(stateAt(store, 'ses_rec', seq)))
    expect(snapshotRows(store)).toBeGreaterThan(3)
    store.asCommitted.reader().prepare('DELETE FROM snapshots WHERE version = 8').run()
    expect(seqs.map((seq) => json(stateAt(store, 'ses_rec', seq, { snapshotEvery: 0 })))).toEqual(before)
    store.asCommitted.reader().exec('DELETE FROM snapshots')
    expect(seqs.map((seq) => json(stateAt(store, 'ses_rec', seq, { snapshotEvery: 0 })))).toEqual(before)
    expect(snapshotRows(store)).toBe(0)
  })

  it('stores a part streaming across many rows once (only the growth per row), and ignores a suffix that does not fit', () => {
    const store = open(':memory:', 10)
    const meta = { meta: { actor: 'model' as const } }
    store.append(
      'ses_long',
      [{ type: 'session.created', data: { directory: '/r', agent: 'build', model: null } }],
      meta,
    )
    store.append(
      'ses_long',
      [{ type: 'message.created', data: { messageId: 'msg_1', role: 'assistant', agent: 'build', model: null } }],
      meta,
    )
    store.append('ses_long', [{ type: 'text.started', data: { messageId: 'msg_1', partId: 'prt_1' } }], meta)
    const seqs: number[] = []
    for (let i = 0; i < 200; i++) {
      seqs.push(
        ...store
          .append(
            'ses_long',
            [{ type: 'text.delta', data: { partId: 'prt_1', text: `${String(i).padStart(3, '0')}${'x'.repeat(97)}` } }],
            meta,
          )
          .map((e) => e.seq),
      )
    }
    stateAt(store, 'ses_long')
    const bytes = store.asCommitted.reader().prepare('SELECT SUM(LENGTH(data)) FROM snapshots').pluck().get() as number
    expect(snapshotRows(store)).toBe(20)
    expect(bytes).toBeLessThan(20_000 + 20 * 1500) // the text once, plus a session object per row; whole copies would be ~200 KB
    for (const seq of seqs) expect(json(stateAt(store, 'ses_long', seq))).toEqual(plainStateAt(store, 'ses_long', seq))
    const row = store.asCommitted
      .reader()
      .prepare('SELECT data FROM snapshots WHERE version = 100')
      .pluck()
      .get() as string
    store.asCommitted
      .reader()
      .prepare('UPDATE snapshots SET data = ? WHERE version = 100')
      .run(row.replace(/\[\d+,/, '[5,'))
    expect(snapshotCache(store.asCommitted.reader()).mergeInto(emptyView(), 'ses_long', 200)?.version).toBe(90)
    for (const seq of seqs)
      expect(json(stateAt(store, 'ses_long', seq, { snapshotEvery: 0 }))).toEqual(plainStateAt(store, 'ses_long', seq))
  })

  it('rebuilds the snapshot cache from the log to the same rows', () => {
    const store = open()
    recordSession(store)
    store.append('ses_short', [{ type: 'session.created', data: { directory: '/x', agent: 'build', model: null } }], {
      meta: { actor: 'user' },
    })
    stateAt(store, 'ses_rec')
    const rows = () =>
      store.asCommitted
        .reader()
        .prepare('SELECT session_id, version, seq, base_version, data FROM snapshots ORDER BY session_id, version')
        .all()
    const before = rows()
    expect(rebuildSnapshots(store)).toEqual({ sessions: 1, rows: before.length })
    expect(rows()).toEqual(before)
  })

  it('drops snapshot rows written by another projection format when a store opens', () => {
    const dir = mkdtempSync(join(tmpdir(), 'chronicle-tt-'))
    try {
      const path = join(dir, 'log.db')
      const first = open(path)
      recordSession(first)
      stateAt(first, 'ses_rec')
      first.asCommitted
        .reader()
        .prepare("INSERT INTO snapshots VALUES ('ses_rec', 999, 999, 0, 'older', 'garbage')")
        .run()
      first.close()
      const second = open(path)
      stateAt(second, 'ses_rec') // would throw on the garbage row if it were read
      const formats = second.asCommitted.reader().prepare('SELECT DISTINCT format FROM snapshots').pluck().all()
      expect(formats).toEqual([SNAPSHOT_FORMAT])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('refuses a seq that is not an event of the session’s history', () => {
    const store = open()
    const seqs = recordSession(store)
    store.append('ses_other', [{ type: 'session.created', data: { directory: '/x', agent: 'build', model: null } }], {
      meta: { actor: 'user' },
    })
    const other = store.head()
    expectCode(
      () => stateAt(store, 'ses_rec', other),
      'SEQ_OUT_OF_RANGE',
      new RegExp(`seq ${other} is not an event of session ses_rec's history`),
    )
    expectCode(() => stateAt(store, 'ses_rec', other + 1), 'SEQ_OUT_OF_RANGE')
    expectCode(() => stateAt(store, 'ses_rec', 0), 'SEQ_OUT_OF_RANGE')
    expectCode(() => stateAt(store, 'ses_rec', 1.5), 'SEQ_OUT_OF_RANGE')
    expectCode(() => stateAt(store, 'ses_other', seqs[0] as number), 'SEQ_OUT_OF_RANGE')
    expectCode(() => stateAt(store, 'ses_nope', 1), 'SESSION_NOT_FOUND')
    expectCode(() => stateAt(store, 'ses_nope'), 'SESSION_NOT_FOUND')
  })
})
