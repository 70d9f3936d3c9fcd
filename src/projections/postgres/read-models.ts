import type pg from 'pg'
import { messageFromRow } from '../rows/message-rows.js'
import type { Message, Part, Session, SessionView } from '../fold/model.js'
import { completed, fromRow, type LoggedDelta, type PartRow, tailsFrom } from '../rows/part-rows.js'
import { sessionFromRow } from '../rows/session-rows.js'
import type { RowLevel } from '../rows/shared-rows.js'
import { copyWith } from '../../events/copy.js'
import { COMMITTED, type PostgresEventLog } from '../../events/postgres/log.js'
import { decodeSessionCursor, listLimit, type SessionPage, sessionCursor } from '../queries/read-model.js'
import type { ReadModels } from '../read-models.js'

/**
 * The read models on PostgreSQL (schema migration 2 of src/events/postgres/schema.ts),
 * read as SQLite's are (src/projections/queries/read-model.ts, shared-rows.ts): a session's
 * head from its stream's last event; a streaming part's row and the deltas logged
 * after it; a fork's rows, then its parent's as of the fork point. Asynchronous,
 * on any connection (the pool, or the append transaction's client).
 */
export interface Queryable {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    text: string | pg.QueryConfig,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>>
}

const OWN = Number.MAX_SAFE_INTEGER

export async function pgSession(db: Queryable, sessionId: string): Promise<Session | undefined> {
  return (await pgSessions(db, [sessionId]))[0]
}

const SESSIONS = {
  name: 'chronicle_sessions',
  text: `SELECT s.data, h.seq, h.version, h.at FROM sessions s JOIN streams st ON st.id = s.id
         JOIN events h ON h.session_id = s.id AND h.version = st.version WHERE s.id = ANY($1::text[])`,
}

/** The sessions of those ids that have rows (a statement prepared once a connection). */
export async function pgSessions(db: Queryable, ids: readonly string[]): Promise<Session[]> {
  const { rows } = await db.query<{ data: string; seq: number; version: number; at: number }>(SESSIONS, [ids])
  return rows.map(sessionFromRow)
}

export async function pgChain(db: Queryable, sessionId: string): Promise<RowLevel[]> {
  const chain: RowLevel[] = [{ sessionId, upto: OWN }]
  for (let at = sessionId; ; ) {
    const { rows } = await db.query<RowLevel>(
      'SELECT from_session AS "sessionId", upto FROM inherits WHERE session_id = $1',
      [at],
    )
    const level = rows[0]
    if (!level) return chain
    chain.push(level)
    at = level.sessionId
  }
}

export async function pgMessages(db: Queryable, sessionId: string): Promise<Message[]> {
  const found = new Map<string, Message>()
  for (const level of await pgChain(db, sessionId)) {
    const { rows } = await db.query<{ id: string; data: string }>(
      'SELECT id, data FROM messages WHERE session_id = $1 AND COALESCE(version, 0) <= $2::bigint',
      [level.sessionId, level.upto],
    )
    for (const r of rows)
      if (!found.has(r.id)) found.set(r.id, rekeyed(messageFromRow(sessionId, r.id, r.data), sessionId))
  }
  return [...found.values()].sort(byId)
}

export async function pgMessage(db: Queryable, sessionId: string, id: string): Promise<Message | undefined> {
  for (const level of await pgChain(db, sessionId)) {
    const { rows } = await db.query<{ data: string }>(
      'SELECT data FROM messages WHERE session_id = $1 AND id = $2 AND COALESCE(version, 0) <= $3::bigint',
      [level.sessionId, id, level.upto],
    )
    if (rows[0]) return rekeyed(messageFromRow(sessionId, id, rows[0].data), sessionId)
  }
  return undefined
}

interface PgPartRow extends PartRow {
  readonly data: string
}

const PART_COLUMNS = 'session_id AS "sessionId", id, message_id AS "messageId", data, through'

export async function pgParts(db: Queryable, sessionId: string, messageId?: string): Promise<Part[]> {
  const found = new Map<string, PgPartRow>()
  const chain = await pgChain(db, sessionId)
  for (const [i, level] of chain.entries()) {
    const { rows } = await db.query<PgPartRow>(
      `SELECT ${PART_COLUMNS} FROM parts WHERE session_id = $1 AND COALESCE(version, 0) <= $2::bigint
         AND ($3::text IS NULL OR message_id = $3)`,
      [level.sessionId, level.upto, messageId ?? null],
    )
    for (const r of rows) if (!found.has(r.id)) found.set(r.id, i === 0 ? r : inheritedRow(r, sessionId))
  }
  return withTails(db, sessionId, [...found.values()].sort(byId))
}

export async function pgPart(db: Queryable, sessionId: string, id: string, upTo?: number): Promise<Part | undefined> {
  for (const [i, level] of (await pgChain(db, sessionId)).entries()) {
    const { rows } = await db.query<PgPartRow>(
      `SELECT ${PART_COLUMNS} FROM parts WHERE session_id = $1 AND id = $2 AND COALESCE(version, 0) <= $3::bigint`,
      [level.sessionId, id, level.upto],
    )
    const row = rows[0]
    if (row) return (await withTails(db, sessionId, [i === 0 ? row : inheritedRow(row, sessionId)], upTo))[0]
  }
  return undefined
}

/** The stored read model of one session as a view (what verify compares with a fresh fold). */
export async function pgLoadView(db: Queryable, sessionId: string): Promise<SessionView> {
  // One after another: the connection may be a single client (an append's transaction).
  const session = await pgSession(db, sessionId)
  const messages = await pgMessages(db, sessionId)
  const parts = await pgParts(db, sessionId)
  return {
    session: session ?? null,
    messages: new Map(messages.map((m) => [m.id, m])),
    parts: new Map(parts.map((p) => [p.id, p])),
  }
}

/** Each streaming part completed with the deltas its session logged after its row (up to session version `upTo`). */
async function withTails(db: Queryable, sessionId: string, rows: readonly PgPartRow[], upTo = OWN): Promise<Part[]> {
  const from = tailsFrom(rows)
  if (from === undefined) return rows.map(fromRow)
  const { rows: deltas } = await db.query<LoggedDelta>(
    `SELECT version, type, data FROM events WHERE session_id = $1 AND version > $2 AND version <= $3::bigint
       AND type IN ('text.delta', 'reasoning.delta', 'tool.input.delta') ORDER BY version`,
    [sessionId, from, upTo],
  )
  return completed(rows, deltas)
}

function inheritedRow(row: PgPartRow, sessionId: string): PgPartRow {
  return { sessionId, id: row.id, messageId: row.messageId, data: row.data, through: null }
}

function rekeyed(message: Message, sessionId: string): Message {
  return message.sessionId === sessionId ? message : copyWith(message, { sessionId })
}

const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/**
 * Every session with its JSON as `j`, read by chronicle_json (schema migration 7): a cast of the text would refuse
 * the escapes JSON.stringify writes for a NUL or a lone surrogate, and one such title would fail the whole read.
 */
const JSON_SESSIONS = '(SELECT id, archived, chronicle_json(data) AS j FROM sessions) AS s'

/**
 * PostgreSQL's read models as the port (src/projections/read-models.ts): each read on the log's pool once the
 * appends it must see have committed (PostgresEventLog.reader). Session ids compare byte-wise (COLLATE "C"),
 * as SQLite's do, so both engines list in the same order.
 */
export function postgresReadModels(log: Pick<PostgresEventLog, 'reader' | 'snapshot'>): ReadModels {
  /** one text column, `value`, of every row (a read of every session: everything queued commits first) */
  const values = async (sql: string): Promise<string[]> =>
    (await (await log.reader()).query<{ value: string }>(sql)).rows.map((r) => r.value)
  return {
    session: async (sessionId, opts) => pgSession(await log.reader(opts?.committed ? COMMITTED : sessionId), sessionId),
    message: async (sessionId, messageId) => pgMessage(await log.reader(sessionId), sessionId, messageId),
    messages: async (sessionId) => pgMessages(await log.reader(sessionId), sessionId),
    parts: async (sessionId, messageId) => pgParts(await log.reader(sessionId), sessionId, messageId),
    view: (sessionId, opts) =>
      log.snapshot((client) => pgLoadView(client, sessionId), { sessionId, committed: opts?.committed === true }),
    list: async (opts = {}) => pgListSessions(await log.reader(), opts),
    childSessionIds: () =>
      values('SELECT id AS value FROM sessions WHERE parent_id IS NOT NULL ORDER BY id COLLATE "C"'),
    sessionsWithOpenWork: () =>
      values(
        `SELECT id AS value FROM ${JSON_SESSIONS} WHERE (j ->> 'run') IS NOT NULL
           OR jsonb_array_length(COALESCE(j -> 'inbox', '[]'::jsonb)) > 0
           OR (j #>> '{compaction,status}') = 'requested' ORDER BY id COLLATE "C"`,
      ),
    sessionsWithWorkspaceTask: () =>
      values(
        `SELECT id AS value FROM ${JSON_SESSIONS} WHERE (j ->> 'restoring') IS NOT NULL
           OR (j ->> 'materializing') IS NOT NULL ORDER BY id COLLATE "C"`,
      ),
    sessionIds: () => values('SELECT id AS value FROM sessions ORDER BY id COLLATE "C"'),
    liveSessionDirectories: () =>
      values(
        `SELECT DISTINCT (j ->> 'directory') COLLATE "C" AS value FROM ${JSON_SESSIONS}
           WHERE NOT archived AND (j ->> 'imported') IS NULL ORDER BY value`,
      ),
    statusCounts: async () => {
      const { rows } = await (await log.reader()).query<{ status: string; archived: boolean; count: number }>(
        `SELECT j ->> 'status' AS status, archived, count(*)::integer AS count FROM ${JSON_SESSIONS}
           GROUP BY 1, 2 ORDER BY (j ->> 'status') COLLATE "C", archived`,
      )
      return rows
    },
    sweep: () => {}, // every read is the server's: nothing of a session is held here
  }
}

/** listSessions on PostgreSQL: most recently active (the stream's last event) first, in keyset pages. */
async function pgListSessions(
  db: Queryable,
  opts: { cursor?: string; limit?: number; archived?: boolean },
): Promise<SessionPage> {
  const limit = listLimit(opts.limit)
  const [beforeSeq, beforeId] = opts.cursor ? decodeSessionCursor(opts.cursor) : [Number.MAX_SAFE_INTEGER, '']
  const { rows } = await db.query<{ id: string; data: string; seq: number; version: number; at: number }>(
    `SELECT s.id, s.data, h.seq, h.version, h.at FROM sessions s JOIN streams st ON st.id = s.id
       JOIN events h ON h.session_id = s.id AND h.version = st.version
       WHERE s.archived = $1 AND (h.seq < $2 OR (h.seq = $2 AND s.id COLLATE "C" < $3))
       ORDER BY h.seq DESC, s.id COLLATE "C" DESC LIMIT $4`,
    [opts.archived ?? false, beforeSeq, opts.cursor ? beforeId : '', limit + 1],
  )
  const page = rows.slice(0, limit)
  const last = page.at(-1)
  return {
    sessions: page.map(sessionFromRow),
    ...(rows.length > limit && last && { cursor: sessionCursor(last.seq, last.id) }),
  }
}
