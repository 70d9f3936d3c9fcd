import type { Readable } from '../../events/store.js'
import { ChronicleError } from '../../events/errors.js'
import type { Message, Part, Session, SessionView } from '../fold/model.js'
import { prepared } from '../rows/prepared.js'
import { sharedMessage, sharedMessages, sharedParts } from '../rows/shared-rows.js'
import { SESSION_FROM, sessionFromRow, sessionReader, type SessionRow } from '../rows/session-rows.js'

/**
 * What the read-model queries need of a store: its database, read your
 * writes (EventStore.reader), or as committed (`store.asCommitted`).
 */
export type ReadModelSource = Readable

/**
 * Queries over the stored read models. Nothing here writes: only the
 * projector (inside the append transaction) and rebuild do.
 */

export function getSession(store: ReadModelSource, sessionId: string): Session | undefined {
  return sessionReader(store.reader(sessionId))(sessionId)
}

export function requireSession(store: ReadModelSource, sessionId: string): Session {
  const session = getSession(store, sessionId)
  if (!session) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
  return session
}

// A fork's messages and parts are its own rows and its parent's as of the fork point (shared-rows.ts).

export function getMessage(store: ReadModelSource, sessionId: string, messageId: string): Message | undefined {
  return sharedMessage(store.reader(sessionId), sessionId, messageId)
}

export function getMessages(store: ReadModelSource, sessionId: string): Message[] {
  return sharedMessages(store.reader(sessionId), sessionId)
}

export function getParts(store: ReadModelSource, sessionId: string, messageId?: string): Part[] {
  return sharedParts(store.reader(sessionId), sessionId, messageId)
}

/** The stored read model of one session as a view (what verify compares with a fresh fold). */
export function loadView(store: ReadModelSource, sessionId: string): SessionView {
  return {
    session: getSession(store, sessionId) ?? null,
    messages: new Map(getMessages(store, sessionId).map((m) => [m.id, m])),
    parts: new Map(getParts(store, sessionId).map((p) => [p.id, p])),
  }
}

export interface SessionPage {
  readonly sessions: Session[]
  readonly cursor?: string
}

/**
 * Sessions, most recently active (latest event) first, in keyset pages. The
 * cursor is opaque. Activity is the session's head in the log, so ordering
 * looks up each session's last event: a point lookup per session.
 */
export function listSessions(
  store: ReadModelSource,
  opts: { cursor?: string; limit?: number; archived?: boolean } = {},
): SessionPage {
  const db = store.reader()
  const limit = listLimit(opts.limit)
  const archived = opts.archived ? 1 : 0
  const [beforeSeq, beforeId] = opts.cursor ? decodeSessionCursor(opts.cursor) : [Number.MAX_SAFE_INTEGER, '']
  // Order by keys alone, then read the page's rows: the sort then carries no JSON.
  const keys = prepared(
    db,
    `SELECT s.id AS id, h.seq AS seq, h.version AS version, h.at AS at FROM ${SESSION_FROM}
       WHERE s.archived = ? AND (h.seq < ? OR (h.seq = ? AND s.id < ?))
       ORDER BY h.seq DESC, s.id DESC LIMIT ?`,
  ).all(archived, beforeSeq, beforeSeq, opts.cursor ? beforeId : '\uffff', limit + 1) as (Omit<SessionRow, 'data'> & {
    id: string
  })[]
  const more = keys.length > limit
  const page = keys.slice(0, limit)
  const last = page[page.length - 1]
  const data = prepared(db, 'SELECT data FROM sessions WHERE id = ?', true)
  return {
    sessions: page.map((key) => sessionFromRow(Object.assign({}, key, { data: data.get(key.id) as string }))),
    ...(more && last && { cursor: sessionCursor(last.seq, last.id) }),
  }
}

/** A list page's size: 50 unless asked, 1 to 500. */
export const listLimit = (limit: number | undefined): number => Math.min(Math.max(limit ?? 50, 1), 500)

/** The opaque cursor after a session of the list: its head seq and id (both engines write the same). */
export function sessionCursor(seq: number, id: string): string {
  return Buffer.from(JSON.stringify([seq, id])).toString('base64url')
}

/** A list cursor's head seq and session id; BAD_REQUEST when it is not one. */
export function decodeSessionCursor(cursor: string): [number, string] {
  try {
    const value = JSON.parse(Buffer.from(cursor, 'base64url').toString()) as unknown
    if (Array.isArray(value) && Number.isSafeInteger(value[0]) && typeof value[1] === 'string')
      return [value[0] as number, value[1]]
  } catch {
    // fall through to the error below
  }
  throw new ChronicleError('BAD_REQUEST', 'invalid session list cursor')
}

/** Ids of every sub-agent child session. */
export function childSessionIds(store: ReadModelSource): string[] {
  return prepared(
    store.reader(),
    'SELECT id FROM sessions WHERE parent_id IS NOT NULL ORDER BY id',
    true,
  ).all() as string[]
}

/**
 * Sessions whose read model says a run is open or work waits (input, a
 * requested compaction): what recovery looks at, without a scan of the log.
 */
export function sessionsWithOpenWork(store: ReadModelSource): string[] {
  return prepared(
    store.reader(),
    "SELECT id FROM sessions WHERE data ->> '$.run' IS NOT NULL OR json_array_length(data, '$.inbox') > 0 OR data ->> '$.compaction.status' = 'requested' ORDER BY id",
    true,
  ).all() as string[]
}

/** Ids of sessions whose files a crash left mid-task: a restore or a fork's materialization started and not ended. */
export function sessionsWithWorkspaceTask(store: ReadModelSource): string[] {
  return prepared(
    store.reader(),
    "SELECT id FROM sessions WHERE data ->> '$.restoring' IS NOT NULL OR data ->> '$.materializing' IS NOT NULL ORDER BY id",
    true,
  ).all() as string[]
}

/** Ids of every session with a read model. */
export function sessionIds(store: ReadModelSource): string[] {
  return prepared(store.reader(), 'SELECT id FROM sessions ORDER BY id', true).all() as string[]
}

/** How many sessions (archived ones apart) are in each status: what a metrics scrape reads (docs/OBSERVABILITY.md). */
export function sessionStatusCounts(store: ReadModelSource): { status: string; archived: boolean; count: number }[] {
  const rows = prepared(
    store.reader(),
    "SELECT data ->> '$.status' AS status, archived, count(*) AS count FROM sessions GROUP BY 1, 2 ORDER BY 1, 2",
  ).all() as { status: string; archived: number; count: number }[]
  return rows.map((r) => ({ status: r.status, archived: r.archived === 1, count: r.count }))
}
