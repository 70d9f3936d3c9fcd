import { afterEach, describe, expect, it } from 'vitest'
import { fork } from '../../src/commands/fork.js'
import { isChronicleError } from '../../src/events/errors.js'
import { sequentialIds } from '../../src/events/ids.js'
import type { EventStore } from '../../src/events/store.js'
import { exportSession, importSessions, renumberView } from '../../src/projections/export.js'
import { openStore } from '../../src/projections/open.js'
import { loadView } from '../../src/projections/read-model.js'
import { verify } from '../../src/projections/verify.js'
import { asState } from './helpers.js'
import { recordSession } from './recorded.js'

const stores: EventStore[] = []
function open(now?: () => number): EventStore {
  const store = openStore(':memory:', { snapshotEvery: 5, ...(now && { now }) })
  stores.push(store)
  return store
}
afterEach(() => {
  for (const s of stores.splice(0)) s.close()
})

/** A source store whose clock ticks, so imported times are visibly the original ones. */
function source() {
  let t = Date.UTC(2026, 0, 1)
  const store = open(() => (t += 1000))
  const ids = sequentialIds()
  const rec = recordSession(store)
  store.append('ses_other', [{ type: 'session.created', data: { directory: '/x', agent: 'build', model: null } }], { meta: { actor: 'user' } })
  const child = fork(store, ids, 'ses_rec', rec[40] as number)
  store.append(child.id, [{ type: 'session.renamed', data: { title: 'child' } }], { meta: { actor: 'user' } })
  const grand = fork(store, ids, child.id, rec[12] as number) // the fork point is in the child's inherited prefix
  store.append(grand.id, [{ type: 'todo.updated', data: { items: [] } }], { meta: { actor: 'tool' } })
  return { store, ids, rec, child: child.id, grand: grand.id }
}

function lines(jsonl: string): Record<string, unknown>[] {
  return jsonl.trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>)
}

/** The imported store holds the same read model, once seqs are mapped. */
function expectSameReadModel(from: EventStore, to: EventStore, sessionId: string, seqs: Map<number, number>) {
  const mapped = renumberView(loadView(from.db, sessionId), seqs)
  expect(asState(loadView(to.db, sessionId), 0)).toEqual(asState(mapped, 0))
}

describe('export and import', () => {
  it('exports a session as a header and its events in seq order', () => {
    const { store, rec } = source()
    const out = lines(exportSession(store, 'ses_rec'))
    expect(out[0]).toEqual({ chronicle: 'session-export', format: 1, sessionId: 'ses_rec' })
    expect(out.slice(1).map((l) => l.seq)).toEqual(rec)
    expect(out.slice(1).some((l) => 'inherited' in l)).toBe(false)
    expect(out[1]).toEqual(JSON.parse(JSON.stringify(store.get(rec[0] as number))))
  })

  it('round-trips a session into a fresh store: same read model, same times, verify passes', () => {
    const { store } = source()
    const jsonl = exportSession(store, 'ses_rec')
    const target = open()
    const report = importSessions(target, jsonl)
    expect(report).toMatchObject({ exported: ['ses_rec'], sessions: ['ses_rec'], appended: lines(jsonl).length - 1 })
    expect(verify(target).differences).toEqual([])
    expectSameReadModel(store, target, 'ses_rec', report.seqs)
    // a re-export is the original, renumbered
    const again = lines(exportSession(target, 'ses_rec'))
    expect(again).toEqual(lines(jsonl).map((l) => ('seq' in l ? { ...l, seq: report.seqs.get(l.seq as number) } : l)))
  })

  it('round-trips a fork of a fork: the inherited prefix is marked, ancestors arrive truncated', () => {
    const { store, rec, child, grand } = source()
    const jsonl = exportSession(store, grand)
    const out = lines(jsonl).slice(1)
    // the grandchild forks inside the child's inherited prefix: the child's creation comes along to resolve it
    expect(out.map((l) => [l.sessionId, l.version, l.inherited ?? false])).toEqual([
      ...rec.slice(0, 41).map((_, i) => ['ses_rec', i + 1, true]),
      ...store.readSession(child, { limit: 1 }).map((e) => [child, e.version, true]),
      ...store.readSession(grand).map((e) => [grand, e.version, false]),
    ])
    const target = open()
    const report = importSessions(target, jsonl)
    expect(report.sessions).toEqual(['ses_rec', child, grand])
    expect(verify(target).differences).toEqual([])
    expectSameReadModel(store, target, grand, report.seqs)
    expect(target.version(child)).toBe(1)
    expect(target.version('ses_rec')).toBe(41)
  })

  it('imports siblings sharing a prefix into one store, and importing twice appends nothing', () => {
    const { store, child } = source()
    const target = open()
    const first = importSessions(target, exportSession(store, child))
    const second = importSessions(target, exportSession(store, 'ses_rec'))
    expect(second.appended).toBe(store.version('ses_rec') - 41)
    const again = importSessions(target, exportSession(store, child))
    expect(again).toMatchObject({ exported: [child], sessions: ['ses_rec', child], appended: 0 })
    expect(again.seqs).toEqual(first.seqs)
    expect(verify(target).differences).toEqual([])
    expectSameReadModel(store, target, child, first.seqs)
    expectSameReadModel(store, target, 'ses_rec', second.seqs)
  })

  it('refuses a different history under the same id, and malformed lines', () => {
    const { store } = source()
    const target = open()
    target.append('ses_rec', [{ type: 'session.created', data: { directory: '/elsewhere', agent: 'build', model: null } }], { meta: { actor: 'user' } })
    const code = (fn: () => unknown) => {
      try {
        fn()
      } catch (err) {
        return isChronicleError(err) ? `${err.code}: ${err.message}` : String(err)
      }
      return 'none'
    }
    expect(code(() => importSessions(target, exportSession(store, 'ses_rec')))).toBe(
      'VERSION_CONFLICT: line 2: session ses_rec already has a different event at version 1',
    )
    expect(code(() => importSessions(open(), '{"seq": 1}\n'))).toMatch(/^BAD_REQUEST: import line 1: not an event line/)
    expect(code(() => importSessions(open(), 'nope\n'))).toBe('BAD_REQUEST: import line 1: not JSON')
  })
})
