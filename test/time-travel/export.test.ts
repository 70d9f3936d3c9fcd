import fc from 'fast-check'
import { afterEach, describe, expect, it } from 'vitest'
import { fork } from '../../src/commands/fork.js'
import type { StoredEvent } from '../../src/events/envelope.js'
import { isChronicleError } from '../../src/events/errors.js'
import { type IdSource, sequentialIds } from '../../src/events/ids.js'
import type { EventStore } from '../../src/events/store.js'
import { sqliteLog } from '../../src/events/log.js'
import {
  exportLines,
  exportLinesOf,
  exportSession,
  type ImportReport,
  importSessions,
  renumberView,
} from '../../src/projections/transfer/export.js'
import { foldSession } from '../../src/projections/fold/fold.js'
import { openStore } from '../../src/projections/open.js'
import { getSession, loadView } from '../../src/projections/queries/read-model.js'
import { verify } from '../../src/projections/upkeep/verify.js'
import { play, stepsArb } from '../projections/histories.js'
import { asState } from './helpers.js'
import { recordSession } from './recorded.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/**
 * Export, and import as quarantine (docs/TIME-TRAVEL.md "Export and import"):
 * every session of the file becomes a NEW session (new id, ids in event data
 * rewritten, seqs renumbered) whose history is the file's — same types, data,
 * meta and times — followed by a `session.imported` marker.
 */

const T_IMPORT = Date.UTC(2026, 5, 1)
const stores: EventStore[] = []
function open(now?: () => number): EventStore {
  const store = openStore(':memory:', { snapshotEvery: 5, ...(now && { now }) })
  stores.push(store)
  return store
}
afterEach(() => {
  for (const s of stores.splice(0)) s.close()
})

/** A target store with its own clock and id source (`ses_t…`, so no id can be confused with the source's). */
function target(): { store: EventStore; ids: IdSource } {
  const store = open(() => T_IMPORT)
  let n = 0
  return { store, ids: { next: (prefix) => `${prefix}_t${String(++n).padStart(3, '0')}` } }
}

/** A source store whose clock ticks, so imported times are visibly the original ones. */
async function source() {
  let t = Date.UTC(2026, 0, 1)
  const store = open(() => (t += 1000))
  const ids = sequentialIds()
  const rec = recordSession(store)
  store.append('ses_other', [{ type: 'session.created', data: { directory: '/x', agent: 'build', model: null } }], {
    meta: { actor: 'user' },
  })
  const child = await fork(sqlitePorts(store), ids, 'ses_rec', rec[40] as number)
  store.append(child.id, [{ type: 'session.renamed', data: { title: 'child' } }], { meta: { actor: 'user' } })
  const grand = await fork(sqlitePorts(store), ids, child.id, rec[12] as number) // the fork point is in the child's inherited prefix
  store.append(grand.id, [{ type: 'todo.updated', data: { items: [] } }], { meta: { actor: 'tool' } })
  return { store, ids, rec, child: child.id, grand: grand.id }
}

function lines(jsonl: string): Record<string, unknown>[] {
  return jsonl
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>)
}

function lastEvent(store: EventStore, sessionId: string): StoredEvent {
  return store.readSession(sessionId).at(-1) as StoredEvent
}

/**
 * The imported session right before its marker is the source's read model with seqs and
 * session ids mapped; the marker then adds `imported` and moves the head only.
 */
function expectImportedReadModel(
  from: EventStore,
  to: EventStore,
  originalId: string,
  report: ImportReport,
  upTo?: number,
) {
  const sessionId = report.ids.get(originalId) as string
  const marker = lastEvent(to, sessionId)
  const source = upTo === undefined ? loadView(from, originalId) : foldSession(from, originalId, upTo)
  const before = foldSession(to, sessionId, marker.seq - 1)
  expect(asState(before, 0)).toEqual(asState(renumberView(source, report.seqs, report.ids), 0))
  const imported = { originalId, importId: report.importId, events: marker.version - 1, digest: expect.any(String) }
  expect(marker).toMatchObject({
    type: 'session.imported',
    data: imported,
    meta: { actor: 'user', command: 'import' },
    at: new Date(T_IMPORT).toISOString(),
  })
  expect(getSession(to, sessionId)).toEqual({
    ...before.session,
    imported,
    version: marker.version,
    lastSeq: marker.seq,
    updatedAt: marker.at,
  })
}

/** The file's lines as the import wrote them: seqs renumbered, session ids mapped. */
function mapped(line: Record<string, unknown>, report: ImportReport): Record<string, unknown> {
  const id = (s: unknown) => report.ids.get(s as string)
  const data = { ...(line.data as Record<string, unknown>) }
  if (line.type === 'session.forked') {
    const from = data.from as { sessionId: string; seq: number }
    data.from = { sessionId: id(from.sessionId), seq: report.seqs.get(from.seq) }
  }
  if (line.type === 'subtask.started' || line.type === 'subtask.finished') data.childSessionId = id(data.childSessionId)
  return { ...line, seq: report.seqs.get(line.seq as number), sessionId: id(line.sessionId), data }
}

describe('export', () => {
  it('writes a header and the session’s events in seq order', async () => {
    const { store, rec } = await source()
    const out = lines(exportSession(store, 'ses_rec'))
    expect(out[0]).toEqual({ chronicle: 'session-export', format: 2, sessionId: 'ses_rec' })
    expect(out.slice(1).map((l) => l.seq)).toEqual(rec)
    expect(out.slice(1).some((l) => 'inherited' in l)).toBe(false)
    const { hash, ...first } = out[1] as Record<string, unknown>
    expect(first).toEqual(JSON.parse(JSON.stringify(store.get(rec[0] as number))))
    expect(hash).toMatch(/^[0-9a-f]{32}$/)
  })
})

describe('import', () => {
  it('round-trips a session into a NEW session: same history, types, data, meta and times; then the marker; verify passes', async () => {
    const { store, rec } = await source()
    const jsonl = exportSession(store, 'ses_rec')
    const { store: to, ids } = target()
    const report = await importSessions(sqliteLog(to), ids, jsonl)
    // ids: the import, the file's session, then the sub-agent child it names but does not hold
    expect(report.importId).toBe('imp_t001')
    expect([...report.ids]).toEqual([
      ['ses_rec', 'ses_t002'],
      ['ses_child', 'ses_t003'],
    ])
    expect(report.exported).toEqual({ originalId: 'ses_rec', sessionId: 'ses_t002', events: rec.length })
    expect(report.sessions).toEqual([report.exported])
    expect(report.appended).toBe(rec.length + 1)
    expect(verify(to).differences).toEqual([])
    expect(getSession(to, 'ses_rec')).toBeUndefined()
    expect(getSession(to, 'ses_t003')).toBeUndefined() // a reference outside the file names no session here
    expectImportedReadModel(store, to, 'ses_rec', report)
    // a re-export is the file, renumbered and renamed, then the marker
    const again = lines(exportSession(to, 'ses_t002'))
    const original = lines(jsonl)
    // each event's hash is its chain in this log (new seqs and ids): present, and checked by verify above
    const unhashed = ({ hash, ...rest }: Record<string, unknown>) => (expect(hash).toMatch(/^[0-9a-f]{32}$/), rest)
    expect(again.slice(1, -1).map(unhashed)).toEqual(original.slice(1).map((l) => mapped(unhashed(l), report)))
    expect(again[0]).toEqual({ ...original[0], sessionId: 'ses_t002' })
    expect(verify(to).chain.breaks).toEqual([])
    expect(again.at(-1)).toMatchObject({ sessionId: 'ses_t002', version: rec.length + 1, type: 'session.imported' })
  })

  it('round-trips a fork of a fork: the ancestors arrive as new sessions holding the prefix the export needs', async () => {
    const { store, rec, child, grand } = await source()
    const jsonl = exportSession(store, grand)
    const out = lines(jsonl).slice(1)
    // the grandchild forks inside the child's inherited prefix: the child's creation comes along to resolve it
    expect(out.map((l) => [l.sessionId, l.version, l.inherited ?? false])).toEqual([
      ...rec.slice(0, 41).map((_, i) => ['ses_rec', i + 1, true]),
      ...store.readSession(child, { limit: 1 }).map((e) => [child, e.version, true]),
      ...store.readSession(grand).map((e) => [grand, e.version, false]),
    ])
    const { store: to, ids } = target()
    const report = await importSessions(sqliteLog(to), ids, jsonl)
    expect(report.sessions).toEqual([
      { originalId: 'ses_rec', sessionId: 'ses_t002', events: 41 },
      { originalId: child, sessionId: 'ses_t003', events: 1 },
      { originalId: grand, sessionId: 'ses_t004', events: store.version(grand) },
    ])
    expect(report.exported).toEqual(report.sessions[2])
    expect(verify(to).differences).toEqual([])
    expectImportedReadModel(store, to, grand, report)
    expectImportedReadModel(store, to, 'ses_rec', report, rec[40])
    expect(getSession(to, 'ses_t004')?.forkedFrom).toEqual({
      sessionId: 'ses_t003',
      seq: report.seqs.get(rec[12] as number),
    })
    expect([to.version('ses_t002'), to.version('ses_t003'), to.version('ses_t004')]).toEqual([
      42,
      2,
      store.version(grand) + 1,
    ])
  })

  it('reads the same export through the log port, line for line: what the server serves on either engine', async () => {
    const { store, child, grand } = await source()
    for (const id of ['ses_rec', child, grand]) {
      const served: string[] = []
      for await (const line of exportLinesOf(sqliteLog(store), id)) served.push(line)
      expect(served).toEqual([...exportLines(store, id)])
    }
    const missing = exportLinesOf(sqliteLog(store), 'ses_missing')
    await expect(missing.next()).rejects.toThrow(expect.objectContaining({ code: 'SESSION_NOT_FOUND' }))
  })

  it('importing the same file twice makes two independent copies; the first is untouched by the second', async () => {
    const { store } = await source()
    const jsonl = exportSession(store, 'ses_rec')
    const { store: to, ids } = target()
    const first = await importSessions(sqliteLog(to), ids, jsonl)
    const events = to.readSession(first.exported.sessionId)
    const second = await importSessions(sqliteLog(to), ids, jsonl)
    expect([first.exported.sessionId, second.exported.sessionId]).toEqual(['ses_t002', 'ses_t005'])
    expect(second.importId).not.toBe(first.importId)
    expect(to.readSession(first.exported.sessionId)).toEqual(events)
    expect(to.version('ses_t005')).toBe(to.version('ses_t002'))
    expect(verify(to).differences).toEqual([])
  })

  it('never appends to a session the store has, even one with the same id as the file’s', async () => {
    const { store } = await source()
    const { store: to, ids } = target()
    to.append(
      'ses_rec',
      [{ type: 'session.created', data: { directory: '/elsewhere', agent: 'build', model: null } }],
      { meta: { actor: 'user' } },
    )
    const existing = to.readSession('ses_rec')
    const report = await importSessions(sqliteLog(to), ids, exportSession(store, 'ses_rec'))
    expect(report.exported.sessionId).toBe('ses_t002')
    expect(to.readSession('ses_rec')).toEqual(existing)
  })

  it('refuses a malformed file with the line named, appending nothing', async () => {
    const { store: to, ids } = target()
    const refusal = async (jsonl: string) => {
      try {
        await importSessions(sqliteLog(to), ids, jsonl)
      } catch (err) {
        return isChronicleError(err) ? `${err.code}: ${err.message}` : String(err)
      }
      return 'none'
    }
    const header = '{"chronicle":"session-export","format":1,"sessionId":"ses_a"}'
    expect(await refusal('nope\n')).toBe('IMPORT_INVALID: import line 1: not JSON; nothing was imported')
    expect(await refusal(`${header}\n\n{"seq": 1}\n`)).toMatch(/^IMPORT_INVALID: import line 3: not an event line: /)
    expect(to.head()).toBe(0)
  })

  it('accepts every valid random history: each session exports, imports and reads the same, remapped', async () => {
    await fc.assert(
      fc.asyncProperty(stepsArb(80), async (steps) => {
        const from = openStore(':memory:')
        const to = openStore(':memory:')
        try {
          const { sessions } = await play(from, steps)
          const ids = sequentialIds()
          for (const id of sessions) {
            const report = await importSessions(sqliteLog(to), ids, exportSession(from, id))
            const before = foldSession(to, report.exported.sessionId, lastEvent(to, report.exported.sessionId).seq - 1)
            expect(asState(before, 0)).toEqual(asState(renumberView(loadView(from, id), report.seqs, report.ids), 0))
          }
          expect(verify(to).differences).toEqual([])
        } finally {
          from.close()
          to.close()
        }
      }),
      { numRuns: 40 },
    )
  })
})
