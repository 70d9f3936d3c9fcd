import type Database from 'better-sqlite3'
import { eventHash, logDigest } from './chain.js'
import { decodeStored, storedRows } from './stored-rows.js'

/**
 * Checks the log's hash chains (src/events/chain.ts) from the rows as they
 * are stored — not through the `events` view, so that a row edited into
 * something the view cannot decode is named, not fatal. Every event from the
 * chain's start must carry the hash its stream's chain gives it; versions
 * run 1, 2, 3… per stream and seqs 1, 2, 3… through the log; the stored
 * head must be the last event and its hash. The whole-log digest is
 * computed on the way, and compared with one recorded earlier if given.
 */

export interface ChainBreak {
  readonly seq: number
  readonly sessionId: string
  readonly reason: string
}

export interface ChainReport {
  /** events checked */
  readonly events: number
  /** events logged before the chain began (a database older than schema migration 13): no hash to check */
  readonly unchained: number
  /** each event where a chain breaks, in seq order (the first names the first edit) */
  readonly breaks: ChainBreak[]
  /** the whole log's digest at its last seq: record it elsewhere to pin every event up to that seq */
  readonly head: { readonly seq: number; readonly digest: string }
}

/** A whole-log digest recorded earlier (`chronicle verify` printed it): the log up to `seq` must still give it. */
export interface ChainAnchor {
  readonly seq: number
  readonly digest: string
}

export function checkChain(
  db: Database.Database,
  options: { progress?: (done: number, total: number) => void; anchor?: ChainAnchor } = {},
): ChainReport {
  const { progress, anchor } = options
  const chain = db
    .prepare('SELECT from_seq AS fromSeq, head_seq AS headSeq, head_hash AS headHash FROM log_chain WHERE id = 1')
    .get() as { fromSeq: number; headSeq: number; headHash: Buffer | null } | undefined
  const breaks: ChainBreak[] = []
  const total = (db.prepare('SELECT COUNT(*) FROM event_log').pluck().get() as number) ?? 0
  const rows = storedRows(db)
  const fromSeq = chain?.fromSeq ?? 1
  const streams = new Map<number, { version: number; hash: Buffer | null }>()
  let digest: Buffer = Buffer.alloc(0)
  let expectedSeq = 0
  let lastHash: Buffer | null = null
  let events = 0
  let unchained = 0
  for (const row of rows) {
    events++
    if (events % 5000 === 0) progress?.(events, total)
    const session = row.session_id ?? `stream ${row.stream}`
    const broken = (reason: string) => breaks.push({ seq: row.seq, sessionId: session, reason })
    if (row.seq !== expectedSeq + 1)
      breaks.push({ seq: expectedSeq + 1, sessionId: '', reason: `seqs ${expectedSeq + 1}…${row.seq - 1} are missing` })
    expectedSeq = row.seq
    const last = streams.get(row.stream) ?? { version: 0, hash: null }
    if (row.version !== last.version + 1) broken(`version ${row.version} follows ${last.version} in its session`)
    streams.set(row.stream, { version: row.version, hash: row.hash })
    if (row.seq < fromSeq) {
      unchained++
      continue
    }
    lastHash = row.hash
    if (!row.hash) {
      broken('it carries no hash')
      continue
    }
    const fields = decodeStored(row)
    if (typeof fields === 'string') broken(fields)
    else if (!eventHash(last.hash, fields).equals(row.hash)) broken('its hash does not match the event and its chain')
    digest = logDigest(digest, row.hash)
    if (anchor && row.seq === anchor.seq && digest.toString('hex') !== anchor.digest)
      broken(`the log up to seq ${anchor.seq} no longer gives the digest recorded for it`)
  }
  progress?.(events, total)
  if (chain && chain.headSeq > expectedSeq)
    breaks.push({
      seq: expectedSeq + 1,
      sessionId: '',
      reason: `the log ends at seq ${expectedSeq}, but its head says ${chain.headSeq}: events were removed from the end`,
    })
  else if (chain?.headHash && chain.headSeq === expectedSeq && !chain.headHash.equals(lastHash ?? Buffer.alloc(0)))
    breaks.push({ seq: expectedSeq, sessionId: '', reason: "the last event's hash is not the one the head recorded" })
  if (anchor && anchor.seq > expectedSeq)
    breaks.push({
      seq: expectedSeq + 1,
      sessionId: '',
      reason: `the log ends before seq ${anchor.seq}, which the recorded digest covers`,
    })
  return { events, unchained, breaks, head: { seq: expectedSeq, digest: digest.toString('hex') } }
}
