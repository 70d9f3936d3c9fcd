import type Database from 'better-sqlite3'
import { deflateRawSync } from 'node:zlib'
import { deltaField } from '../../events/rows.js'
import { inflateRow, windowFor } from '../../events/schema.js'
import type { Part } from '../fold/model.js'
import { prepared } from './prepared.js'

/**
 * How parts are stored. A streamed string — a text or reasoning part's
 * `text`, a tool part's `rawInput` — grows by one delta event at a time, and
 * the log already holds every delta. So a part's row is written only when
 * something else about it changes (it starts, it ends, the tool's input is
 * in); while it streams, the row says up to which session version it is
 * current (`through`), and a reader appends the part's deltas logged after
 * that version. A delta therefore writes nothing but its own event row, and
 * its cost does not grow with the length of its part. A settled part (its
 * string complete) has no `through`: its row is the whole part.
 *
 * The JSON row leaves out what its columns already say (id, sessionId and
 * messageId, when they equal them), and a row of COMPRESS_FROM bytes or more
 * (a tool's input and output, a settled text) is stored deflated when that
 * is smaller, as a BLOB — the storage class tells the two apart.
 *
 * Readers never see the split: PART_COLUMNS, fromRow and withTails put it back.
 */

const COMPRESS_FROM = 256

export type StreamedField = 'text' | 'rawInput'

export function streamedField(part: Part): StreamedField | undefined {
  if (part.type === 'text' || part.type === 'reasoning') return 'text'
  if (part.type === 'tool') return 'rawInput'
  return undefined
}

/** A part whose streamed string is complete: a text that ended, a tool whose input is in. */
export function settled(part: Part): boolean {
  return part.type === 'tool'
    ? part.state !== 'pending'
    : (part.type === 'text' || part.type === 'reasoning') && part.ended
}

/** Columns of `parts p` that fromRow reads. */
export const PART_COLUMNS =
  'p.session_id AS sessionId, p.id AS id, p.message_id AS messageId, p.data AS data, p.through AS through'

export interface PartRow {
  readonly sessionId: string
  readonly id: string
  readonly messageId: string
  readonly data: string | Buffer
  readonly through: number | null
}

/** The part as its row holds it (a streaming part without the deltas logged after `through`). */
export function fromRow(row: PartRow): Part {
  const stored = JSON.parse(typeof row.data === 'string' ? row.data : inflateRow(row.data)) as Partial<Part>
  // Key order as the projection makes them; a key the row kept (it differed from its column) wins.
  return { id: row.id, sessionId: row.sessionId, messageId: row.messageId, ...stored } as Part
}

/**
 * The parts of `rows` (all of one session), each streaming one completed
 * with the deltas the log holds after its row's `through` (up to session
 * version `upTo`: the projection reads the state before the events it is
 * applying, which are in the log already): one read of the session's events
 * from the earliest of them.
 */
export function withTails(
  db: Database.Database,
  sessionId: string,
  rows: readonly PartRow[],
  upTo = Number.MAX_SAFE_INTEGER,
): Part[] {
  const from = tailsFrom(rows)
  if (from === undefined) return rows.map(fromRow)
  const deltas = prepared(
    db,
    `SELECT version, type, data FROM events WHERE session_id = ? AND version > ? AND version <= ?
     AND type IN ('text.delta', 'reasoning.delta', 'tool.input.delta') ORDER BY version`,
  ).all(sessionId, from, upTo) as LoggedDelta[]
  return completed(rows, deltas)
}

/** A delta as the log holds it: what completes a streaming part's row. */
export interface LoggedDelta {
  readonly version: number
  readonly type: string
  readonly data: string
}

/** The session version the deltas are read after: the earliest `through` of a streaming row (none: undefined). */
export function tailsFrom(rows: readonly PartRow[]): number | undefined {
  let from: number | undefined
  for (const row of rows) if (row.through !== null) from = Math.min(from ?? row.through, row.through)
  return from
}

/** The parts of `rows`, each streaming one with the deltas (of its session, in order) logged after its `through`. */
export function completed(rows: readonly PartRow[], deltas: readonly LoggedDelta[]): Part[] {
  const parts = rows.map(fromRow)
  const streaming = new Map<string, { index: number; through: number; chunks: string[] }>()
  rows.forEach((row, index) => {
    if (row.through !== null) streaming.set(row.id, { index, through: row.through, chunks: [] })
  })
  for (const d of deltas) {
    const data = JSON.parse(d.data) as Record<string, string>
    const tail = streaming.get(data.partId as string)
    if (tail && d.version > tail.through) tail.chunks.push(data[deltaField(d.type) as string] as string)
  }
  for (const { index, chunks } of streaming.values()) {
    if (chunks.length === 0) continue
    const part = parts[index] as Part
    const field = streamedField(part)
    if (field)
      parts[index] = Object.assign({}, part, {
        [field]: (part as unknown as Record<string, string>)[field] + chunks.join(''),
      }) as Part
  }
  return parts
}

/** The stored form of a part: without the keys its columns hold, deflated when large. */
export function encodePart(sessionId: string, part: Part): string | Buffer {
  const json = partJson(sessionId, part)
  if (json.length < COMPRESS_FROM) return json
  const bytes = Buffer.byteLength(json)
  // the smallest window that holds the row, as for event data (src/events/schema.ts): less for zlib to set up
  const packed = deflateRawSync(json, { windowBits: windowFor(bytes) })
  return packed.length < bytes ? packed : json
}

/** A part's row as JSON: without the keys its columns hold (id and messageId; sessionId too, unless it differs). */
export function partJson(sessionId: string, part: Part): string {
  const { id: _id, sessionId: session, messageId: _message, ...rest } = part
  return JSON.stringify(session === sessionId ? rest : { sessionId: session, ...rest })
}

/** The session version a part's row is current through, while it streams (null once its string is complete). */
export function partThrough(part: Part, version: number): number | null {
  return streamedField(part) && !settled(part) ? version : null
}

export interface PartWriter {
  /**
   * Stores `part` as it is at session version `version` (a streaming part's later deltas are read from the log);
   * `changed`: the version of the event that last changed it, what its session's forks read it by
   * (src/projections/rows/shared-rows.ts; 0: as a fork point had it).
   */
  write(sessionId: string, part: Part, version: number, changed: number): void
}

export function createPartWriter(db: Database.Database): PartWriter {
  const upsert = db.prepare(
    `INSERT INTO parts (session_id, id, message_id, data, through, version) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (session_id, id) DO UPDATE SET message_id = excluded.message_id, data = excluded.data,
       through = excluded.through, version = excluded.version`,
  )
  return {
    write(sessionId, part, version, changed) {
      upsert.run(sessionId, part.id, part.messageId, encodePart(sessionId, part), partThrough(part, version), changed)
    },
  }
}
