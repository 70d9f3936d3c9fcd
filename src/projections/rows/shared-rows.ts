import type Database from 'better-sqlite3'
import { copyWith } from '../../events/copy.js'
import { messageFromRow } from './message-rows.js'
import type { Message, Part } from '../fold/model.js'
import { PART_COLUMNS, type PartRow, withTails } from './part-rows.js'
import { perConnection } from './prepared.js'

/**
 * Forks share their parent's rows (schema migration 14). A fork's history is
 * its parent's up to the fork point, so its messages and parts are the
 * parent's as they were there, plus what it changed itself. Copying them
 * made a fork cost as much as its parent's state (103 ms at 1,000 turns);
 * instead a fork reads its own rows first, then its parent's rows whose
 * `version` (the session version of the event that last changed them) is at
 * or before the fork point (`inherits.upto`), then that parent's parent's
 * likewise. What keeps that true:
 *
 * - what was in flight at the fork point, the fork owns rows for (and settles);
 * - a row the parent changed after the fork point (a revert marking a
 *   message, a late patch: anything settled that changes again is logged in
 *   `rewrites`) is copied into a fork made later at that point, from the state
 *   there, and into every existing fork that read it when the parent changes
 *   it (copy on write, src/projections/rows/projector.ts);
 * - a fork of a session whose rows have no versions (projected before
 *   migration 14) copies its rows, as forks always did.
 *
 * A session's own rows are read whatever their version: only its forks see
 * them as of a point.
 */

/** Where a session's rows are read from: its own (any version), then each ancestor's up to the fork point. */
export interface RowLevel {
  readonly sessionId: string
  readonly upto: number
}

const OWN = Number.MAX_SAFE_INTEGER

export function rowChain(db: Database.Database, sessionId: string): RowLevel[] {
  const { inherits } = statements(db)
  const chain: RowLevel[] = [{ sessionId, upto: OWN }]
  for (let at = inherits.get(sessionId) as RowLevel | undefined; at; at = inherits.get(at.sessionId) as RowLevel) {
    chain.push(at)
  }
  return chain
}

/** The session's parts (of one message, if given), by id, each from the first level of its chain that has it. */
export function sharedParts(db: Database.Database, sessionId: string, messageId?: string): Part[] {
  const stmt = statements(db)
  const chain = rowChain(db, sessionId)
  const read = (level: RowLevel) =>
    (messageId === undefined
      ? stmt.parts.all(level.sessionId, level.upto)
      : stmt.messageParts.all(level.sessionId, messageId, level.upto)) as PartRow[]
  const own = read(chain[0] as RowLevel)
  if (chain.length === 1) return withTails(db, sessionId, own)
  const rows = new Map(own.map((r) => [r.id, r]))
  for (const level of chain.slice(1))
    for (const row of read(level)) if (!rows.has(row.id)) rows.set(row.id, inheritedRow(row, sessionId))
  return withTails(db, sessionId, [...rows.values()].sort(byId))
}

/** One part: the session's own row (with the deltas logged after it, up to `upTo`), else its ancestors'. */
export function sharedPart(db: Database.Database, sessionId: string, id: string, upTo?: number): Part | undefined {
  const stmt = statements(db)
  const own = stmt.part.get(sessionId, id, OWN) as PartRow | undefined
  if (own) return withTails(db, sessionId, [own], upTo)[0]
  for (const level of rowChain(db, sessionId).slice(1)) {
    const row = stmt.part.get(level.sessionId, id, level.upto) as PartRow | undefined
    if (row) return withTails(db, sessionId, [inheritedRow(row, sessionId)])[0]
  }
  return undefined
}

export function sharedMessages(db: Database.Database, sessionId: string): Message[] {
  const stmt = statements(db)
  const chain = rowChain(db, sessionId)
  const read = (level: RowLevel) => stmt.messages.all(level.sessionId, level.upto) as { id: string; data: string }[]
  const own = read(chain[0] as RowLevel)
  if (chain.length === 1) return own.map((r) => messageFromRow(sessionId, r.id, r.data))
  const rows = new Map(own.map((r) => [r.id, r]))
  for (const level of chain.slice(1)) for (const row of read(level)) if (!rows.has(row.id)) rows.set(row.id, row)
  return [...rows.values()].sort(byId).map((r) => rekeyed(messageFromRow(sessionId, r.id, r.data), sessionId))
}

export function sharedMessage(db: Database.Database, sessionId: string, id: string): Message | undefined {
  const stmt = statements(db)
  for (const level of rowChain(db, sessionId)) {
    const data = stmt.message.get(level.sessionId, id, level.upto) as string | undefined
    if (data !== undefined) return rekeyed(messageFromRow(sessionId, id, data), sessionId)
  }
  return undefined
}

/**
 * A row an ancestor holds, as the reading session's: its session is the reader (the stored part names none
 * when it was its own session's), and it is settled (what was in flight at the fork point the fork owns).
 */
function inheritedRow(row: PartRow, sessionId: string): PartRow {
  return { sessionId, id: row.id, messageId: row.messageId, data: row.data, through: null }
}

/** A message stored whole by older code names its own session: the reader's, for a fork. */
function rekeyed(message: Message, sessionId: string): Message {
  return message.sessionId === sessionId ? message : copyWith(message, { sessionId })
}

const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

const statements = perConnection((db: Database.Database) => ({
  inherits: db.prepare('SELECT from_session AS sessionId, upto FROM inherits WHERE session_id = ?'),
  parts: db.prepare(
    `SELECT ${PART_COLUMNS} FROM parts p WHERE p.session_id = ? AND COALESCE(p.version, 0) <= ? ORDER BY p.id`,
  ),
  messageParts: db.prepare(
    `SELECT ${PART_COLUMNS} FROM parts p WHERE p.session_id = ? AND p.message_id = ? AND COALESCE(p.version, 0) <= ?
     ORDER BY p.id`,
  ),
  part: db.prepare(
    `SELECT ${PART_COLUMNS} FROM parts p WHERE p.session_id = ? AND p.id = ? AND COALESCE(p.version, 0) <= ?`,
  ),
  messages: db.prepare('SELECT id, data FROM messages WHERE session_id = ? AND COALESCE(version, 0) <= ? ORDER BY id'),
  message: db
    .prepare('SELECT data FROM messages WHERE session_id = ? AND id = ? AND COALESCE(version, 0) <= ?')
    .pluck(),
}))
