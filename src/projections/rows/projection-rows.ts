import type Database from 'better-sqlite3'
import { messageRow } from './message-rows.js'
import type { Message, Part, Session } from '../fold/model.js'
import { createPartWriter } from './part-rows.js'
import { perConnection } from './prepared.js'
import { createSessionWriter, sessionReader } from './session-rows.js'
import { type RowLevel, sharedMessage, sharedPart } from './shared-rows.js'

export type RowKind = 'message' | 'part'

/**
 * What the live projection (src/projections/rows/projector.ts) reads and writes of
 * the read-model tables, inside the append's transaction: one interface, so
 * the projection itself is the same on every engine. Reads are as of before
 * the batch being projected (its events are in the log already); writes land
 * in the same transaction. SQLite's are its prepared statements
 * (`sqliteRows`).
 */
export interface ProjectionRows {
  session(sessionId: string): Session | undefined
  /** a message as the session reads it: its own row, else its parent's as of the fork point (shared-rows.ts) */
  message(sessionId: string, id: string): Message | undefined
  /** likewise a part, with the deltas logged after its row up to session version `upTo` */
  part(sessionId: string, id: string, upTo: number): Part | undefined
  /** the session and version of the event at `seq`: where a fork starting after it reads its rows */
  forkPoint(seq: number): { owner: string; upto: number }
  /** whether every row of the session carries the version that last changed it (schema migration 14) */
  versioned(sessionId: string): boolean
  /** the settled entities the session changed again after `upto` */
  rewritesSince(sessionId: string, upto: number): { kind: RowKind; id: string }[]
  /** the forks that read the session's rows, each up to its fork point */
  children(sessionId: string): RowLevel[]
  /** the version that last changed the session's own row of an entity (null: before migration 14; undefined: none) */
  rowVersion(kind: RowKind, sessionId: string, id: string): number | null | undefined
  writeSession(session: Session, created: boolean): void
  writeMessage(sessionId: string, message: Message, version: number): void
  /** `version`: the session version the part is current at (its streamed tail follows); `changed`: see rowVersion */
  writePart(sessionId: string, part: Part, version: number, changed: number): void
  writeInherits(child: string, owner: string, upto: number): void
  writeRewrite(sessionId: string, version: number, kind: RowKind, id: string): void
}

/** The projection's rows on an SQLite connection. */
export const sqliteRows = perConnection((db: Database.Database): ProjectionRows => {
  const getSession = sessionReader(db)
  const sessions = createSessionWriter(db)
  const parts = createPartWriter(db)
  const stmt = {
    message: db.prepare(
      `INSERT INTO messages (session_id, id, data, version) VALUES (?, ?, ?, ?)
       ON CONFLICT (session_id, id) DO UPDATE SET data = excluded.data, version = excluded.version`,
    ),
    forkPoint: db.prepare('SELECT session_id AS owner, version AS upto FROM events WHERE seq = ?'),
    versioned: db.prepare('SELECT versioned FROM sessions WHERE id = ?').pluck(),
    inherits: db.prepare('INSERT INTO inherits (session_id, from_session, upto) VALUES (?, ?, ?)'),
    children: db.prepare('SELECT session_id AS sessionId, upto FROM inherits WHERE from_session = ?'),
    rewrite: db.prepare('INSERT INTO rewrites (session_id, version, kind, id) VALUES (?, ?, ?, ?)'),
    rewritesSince: db.prepare('SELECT DISTINCT kind, id FROM rewrites WHERE session_id = ? AND version > ?'),
    rowVersion: {
      message: db.prepare('SELECT version FROM messages WHERE session_id = ? AND id = ?').pluck(),
      part: db.prepare('SELECT version FROM parts WHERE session_id = ? AND id = ?').pluck(),
    },
  }
  return {
    session: (sessionId) => getSession(sessionId),
    message: (sessionId, id) => sharedMessage(db, sessionId, id),
    part: (sessionId, id, upTo) => sharedPart(db, sessionId, id, upTo),
    forkPoint: (seq) => stmt.forkPoint.get(seq) as { owner: string; upto: number },
    versioned: (sessionId) => stmt.versioned.get(sessionId) === 1,
    rewritesSince: (sessionId, upto) => stmt.rewritesSince.all(sessionId, upto) as { kind: RowKind; id: string }[],
    children: (sessionId) => stmt.children.all(sessionId) as RowLevel[],
    rowVersion: (kind, sessionId, id) => stmt.rowVersion[kind].get(sessionId, id) as number | null | undefined,
    writeSession: (session, created) => sessions.write(session, created),
    writeMessage: (sessionId, message, version) =>
      stmt.message.run(sessionId, message.id, messageRow(sessionId, message.id, message), version),
    writePart: (sessionId, part, version, changed) => parts.write(sessionId, part, version, changed),
    writeInherits: (child, owner, upto) => stmt.inherits.run(child, owner, upto),
    writeRewrite: (sessionId, version, kind, id) => stmt.rewrite.run(sessionId, version, kind, id),
  }
})
