import type Database from 'better-sqlite3'
import { eventHash, logDigest } from './chain.js'
import { decodeStored, type StoredRow, storedRows } from './stored-rows.js'

/**
 * Checks the log's hash chains (src/events/chain.ts) from the rows as they
 * are stored — not through the `events` view, so that a row edited into
 * something the view cannot decode is named, not fatal. Every event from the
 * chain's start must carry the hash its stream's chain gives it; versions
 * run 1, 2, 3… per stream and seqs 1, 2, 3… through the log; the stored
 * head must be the last event and its hash. The whole-log digest is
 * computed on the way, and compared with one recorded earlier if given.
 *
 * `checkChain` walks the whole log (verify); `checkChainTail` its last
 * events only (the start-up check: docs/BACKUP.md "Damaged files").
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

export interface ChainCheckOptions {
  readonly progress?: (done: number, total: number) => void
  readonly anchor?: ChainAnchor
}

export function checkChain(db: Database.Database, options: ChainCheckOptions = {}): ChainReport {
  const walk = new ChainWalk(db, options)
  for (const row of storedRows(db)) walk.step(row)
  return walk.finish()
}

/**
 * The chain's last `count` events: each one's hash against its stream's
 * previous event (read from the log, before the segment too), the seqs
 * gapless, and the stored head the last event and its hash. Cheap at any
 * length of the log; an edit further back is `chronicle verify`'s to find.
 * Its digest covers the segment only (it is not the whole log's).
 */
export function checkChainTail(db: Database.Database, count: number): ChainReport {
  const last = (db.prepare('SELECT MAX(seq) FROM event_log').pluck().get() as number | null) ?? 0
  const after = Math.max(0, last - count)
  const walk = new ChainWalk(db, {}, after)
  const previous = db.prepare('SELECT version, hash FROM event_log WHERE stream = ? AND version = ?')
  for (const row of storedRows(db, after)) {
    if (!walk.knows(row.stream) && row.version > 1) {
      const before = previous.get(row.stream, row.version - 1) as { version: number; hash: Buffer | null } | undefined
      if (before) walk.seed(row.stream, before)
    }
    walk.step(row)
  }
  return walk.finish()
}

/** One pass over stored rows in seq order, from just after `after`. */
class ChainWalk {
  private readonly chain: { fromSeq: number; headSeq: number; headHash: Buffer | null } | undefined
  private readonly total: number
  private readonly breaks: ChainBreak[] = []
  private readonly streams = new Map<number, { version: number; hash: Buffer | null }>()
  private digest: Buffer = Buffer.alloc(0)
  private expectedSeq: number
  private lastHash: Buffer | null = null
  private events = 0
  private unchained = 0

  constructor(
    db: Database.Database,
    private readonly options: ChainCheckOptions,
    after = 0,
  ) {
    this.chain = db
      .prepare('SELECT from_seq AS fromSeq, head_seq AS headSeq, head_hash AS headHash FROM log_chain WHERE id = 1')
      .get() as { fromSeq: number; headSeq: number; headHash: Buffer | null } | undefined
    this.total = (db.prepare('SELECT COUNT(*) FROM event_log WHERE seq > ?').pluck().get(after) as number) ?? 0
    this.expectedSeq = after
  }

  knows(stream: number): boolean {
    return this.streams.has(stream)
  }

  /** a stream's event before the walk began */
  seed(stream: number, head: { version: number; hash: Buffer | null }): void {
    this.streams.set(stream, head)
  }

  step(row: StoredRow): void {
    this.events++
    if (this.events % 5000 === 0) this.options.progress?.(this.events, this.total)
    const session = row.session_id ?? `stream ${row.stream}`
    const broken = (reason: string) => this.breaks.push({ seq: row.seq, sessionId: session, reason })
    if (row.seq !== this.expectedSeq + 1)
      this.breaks.push({
        seq: this.expectedSeq + 1,
        sessionId: '',
        reason: `seqs ${this.expectedSeq + 1}…${row.seq - 1} are missing`,
      })
    this.expectedSeq = row.seq
    const last = this.streams.get(row.stream) ?? { version: 0, hash: null }
    if (row.version !== last.version + 1) broken(`version ${row.version} follows ${last.version} in its session`)
    this.streams.set(row.stream, { version: row.version, hash: row.hash })
    if (row.seq < (this.chain?.fromSeq ?? 1)) {
      this.unchained++
      return
    }
    this.lastHash = row.hash
    if (!row.hash) {
      broken('it carries no hash')
      return
    }
    const fields = decodeStored(row)
    if (typeof fields === 'string') broken(fields)
    else if (!eventHash(last.hash, fields).equals(row.hash)) broken('its hash does not match the event and its chain')
    this.digest = logDigest(this.digest, row.hash)
    const { anchor } = this.options
    if (anchor && row.seq === anchor.seq && this.digest.toString('hex') !== anchor.digest)
      broken(`the log up to seq ${anchor.seq} no longer gives the digest recorded for it`)
  }

  finish(): ChainReport {
    const { chain, breaks, expectedSeq } = this
    const { anchor } = this.options
    this.options.progress?.(this.events, this.total)
    if (chain && chain.headSeq > expectedSeq)
      breaks.push({
        seq: expectedSeq + 1,
        sessionId: '',
        reason: `the log ends at seq ${expectedSeq}, but its head says ${chain.headSeq}: events were removed from the end`,
      })
    else if (
      chain?.headHash &&
      chain.headSeq === expectedSeq &&
      !chain.headHash.equals(this.lastHash ?? Buffer.alloc(0))
    )
      breaks.push({ seq: expectedSeq, sessionId: '', reason: "the last event's hash is not the one the head recorded" })
    if (anchor && anchor.seq > expectedSeq)
      breaks.push({
        seq: expectedSeq + 1,
        sessionId: '',
        reason: `the log ends before seq ${anchor.seq}, which the recorded digest covers`,
      })
    return {
      events: this.events,
      unchained: this.unchained,
      breaks,
      head: { seq: expectedSeq, digest: this.digest.toString('hex') },
    }
  }
}
