import { z } from 'zod'
import type { ChronicleEvent } from '../events/catalogue.js'
import { EventMeta } from '../events/envelope.js'
import { ChronicleError } from '../events/errors.js'
import type { EventStore } from '../events/store.js'
import { eventsByVersion, firstEvent, versionAtOrBefore } from './lineage.js'
import type { SessionView } from './model.js'

/**
 * Export and import of a session's history as JSONL.
 *
 * Export: a header line, then every event the session's history needs, in
 * seq order, each with its envelope; events of other sessions (a fork's
 * inherited prefix) carry `inherited: true`. For a fork the ancestors'
 * creation events come along even when the fork point lies further up the
 * tree, so every `session.forked` reference can be resolved on import.
 *
 * Import: appends the events with their original session ids, versions,
 * meta and times. Seqs are assigned by the target store (they are global and
 * must stay gapless), so they are renumbered: `session.forked {from.seq}` is
 * rewritten through the mapping, and the read-model fields that hold seqs
 * (Session.lastSeq, forkedFrom.seq, inbox[].seq, pendingPermissions[].seq)
 * differ exactly by it — `renumberView` applies it. An ancestor arrives as a
 * session holding only the prefix the export needed. Events the target
 * already has (same session, version and content) are skipped, so importing
 * twice, or importing siblings that share a prefix, is safe; different
 * content at the same version is VERSION_CONFLICT.
 */

export const EXPORT_FORMAT = 1

const Header = z.object({ chronicle: z.literal('session-export'), format: z.number().int(), sessionId: z.string() })
const Line = z.object({
  seq: z.number().int().positive(),
  sessionId: z.string().min(1),
  version: z.number().int().positive(),
  type: z.string(),
  schemaVersion: z.number().int().positive(),
  data: z.unknown(),
  meta: EventMeta,
  at: z.iso.datetime(),
  inherited: z.literal(true).optional(),
})

/** The export as lines (without newlines), streamed page by page. */
export function* exportLines(store: EventStore, sessionId: string): Generator<string> {
  store.flush()
  const segments = needed(store, sessionId, Number.MAX_SAFE_INTEGER)
  yield JSON.stringify({ chronicle: 'session-export', format: EXPORT_FORMAT, sessionId })
  for (const { sessionId: owner, upToVersion } of segments) {
    for (const event of eventsByVersion(store.db, owner, 0, upToVersion)) {
      yield JSON.stringify(owner === sessionId ? event : { ...event, inherited: true })
    }
  }
}

export function exportSession(store: EventStore, sessionId: string): string {
  let out = ''
  for (const line of exportLines(store, sessionId)) out += `${line}\n`
  return out
}

/** The sessions (and how much of each) a session's history needs, ancestors first. */
function needed(store: EventStore, sessionId: string, cut: number): { sessionId: string; upToVersion: number }[] {
  const first = firstEvent(store, sessionId)
  const upToVersion = Math.max(1, versionAtOrBefore(store.db, sessionId, cut, store.version(sessionId)))
  const ancestors = first.type === 'session.forked' ? needed(store, first.data.from.sessionId, first.data.from.seq) : []
  return [...ancestors, { sessionId, upToVersion }]
}

export interface ImportReport {
  /** the sessions named by the export headers */
  readonly exported: string[]
  /** every session the file held events of, ancestors included */
  readonly sessions: string[]
  /** events appended (the others were already there) */
  readonly appended: number
  /** original seq → seq in this store */
  readonly seqs: Map<number, number>
}

export function importSessions(store: EventStore, jsonl: string): ImportReport {
  store.flush()
  const seqs = new Map<number, number>()
  const versions = new Map<string, number>()
  const exported: string[] = []
  let appended = 0
  let group: { lines: z.infer<typeof Line>[]; events: ChronicleEvent[]; key: string; sessionId: string; expected: number } | null = null

  const flush = () => {
    if (!group) return
    const { lines, events, sessionId, expected } = group
    const first = lines[0] as z.infer<typeof Line>
    const stored = store.append(sessionId, events, { expectedVersion: expected, meta: first.meta, at: Date.parse(first.at) })
    stored.forEach((e, i) => seqs.set((lines[i] as z.infer<typeof Line>).seq, e.seq))
    appended += stored.length
    group = null
  }

  jsonl.split('\n').forEach((text, index) => {
    if (text.trim() === '') return
    const json = parseJson(text, index)
    const header = Header.safeParse(json)
    if (header.success) {
      if (header.data.format !== EXPORT_FORMAT) throw bad(index, `export format ${header.data.format} is not supported`)
      exported.push(header.data.sessionId)
      return
    }
    const parsed = Line.safeParse(json)
    if (!parsed.success) throw bad(index, `not an event line: ${z.prettifyError(parsed.error)}`)
    const line = parsed.data
    const key = `${line.sessionId}\n${line.at}\n${JSON.stringify(line.meta)}`
    if (group && group.key !== key) flush() // before renumbering: the fork point may be in the group
    const event = renumber({ type: line.type, data: line.data } as ChronicleEvent, seqs, index)
    const version = versions.get(line.sessionId) ?? store.version(line.sessionId)
    if (line.version <= version) {
      flush()
      seqs.set(line.seq, existing(store, line, event, index))
      versions.set(line.sessionId, version)
      return
    }
    if (line.version !== version + 1) throw bad(index, `session ${line.sessionId} jumps from version ${version} to ${line.version}`)
    group ??= { lines: [], events: [], key, sessionId: line.sessionId, expected: version }
    group.lines.push(line)
    group.events.push(event)
    versions.set(line.sessionId, line.version)
  })
  flush()
  return { exported, sessions: [...versions.keys()], appended, seqs }
}

/** A session's read model with every seq it holds mapped (e.g. through an import's seqs). */
export function renumberView(view: SessionView, seqs: ReadonlyMap<number, number>): SessionView {
  const map = (seq: number) => seqs.get(seq) ?? seq
  const s = view.session
  return {
    session: s && {
      ...s,
      lastSeq: map(s.lastSeq),
      forkedFrom: s.forkedFrom && { ...s.forkedFrom, seq: map(s.forkedFrom.seq) },
      inbox: s.inbox.map((i) => ({ ...i, seq: map(i.seq) })),
      pendingPermissions: s.pendingPermissions.map((p) => ({ ...p, seq: map(p.seq) })),
    },
    messages: view.messages,
    parts: view.parts,
  }
}

function renumber(event: ChronicleEvent, seqs: ReadonlyMap<number, number>, index: number): ChronicleEvent {
  if (event.type !== 'session.forked') return event
  const seq = seqs.get(event.data.from.seq)
  if (seq === undefined) throw bad(index, `the fork point seq ${event.data.from.seq} is not among the events before it`)
  return { ...event, data: { ...event.data, from: { ...event.data.from, seq } } }
}

/** The target already holds this version: it must be the same event. Returns its seq. */
function existing(store: EventStore, line: z.infer<typeof Line>, event: ChronicleEvent, index: number): number {
  const row = store.db
    .prepare('SELECT seq, type, data FROM events WHERE session_id = ? AND version = ?')
    .get(line.sessionId, line.version) as { seq: number; type: string; data: string }
  if (row.type !== event.type || JSON.stringify(JSON.parse(row.data)) !== JSON.stringify(event.data)) {
    throw new ChronicleError(
      'VERSION_CONFLICT',
      `line ${index + 1}: session ${line.sessionId} already has a different event at version ${line.version}`,
      { sessionId: line.sessionId, version: line.version },
    )
  }
  return row.seq
}

function parseJson(text: string, index: number): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch {
    throw bad(index, 'not JSON')
  }
}

function bad(index: number, message: string): ChronicleError {
  return new ChronicleError('BAD_REQUEST', `import line ${index + 1}: ${message}`, { line: index + 1 })
}

