import type Database from 'better-sqlite3'
import { type ChainedFields, chainedFields } from './chain.js'
import { inflated, withPartId } from './schema.js'

/**
 * The events as SQLite stores them, not through the `events` view: each row
 * with its ids resolved (a name it points at may be missing) and its texts
 * exactly as they were hashed — what the chain check reads, and what a copy
 * to another engine carries over byte for byte.
 */
export interface StoredRow {
  seq: number
  stream: number
  session_id: string | null
  version: number
  type: string | null
  schema_version: number
  data: string | Buffer
  part_id: string | null
  part: number | null
  meta: string | null
  at: number
  hash: Buffer | null
}

/** Every stored event row after `after`, in seq order. */
export function storedRows(db: Database.Database, after = 0): IterableIterator<StoredRow> {
  return db
    .prepare(
      `SELECT l.seq, l.stream, s.session_id, l.version, t.type, l.schema_version, l.data, l.part, p.part_id, m.meta, l.at, l.hash
       FROM event_log l LEFT JOIN streams s ON s.id = l.stream LEFT JOIN event_types t ON t.id = l.type
       LEFT JOIN event_metas m ON m.id = l.meta LEFT JOIN event_parts p ON p.id = l.part WHERE l.seq > ? ORDER BY l.seq`,
    )
    .iterate(after) as IterableIterator<StoredRow>
}

/** The event's fields as they were appended, or why they cannot be read. */
export function decodeStored(row: StoredRow): ChainedFields | string {
  if (row.session_id === null || row.type === null || row.meta === null)
    return 'it names a session, type or meta the log does not hold'
  let data: string
  try {
    data = inflated(row.data)
  } catch {
    return 'its data cannot be decoded'
  }
  if (row.part !== null) {
    if (row.part_id === null) return 'it names a part id the log does not hold'
    data = withPartId(row.part_id, data)
  }
  return chainedFields({
    seq: row.seq,
    session_id: row.session_id,
    version: row.version,
    type: row.type,
    schema_version: row.schema_version,
    data,
    meta: row.meta,
    at: row.at,
  })
}
