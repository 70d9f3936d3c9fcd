import type Database from 'better-sqlite3'
import { copyWith } from '../../events/copy.js'
import type { Session } from '../fold/model.js'
import { prepared } from './prepared.js'

/**
 * How session rows are stored. Every event moves its session's head —
 * `version`, `lastSeq`, `updatedAt` — and nothing else about the session when
 * it is a streamed delta. The log's (stream, version) index already holds the
 * head: it is the stream's last event. So the row is written only when
 * something else changes, and readers take the head from the log (the row's
 * own copy of it is as of its last write).
 */

/**
 * Each session row `s` with its stream's last event `h` (CROSS JOIN fixes the
 * loop order: sessions outside, then two index lookups each; the planner
 * would otherwise walk the whole log for a condition on `h.seq`).
 */
export const SESSION_FROM = `sessions s CROSS JOIN streams st ON st.session_id = s.id
  CROSS JOIN event_log h ON h.seq = (SELECT seq FROM event_log WHERE stream = st.id ORDER BY version DESC LIMIT 1)`

/** Columns `data, seq, version, at` over SESSION_FROM. */
export const SESSION_COLUMNS = 's.data AS data, h.seq AS seq, h.version AS version, h.at AS at'

export interface SessionRow {
  readonly data: string
  readonly seq: number
  readonly version: number
  readonly at: number
}

export function sessionFromRow(row: SessionRow): Session {
  const stored = JSON.parse(row.data) as Session
  // The keys exist already, so the row's key order stands.
  return copyWith(stored, { updatedAt: new Date(row.at).toISOString(), lastSeq: row.seq, version: row.version })
}

/** Reads one session (undefined: no row). */
export function sessionReader(db: Database.Database): (sessionId: string) => Session | undefined {
  const get = prepared(db, `SELECT ${SESSION_COLUMNS} FROM ${SESSION_FROM} WHERE s.id = ?`)
  return (sessionId) => {
    const row = get.get(sessionId) as SessionRow | undefined
    return row && sessionFromRow(row)
  }
}

export interface SessionWriter {
  /** Writes the session's row; `created`: the row is new (or replaced, for a fork). */
  write(session: Session, created: boolean): void
}

export function createSessionWriter(db: Database.Database): SessionWriter {
  // A row made by this code has every message and part row versioned (schema migration 14): its forks may share them.
  const insert = db.prepare(
    `INSERT INTO sessions (id, parent_id, archived, data, versioned) VALUES (?, ?, ?, ?, 1)
     ON CONFLICT (id) DO UPDATE SET parent_id = excluded.parent_id, archived = excluded.archived, data = excluded.data,
       versioned = 1`,
  )
  const update = db.prepare('UPDATE sessions SET archived = ?, data = ? WHERE id = ?')
  return {
    write(session, created) {
      if (created)
        insert.run(session.id, session.parent?.sessionId ?? null, session.archived ? 1 : 0, JSON.stringify(session))
      else update.run(session.archived ? 1 : 0, JSON.stringify(session), session.id)
    },
  }
}
