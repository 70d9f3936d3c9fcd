import type Database from 'better-sqlite3'
import { deflateRawSync, inflateRawSync } from 'node:zlib'
import type { Part } from './model.js'

/**
 * How parts are stored. A streamed string — a text or reasoning part's
 * `text`, a tool part's `rawInput` — grows by one delta at a time, so it is
 * kept out of the part's JSON row, in fixed-size slices (`part_text`): a
 * flush rewrites only the last slice or two instead of the whole text, and
 * the cost of a delta does not grow with the length of its part. The part
 * row holds the field as '' (keeping the key order) and is rewritten only
 * when something other than the streamed string changes. Once the string is
 * complete (the text ended, the tool's input is in) the part is settled: the
 * string goes back into the row and its slices are deleted.
 *
 * The JSON row leaves out what its columns already say (id, sessionId and
 * messageId, when they equal them), and a row of COMPRESS_FROM bytes or more
 * (a tool's input and output, a settled text) is stored deflated when that
 * is smaller, as a BLOB — the storage
 * class tells the two apart. Rows written by older code (whole JSON) read the
 * same.
 *
 * Readers never see the split: PART_COLUMNS and fromRow put it all back.
 */

const COMPRESS_FROM = 256

/** A new slice holds about this many UTF-16 units (never splitting a surrogate pair). */
export const SLICE = 1024

export type StreamedField = 'text' | 'rawInput'

export function streamedField(part: Part): StreamedField | undefined {
  if (part.type === 'text' || part.type === 'reasoning') return 'text'
  if (part.type === 'tool') return 'rawInput'
  return undefined
}

/** Columns `data, text` of parts: the JSON row and the streamed string reassembled from its slices. */
export const PART_COLUMNS = `p.session_id AS sessionId, p.id AS id, p.message_id AS messageId, p.data AS data, (SELECT group_concat(t.text, '' ORDER BY t.n) FROM part_text t
  WHERE t.session_id = p.session_id AND t.part_id = p.id) AS text`

export interface PartRow {
  readonly sessionId: string
  readonly id: string
  readonly messageId: string
  readonly data: string | Buffer
  readonly text: string | null
}

export function fromRow(row: PartRow): Part {
  const stored = JSON.parse(typeof row.data === 'string' ? row.data : inflateRawSync(row.data).toString()) as Partial<Part>
  // Key order as the projection makes them; a key the row kept (it differed from its column) wins.
  const part = { id: row.id, sessionId: row.sessionId, messageId: row.messageId, ...stored } as Part
  const field = streamedField(part)
  if (field && row.text !== null) (part as unknown as Record<string, string>)[field] = row.text
  return part
}

export interface PartWriter {
  /**
   * Stores `part`. `prior` is the part as stored before (undefined: not
   * stored yet); when only the streamed string grew, only its last slice is
   * rewritten and new ones added.
   */
  write(sessionId: string, part: Part, prior: Part | undefined): void
}

/** The stored form of a part: without the keys its columns hold, deflated when large. */
export function encodePart(sessionId: string, part: Part): string | Buffer {
  // id and messageId are the row's own columns; sessionId too, unless the part says otherwise.
  const { id: _id, sessionId: session, messageId: _message, ...rest } = part
  const json = JSON.stringify(session === sessionId ? rest : { sessionId: session, ...rest })
  if (json.length < COMPRESS_FROM) return json
  const packed = deflateRawSync(json)
  return packed.length < Buffer.byteLength(json) ? packed : json
}

export function createPartWriter(db: Database.Database): PartWriter {
  const stmt = {
    part: db.prepare(
      `INSERT INTO parts (session_id, id, message_id, data) VALUES (?, ?, ?, ?)
       ON CONFLICT (session_id, id) DO UPDATE SET message_id = excluded.message_id, data = excluded.data`,
    ),
    last: db.prepare('SELECT n, start FROM part_text WHERE session_id = ? AND part_id = ? ORDER BY n DESC LIMIT 1'),
    insert: db.prepare('INSERT INTO part_text (session_id, part_id, n, start, text) VALUES (?, ?, ?, ?, ?)'),
    update: db.prepare('UPDATE part_text SET start = ?, text = ? WHERE session_id = ? AND part_id = ? AND n = ?'),
    drop: db.prepare('DELETE FROM part_text WHERE session_id = ? AND part_id = ?'),
  }
  // Where the last slice of each part written through this writer starts, keyed by
  // the very object written: a part loaded from the tables again (after a
  // rollback, a rebuild, another connection) is a new object and looks it up.
  const layouts = new WeakMap<Part, Slice>()

  const slices = (sessionId: string, part: Part, value: string, from: Slice | undefined) => {
    let { n, start } = from ?? { n: 0, start: 0 }
    let existing = from !== undefined
    let last: Slice | undefined = from
    while (start < value.length) {
      let end = Math.min(start + SLICE, value.length)
      const code = value.charCodeAt(end - 1)
      if (end < value.length && code >= 0xd800 && code <= 0xdbff) end--
      const text = value.slice(start, end)
      // A slice the layout says exists but does not (the table was rewritten behind us) is inserted.
      if (!existing || stmt.update.run(start, text, sessionId, part.id, n).changes === 0) stmt.insert.run(sessionId, part.id, n, start, text)
      existing = false
      last = { n, start }
      n++
      start = end
    }
    if (last) layouts.set(part, last)
  }

  return {
    write(sessionId, part, prior) {
      const field = streamedField(part)
      if (!field) {
        stmt.part.run(sessionId, part.id, part.messageId, encodePart(sessionId, part))
        return
      }
      const value = (part as unknown as Record<string, string>)[field] ?? ''
      if (settled(part) || !wellFormed(value)) {
        // A settled part's string grows no more: it goes back into the row (deflated when large) and
        // its slices go. A lone surrogate would not survive SQLite's UTF-8 text: kept in the (escaped) JSON row.
        stmt.part.run(sessionId, part.id, part.messageId, encodePart(sessionId, part))
        stmt.drop.run(sessionId, part.id)
        return
      }
      const before = prior && streamedField(prior) === field && !settled(prior) ? ((prior as unknown as Record<string, string>)[field] ?? '') : undefined
      const sliced = before !== undefined && wellFormed(before)
      if (!sliced || !sameApartFrom(part, prior as Part, field)) {
        stmt.part.run(sessionId, part.id, part.messageId, encodePart(sessionId, { ...part, [field]: '' } as Part))
      }
      // (slice + === : startsWith walks a freshly concatenated string char by char)
      if (sliced && value.length >= before.length && value.slice(0, before.length) === before) {
        const layout = layouts.get(prior as Part) ?? (stmt.last.get(sessionId, part.id) as Slice | undefined)
        if (value.length === before.length) {
          if (layout) layouts.set(part, layout)
          return
        }
        slices(sessionId, part, value, layout)
        return
      }
      if (prior !== undefined) stmt.drop.run(sessionId, part.id)
      slices(sessionId, part, value, undefined)
    },
  }
}

/** A part whose streamed string is complete: a text that ended, a tool whose input is in. */
function settled(part: Part): boolean {
  return part.type === 'tool' ? part.state !== 'pending' : (part.type === 'text' || part.type === 'reasoning') && part.ended
}

interface Slice {
  readonly n: number
  readonly start: number
}

function wellFormed(s: string): boolean {
  return (s as unknown as { isWellFormed(): boolean }).isWellFormed()
}

/** True when the two parts differ at most in `field` (shallow: the projection makes new objects for what it changes). */
function sameApartFrom(a: Part, b: Part, field: StreamedField): boolean {
  const x = a as unknown as Record<string, unknown>
  const y = b as unknown as Record<string, unknown>
  const keys = Object.keys(x)
  if (keys.length !== Object.keys(y).length) return false
  for (const k of keys) if (k !== field && x[k] !== y[k]) return false
  return true
}
