import { createHash } from 'node:crypto'
import type { ChronicleEvent } from '../../events/catalogue.js'
import type { EventMeta, StoredEvent } from '../../events/envelope.js'
import type { IdSource } from '../../events/ids.js'
import type { EventStore } from '../../events/store.js'
import type { Append, EventLog } from '../../events/log.js'
import { ChronicleError } from '../../events/errors.js'
import { checkImport, EXPORT_FORMAT, type ImportLine } from './import-check.js'
import { eventsByVersion, firstEvent, versionAtOrBefore } from '../time-travel/lineage.js'
import type { Part, SessionView } from '../fold/model.js'

/**
 * Export and import of a session's history as JSONL.
 *
 * Export: a header line, then every event the session's history needs, in
 * seq order, each with its envelope; events of other sessions (a fork's
 * inherited prefix) carry `inherited: true`. For a fork the ancestors'
 * creation events come along even when the fork point lies further up the
 * tree, so every `session.forked` reference can be resolved on import.
 *
 * Import is quarantine (docs/SECURITY.md: an import creates new, inert sessions
 * only). The file is untrusted: it is checked whole before anything is
 * appended (src/projections/transfer/import-check.ts), then every session of it becomes
 * a NEW session with a new id, ended by `session.imported`, which makes it
 * read-only and never run. Its history is kept — types, data, meta and times —
 * but confers nothing: its rules, approvals, directory and open run are never
 * used; a fork of it needs a directory and starts with no rules, approvals or
 * queued input (src/commands/fork.ts). Seqs are renumbered (they are global and
 * gapless) and session ids rewritten: `renumberView` maps a source read model
 * onto the imported one.
 */

export { EXPORT_FORMAT }

/** The export as lines (without newlines), streamed page by page. */
export function* exportLines(store: EventStore, sessionId: string): Generator<string> {
  const segments = needed(store, sessionId, Number.MAX_SAFE_INTEGER)
  yield exportHeader(sessionId)
  const blobs = new Set<string>()
  for (const { sessionId: owner, upToVersion } of segments) {
    for (const { event, hash } of chainedEvents(store, owner, upToVersion))
      yield exportLine(event, owner !== sessionId, hash, blobs)
  }
  // what the steps were compiled from (docs/AUDIT.md): an imported session can be audited too
  for (const blob of blobs) {
    const content = store.blobs.get(blob)
    if (content !== undefined) yield JSON.stringify({ blob, content })
  }
}

/** What an export reads of the log: either engine's (src/events/log.ts). */
export type ExportSource = Pick<EventLog, 'readSession' | 'chainOf' | 'blobs'>

const PAGE = 1000

/**
 * The export as lines, read through the log port page by page (the server's: src/http/api.ts), line for
 * line what `exportLines` writes on SQLite (test/time-travel/export.test.ts compares them).
 */
export async function* exportLinesOf(log: ExportSource, sessionId: string): AsyncGenerator<string> {
  const segments = await neededOf(log, sessionId, Number.MAX_SAFE_INTEGER)
  yield exportHeader(sessionId)
  const blobs = new Set<string>()
  for (const { sessionId: owner, upTo } of segments) {
    for (let after = 0; ; ) {
      const page = await log.readSession(owner, { after, upTo, limit: PAGE })
      const last = page[page.length - 1]?.seq
      if (last === undefined) break
      const hashes = new Map((await log.chainOf(owner, { after, upTo: last })).map((l) => [l.seq, l.hash]))
      for (const event of page) yield exportLine(event, owner !== sessionId, hashes.get(event.seq) ?? null, blobs)
      after = last
    }
  }
  for (const blob of blobs) {
    const content = await log.blobs.get(blob)
    if (content !== undefined) yield JSON.stringify({ blob, content })
  }
}

/** The sessions (and up to which seq of each) a session's history needs, ancestors first, read through the log. */
async function neededOf(
  log: ExportSource,
  sessionId: string,
  cut: number,
): Promise<{ sessionId: string; upTo: number }[]> {
  const first = (await log.readSession(sessionId, { limit: 1 }))[0]
  if (!first) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
  const ancestors =
    first.type === 'session.forked' ? await neededOf(log, first.data.from.sessionId, first.data.from.seq) : []
  // a fork inside an ancestor's own inherited prefix still takes that ancestor's first event: the import resolves it
  return [...ancestors, { sessionId, upTo: Math.max(cut, first.seq) }]
}

function exportHeader(sessionId: string): string {
  return JSON.stringify({ chronicle: 'session-export', format: EXPORT_FORMAT, sessionId })
}

/** One event's line: inherited from an ancestor or not, with its chain hash; the blobs its step names noted. */
function exportLine(event: StoredEvent, inherited: boolean, hash: Buffer | null, blobs: Set<string>): string {
  if (event.type === 'step.started' && event.data.context) {
    const { system, tools, messages } = event.data.context
    for (const h of [system, tools, ...(messages ? [messages] : [])]) blobs.add(h)
  }
  const line = { ...event, ...(inherited && { inherited: true }), ...(hash && { hash: hash.toString('hex') }) }
  return JSON.stringify(line)
}

/** A session's own events up to a version, each with its chain hash (none: logged before the chain). */
function* chainedEvents(
  store: EventStore,
  sessionId: string,
  upToVersion: number,
): Generator<{ event: StoredEvent; hash: Buffer | null }> {
  const hashes = store
    .reader(sessionId)
    .prepare(
      'SELECT l.version, l.hash FROM event_log l JOIN streams s ON s.id = l.stream WHERE s.session_id = ? AND l.version > ? AND l.version <= ? ORDER BY l.version LIMIT 1000',
    )
  let page: { version: number; hash: Buffer | null }[] = []
  let at = 0
  for (const event of eventsByVersion(store.reader(sessionId), sessionId, 0, upToVersion)) {
    if (at >= page.length) {
      page = hashes.all(sessionId, event.version - 1, upToVersion) as typeof page
      at = 0
    }
    const row = page[at++]
    yield { event, hash: row?.version === event.version ? row.hash : null }
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
  const upToVersion = Math.max(1, versionAtOrBefore(store.reader(sessionId), sessionId, cut, store.version(sessionId)))
  const ancestors = first.type === 'session.forked' ? needed(store, first.data.from.sessionId, first.data.from.seq) : []
  return [...ancestors, { sessionId, upToVersion }]
}

export interface ImportedSession {
  /** the session's id in the file */
  readonly originalId: string
  /** the new session's id in this store */
  readonly sessionId: string
  /** the file's events it holds (its session.imported marker follows them) */
  readonly events: number
}

export interface ImportReport {
  /** the import's id, carried by every session.imported it appended */
  readonly importId: string
  /** the session the export was made of */
  readonly exported: ImportedSession
  /** every session the import created, in the file's order (ancestors first) */
  readonly sessions: ImportedSession[]
  /** events appended, the session.imported markers included */
  readonly appended: number
  /** original seq → seq in this store */
  readonly seqs: Map<number, number>
  /**
   * every session id the file's events name → its id here: the sessions created, and
   * references to sessions the file does not hold (a sub-agent's parent or child),
   * which get fresh ids that name no session of this store
   */
  readonly ids: Map<string, string>
}

/** What an import appends through: either engine's log (src/events/log.ts). */
export type ImportTarget = Pick<EventLog, 'appendTogether' | 'blobs'>

/**
 * Imports an export as NEW, read-only sessions (docs/TIME-TRAVEL.md "Export and
 * import"), through the log port: the same on either engine. The whole file is
 * checked first (checkImport: IMPORT_INVALID naming the line); then, in ONE
 * transaction (EventLog.appendTogether), each session of the file gets a new id
 * from `ids`, its events are appended with their original types, data, meta and
 * times — seqs renumbered, session ids rewritten through the mapping — and a
 * `session.imported` marker ends each one. Nothing is appended to a session that
 * existed before, and importing the same file twice makes two independent copies.
 * The file's blobs are stored before (content-addressed: one a failed import
 * leaves names nothing).
 */
export async function importSessions(
  log: ImportTarget,
  ids: IdSource,
  jsonl: string,
  /** who imports (the CLI: the local user), named on each session.imported */
  by?: EventMeta['by'],
): Promise<ImportReport> {
  const checked = checkImport(jsonl)
  const digest = createHash('sha256').update(jsonl).digest('base64url')
  const importId = ids.next('imp')
  const sessionIds = new Map<string, string>()
  for (const id of [...checked.sessions, ...checked.references]) sessionIds.set(id, ids.next('ses'))
  // One append per run of lines with the same session, time and meta (a fork's point is always in an earlier run).
  const groups: ImportLine[][] = []
  for (const line of checked.lines) {
    const last = groups.at(-1)?.at(-1)
    if (
      last &&
      last.sessionId === line.sessionId &&
      last.at === line.at &&
      JSON.stringify(last.meta) === JSON.stringify(line.meta)
    )
      groups.at(-1)?.push(line)
    else groups.push([line])
  }
  const counts = new Map<string, number>()
  for (const group of groups) {
    const head = group[0] as ImportLine
    counts.set(head.sessionId, head.version - 1 + group.length)
  }
  // The file's seqs as this store numbers them: the lines' events take the seqs from `first` on, in order.
  const build = (first: number): Append[] => {
    const seqs = new Map<number, number>()
    let next = first
    const appends: Append[] = groups.map((group) => {
      const head = group[0] as ImportLine
      const events = group.map((l) => remap(l.event, sessionIds, seqs))
      for (const l of group) seqs.set(l.seq, next++)
      return {
        sessionId: sessionIds.get(head.sessionId) as string,
        events,
        options: { expectedVersion: head.version - 1, meta: head.meta, at: Date.parse(head.at) },
      }
    })
    for (const originalId of checked.sessions) {
      const events = counts.get(originalId) as number
      const marker: ChronicleEvent = { type: 'session.imported', data: { originalId, importId, events, digest } }
      appends.push({
        sessionId: sessionIds.get(originalId) as string,
        events: [marker],
        options: { expectedVersion: events, meta: { ...IMPORT_META, ...(by && { by }) } },
      })
    }
    return appends
  }
  for (const content of checked.blobs) await log.blobs.put(content)
  const stored = await log.appendTogether(build)
  const seqs = new Map(checked.lines.map((l, i) => [l.seq, stored[i]?.seq as number]))
  const sessions = checked.sessions.map((originalId) => ({
    originalId,
    sessionId: sessionIds.get(originalId) as string,
    events: counts.get(originalId) as number,
  }))
  const exported = sessions.find((s) => s.originalId === checked.exported) as ImportedSession
  return { importId, exported, sessions, appended: stored.length, seqs, ids: sessionIds }
}

const IMPORT_META: EventMeta = { actor: 'user', command: 'import' }

/** An imported event with the session ids it names, and a fork's point, as they are in this store. */
function remap(
  event: ChronicleEvent,
  ids: ReadonlyMap<string, string>,
  seqs: ReadonlyMap<number, number>,
): ChronicleEvent {
  const id = (original: string) => ids.get(original) as string
  switch (event.type) {
    case 'session.created':
      return event.data.parent
        ? {
            ...event,
            data: { ...event.data, parent: { ...event.data.parent, sessionId: id(event.data.parent.sessionId) } },
          }
        : event
    case 'session.forked': {
      const { sessionId, seq } = event.data.from
      return { ...event, data: { ...event.data, from: { sessionId: id(sessionId), seq: seqs.get(seq) as number } } }
    }
    case 'subtask.started':
      return { ...event, data: { ...event.data, childSessionId: id(event.data.childSessionId) } }
    case 'subtask.finished':
      return { ...event, data: { ...event.data, childSessionId: id(event.data.childSessionId) } }
    case 'permission.requested':
      return event.data.from
        ? { ...event, data: { ...event.data, from: { ...event.data.from, sessionId: id(event.data.from.sessionId) } } }
        : event
    case 'elicitation.requested':
      return event.data.from
        ? { ...event, data: { ...event.data, from: { ...event.data.from, sessionId: id(event.data.from.sessionId) } } }
        : event
    default:
      return event
  }
}

/**
 * A session's read model with every seq and session id it holds mapped (e.g.
 * through an import's `seqs` and `ids`): what the import of its export holds
 * right before its session.imported marker.
 */
export function renumberView(
  view: SessionView,
  seqs: ReadonlyMap<number, number>,
  ids: ReadonlyMap<string, string> = new Map(),
): SessionView {
  const seq = (n: number) => seqs.get(n) ?? n
  const id = (sessionId: string) => ids.get(sessionId) ?? sessionId
  const s = view.session
  const messages = new Map([...view.messages].map(([key, m]) => [key, { ...m, sessionId: id(m.sessionId) }]))
  const parts = new Map(
    [...view.parts].map(([key, p]): [string, Part] => [
      key,
      p.type === 'subtask'
        ? { ...p, sessionId: id(p.sessionId), childSessionId: id(p.childSessionId) }
        : { ...p, sessionId: id(p.sessionId) },
    ]),
  )
  return {
    session: s && {
      ...s,
      id: id(s.id),
      parent: s.parent && { ...s.parent, sessionId: id(s.parent.sessionId) },
      lastSeq: seq(s.lastSeq),
      forkedFrom: s.forkedFrom && { sessionId: id(s.forkedFrom.sessionId), seq: seq(s.forkedFrom.seq) },
      inbox: s.inbox.map((i) => ({ ...i, seq: seq(i.seq) })),
      pendingPermissions: s.pendingPermissions.map((p) => ({
        ...p,
        seq: seq(p.seq),
        ...(p.from && { from: { ...p.from, sessionId: id(p.from.sessionId) } }),
      })),
      ...(s.pendingElicitations && {
        pendingElicitations: s.pendingElicitations.map((e) => ({
          ...e,
          seq: seq(e.seq),
          ...(e.from && { from: { ...e.from, sessionId: id(e.from.sessionId) } }),
        })),
      }),
      // the seq of the snapshot event that recorded it
      ...(s.workspace && { workspace: { ...s.workspace, seq: seq(s.workspace.seq) } }),
    },
    messages,
    parts,
  }
}
