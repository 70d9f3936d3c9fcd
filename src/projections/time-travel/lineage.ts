import type Database from 'better-sqlite3'
import type { StoredEvent } from '../../events/envelope.js'
import { ChronicleError } from '../../events/errors.js'
import { type EventRow, type EventStore, toEvent } from '../../events/store.js'
import { perConnection } from '../rows/prepared.js'

/**
 * A session's history as segments of the log: for a fork, its parent's
 * history up to the fork point (recursively), then its own events. Because a
 * fork's first event is always later than the event it forks at, the
 * segments are in seq order and never overlap, so the whole history is
 * strictly increasing in seq and can be paged by seq.
 */
export interface Segment {
  readonly sessionId: string
  /** seq of the session's first event */
  readonly firstSeq: number
  /** the last seq of this segment that belongs to the history (inclusive) */
  readonly upTo: number
}

const OPEN = Number.MAX_SAFE_INTEGER

export function lineage(store: EventStore, sessionId: string): Segment[] {
  const first = firstEvent(store, sessionId)
  return segmentsOf(first, first.type === 'session.forked' ? lineage(store, first.data.from.sessionId) : [])
}

/** A session's segments, given its first event and (for a fork) its parent's segments. */
export function segmentsOf(first: StoredEvent, parentSegments: readonly Segment[]): Segment[] {
  const own: Segment = { sessionId: first.sessionId, firstSeq: first.seq, upTo: OPEN }
  if (first.type !== 'session.forked') return [own]
  const cut = first.data.from.seq
  const inherited = parentSegments
    .filter((s) => s.firstSeq <= cut)
    .map((s) => Object.assign({}, s, { upTo: Math.min(s.upTo, cut) }))
  return [...inherited, own]
}

/** The session's first event (session.created or session.forked). */
export function firstEvent(store: EventStore, sessionId: string): StoredEvent {
  const first = store.readSession(sessionId, { limit: 1 })[0]
  if (!first) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
  return first
}

/** Where an event of a session's history lives: the session that owns it and its version there. */
export interface Located {
  readonly sessionId: string
  readonly seq: number
  readonly version: number
  readonly inherited: boolean
}

/**
 * Finds event `seq` in the session's history (its own events, or for a fork
 * the inherited prefix); anything else is SEQ_OUT_OF_RANGE. Without a seq:
 * the session's latest event.
 */
export function locate(store: EventStore, sessionId: string, seq?: number): Located {
  const segments = lineage(store, sessionId)
  if (seq === undefined) {
    const version = store.version(sessionId)
    return { sessionId, seq: seqOf(store.reader(sessionId), sessionId, version), version, inherited: false }
  }
  const event = Number.isSafeInteger(seq) && seq > 0 ? store.get(seq) : undefined
  return locatedIn(sessionId, segments, seq, event)
}

/**
 * Where `event` (the log's event at `seq`, if there is one) lies in a session's history of `segments`:
 * SEQ_OUT_OF_RANGE when it is not part of it.
 */
export function locatedIn(
  sessionId: string,
  segments: readonly Segment[],
  seq: number,
  event: Pick<StoredEvent, 'sessionId' | 'version'> | undefined,
): Located {
  const segment = event && segments.find((s) => s.sessionId === event.sessionId && seq >= s.firstSeq && seq <= s.upTo)
  if (!event || !segment) {
    const own = segments[segments.length - 1] as Segment
    const inherited = segments.slice(0, -1).map((s) => `${s.sessionId} up to seq ${s.upTo}`)
    throw new ChronicleError(
      'SEQ_OUT_OF_RANGE',
      `seq ${seq} is not an event of session ${sessionId}'s history (its own events from seq ${own.firstSeq}` +
        `${inherited.length > 0 ? `, inherited: ${inherited.join(', ')}` : ''})`,
      { sessionId, seq },
    )
  }
  return { sessionId: event.sessionId, seq, version: event.version, inherited: event.sessionId !== sessionId }
}

/** The seq of a session's event at `version`. */
export function seqOf(db: Database.Database, sessionId: string, version: number): number {
  const seq = statements(db).seqAt.get(sessionId, version) as number | undefined
  if (seq === undefined) throw new ChronicleError('SESSION_NOT_FOUND', `no event ${version} in session ${sessionId}`)
  return seq
}

/**
 * How many of the session's own events have seq <= `seq`. Binary search over
 * versions (seq grows with version inside a session), so a seq bound becomes
 * an index range instead of a scan from the session's start.
 */
export function versionAtOrBefore(db: Database.Database, sessionId: string, seq: number, maxVersion: number): number {
  const { seqAt } = statements(db)
  let lo = 0
  let hi = maxVersion
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2)
    if ((seqAt.get(sessionId, mid) as number) <= seq) lo = mid
    else hi = mid - 1
  }
  return lo
}

/** A session's own events with afterVersion < version <= upToVersion, in pages, either direction. */
export function* eventsByVersion(
  db: Database.Database,
  sessionId: string,
  afterVersion: number,
  upToVersion: number,
  direction: 'forward' | 'backward' = 'forward',
  pageSize = 1000,
): Generator<StoredEvent> {
  const stmt = direction === 'forward' ? statements(db).forward : statements(db).backward
  let lo = afterVersion
  let hi = upToVersion
  while (lo < hi) {
    const rows = stmt.all(sessionId, lo, hi, pageSize) as EventRow[]
    for (const row of rows) yield toEvent(row)
    const last = rows[rows.length - 1]
    if (!last || rows.length < pageSize) return
    if (direction === 'forward') lo = last.version
    else hi = last.version - 1
  }
}

const statements = perConnection(prepare)

function prepare(db: Database.Database) {
  return {
    seqAt: db.prepare('SELECT seq FROM events WHERE session_id = ? AND version = ?').pluck(),
    forward: db.prepare(
      'SELECT * FROM events WHERE session_id = ? AND version > ? AND version <= ? ORDER BY version LIMIT ?',
    ),
    backward: db.prepare(
      'SELECT * FROM events WHERE session_id = ? AND version > ? AND version <= ? ORDER BY version DESC LIMIT ?',
    ),
  }
}
