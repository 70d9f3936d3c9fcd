import { createHash, hash } from 'node:crypto'
import type { EventRow } from './rows.js'

/**
 * The log's hash chains (docs/AUDIT.md "A tamper-evident log"):
 *
 * - each event's `hash` chains it to the previous event of its stream:
 *   sha256(previous hash ‖ the event as stored — seq, session, version, type,
 *   schema version, time, meta and data, byte for byte), cut to 16 bytes;
 * - seqs are global and gapless, so a removed event leaves a gap — except
 *   at the end: the log's head (its last seq and that event's hash) is
 *   stored with every commit;
 * - the whole log's digest chains every event's hash in seq order:
 *   sha256(previous digest ‖ event hash). `chronicle verify` computes and
 *   prints it; recorded elsewhere, it pins every event up to its seq.
 *
 * An edit to any stored event changes its hash, and so breaks its stream's
 * chain at that event unless every later hash of the stream is recomputed —
 * which changes the whole-log digest at every later seq.
 */

export const HASH_BYTES = 16

/** An event as the chain sees it: exactly what is stored. */
export interface ChainedFields {
  readonly seq: number
  readonly sessionId: string
  readonly version: number
  readonly type: string
  readonly schemaVersion: number
  /** epoch milliseconds */
  readonly at: number
  /** the stored JSON texts */
  readonly meta: string
  readonly data: string
}

/** A stored row's chained fields: its columns, texts as stored. */
export function chainedFields(row: EventRow): ChainedFields {
  return {
    seq: row.seq,
    sessionId: row.session_id,
    version: row.version,
    type: row.type,
    schemaVersion: row.schema_version,
    at: row.at,
    meta: row.meta,
    data: row.data,
  }
}

export function eventHash(previous: Buffer | null, e: ChainedFields): Buffer {
  return Buffer.from(chainHex(previous ? previous.toString('hex') : '', e), 'hex')
}

/**
 * eventHash in hex, chained from the previous hash in hex ('' for none): what the store computes for every
 * event, carrying the hex from one event of a stream to the next. The text is hashed in one call, and hex is
 * the one output crypto.hash takes without normalising its name: a Hash object per event, a Buffer output and
 * a JSON array for the fields line each cost more than the sha256 itself (docs/ARCHITECTURE.md "Performance
 * notes"). The fields line is the JSON array [seq, sessionId, version, type, schemaVersion, at] written out:
 * its strings quoted by JSON, which keeps the fields apart whatever a session id holds; meta is JSON (no raw
 * newline); data comes last.
 */
export function chainHex(previousHex: string, e: ChainedFields): string {
  const fields = `[${jsonNumber(e.seq)},${JSON.stringify(e.sessionId)},${jsonNumber(e.version)},${JSON.stringify(e.type)},${jsonNumber(e.schemaVersion)},${jsonNumber(e.at)}]`
  return hash('sha256', `${previousHex}\n${fields}\n${e.meta}\n${e.data}`, 'hex').slice(0, HASH_BYTES * 2)
}

/** A number as JSON.stringify writes it: as String does, except that JSON has no NaN or Infinity. */
const jsonNumber = (n: number): string => (Number.isFinite(n) ? `${n}` : 'null')

/** The whole log's digest after one more event. */
export function logDigest(previous: Buffer, eventHash: Buffer): Buffer {
  return createHash('sha256').update(previous).update(eventHash).digest()
}
