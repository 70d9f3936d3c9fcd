import pg from 'pg'
import { checkBelongs, checkExpectedVersion, SYSTEM_STREAM_PREFIX } from '../append-rules.js'
import { blobHash } from '../blobs.js'
import { type ChronicleEvent, CURRENT_SCHEMA_VERSION } from '../catalogue.js'
import { eventHash } from '../chain.js'
import type { StoredEvent } from '../envelope.js'
import { ChronicleError } from '../errors.js'
import { type Append, type ChainLink, checkNumbered, type EventLog } from '../log.js'
import { type EventRow, toEvent, validate } from '../rows.js'
import { type CommitListener, CommitListeners } from '../commit-listeners.js'
import {
  failJoined,
  type Joinable,
  joinDelta,
  LOADED_SESSIONS,
  MERGE_FROM_QUEUED,
  type Settle,
  settleJoined,
} from '../delta-merge.js'
import type { AppendOptions } from '../store.js'
import { redactUrl } from './url.js'
import { Pipe } from './pipe.js'
import { CommitNotices } from './commit-notices.js'
import { type Fence, type LockedStream, staleEpoch } from './fence.js'
import { copyWith } from '../copy.js'
import { migratePostgres } from './schema.js'

/**
 * The event log on PostgreSQL (docs/ARCHITECTURE.md "The store port"): the
 * same log as SQLite's, for servers that share one database.
 *
 * Appends queue and commit once a turn, every append queued in one
 * transaction (a failing one retried alone, as SQLite's enqueue does); while
 * a transaction is in flight, what queues behind it is the next. Behind one,
 * with many sessions queued (a loaded stream), a lone streamed delta joins its
 * part's queued delta as SQLite's does (src/events/delta-merge.ts). A
 * transaction locks its streams' rows in id order, then takes the `log_head`
 * row's lock to number its events, and checks each expected version — all
 * before it inserts them — so the next transaction gets its numbers only
 * after this one commits: `seq` is gap-free and commit order is seq order, as
 * a reader polling the log sees it. Its ceiling is one commit per WAL flush
 * (docs/ARCHITECTURE.md). The pool's connections are pipelined
 * (src/events/postgres/pipe.ts): a commit is two round trips — the locks and
 * the numbering, then the events, the read models' writes and COMMIT — plus
 * one for each time the projection fetches rows. Every commit waits for its
 * WAL flush, `normal` durability too: with synchronous_commit off, a database
 * crash (not only a power cut, as for SQLite's NORMAL) loses the last commits,
 * which subscribers have already heard — and their seqs are then numbered
 * again for other events, so a client's cursor would name events that are
 * not the ones it saw (found by the crash harness restarting PostgreSQL:
 * docs/RECOVERY.md "The store lost mid-run"). Each event's hash chains it to its
 * stream's last one, exactly as SQLite's (src/events/chain.ts): the same
 * events give the same hashes on either engine.
 *
 * The database lost (docs/ARCHITECTURE.md "PostgreSQL lost while serving"): what cannot commit is
 * STORE_UNAVAILABLE and acknowledged to nobody; the pool connects again by itself. A commit whose answer
 * was lost with its connection may still have committed: until the log has looked, it is `unsure`, and
 * publishes what committed unheard before its next commit or session read.
 */

export interface PostgresLogOptions {
  readonly now?: () => number
  /** connections in the pool for reads (default 8); the commits have one more of their own */
  readonly connections?: number
  /**
   * The read models' projection, run in the append's transaction after its events are written: what it
   * throws rolls the append back (src/projections/postgres/projection.ts). `forget`: a transaction it projected
   * did not commit (its COMMIT, or a statement sent with it, failed): what it cached of those sessions is
   * dropped, or a later append — another node's between — would build on versions that never were.
   */
  readonly project?: ((pipe: Pipe, events: readonly StoredEvent[]) => Promise<void>) & {
    forget?(sessionIds: Iterable<string>): void
  }
  /**
   * On a cluster (docs/CLUSTER.md): the sessions this node owns. Each append then requires its session's
   * stream row to name this node at the epoch it holds (NOT_OWNER otherwise), and records the epoch in meta.
   */
  readonly fence?: Fence
  /**
   * On a cluster: hear the other nodes' commits too (src/events/postgres/commit-notices.ts), published to the
   * listeners in seq order among this node's own, marked `elsewhere`.
   */
  readonly follow?: boolean
  /** how often a follower reads without a notice (default POLL_MS); a spec sets it long, to see a wake lost */
  readonly followPollMs?: number
}

/** A queued append; a lone delta may join it (src/events/delta-merge.ts). */
interface PendingAppend extends Joinable {
  readonly sessionId: string
  /** an appendTogether: committed alone, its appends built once its first seq is known */
  readonly together: ((firstSeq: number) => readonly Append[]) | undefined
}

/** Every pending append has one shape, all fields set: one hidden class for the code that reads them. */
const pending = (
  sessionId: string,
  events: ChronicleEvent[],
  options: AppendOptions,
  done: Settle,
  awaited: boolean,
  together: PendingAppend['together'] = undefined,
): PendingAppend => ({ sessionId, events, options, done, awaited, merged: undefined, together })

/** What an append built inside an appendTogether hears: nothing (the appendTogether's caller hears it all). */
const UNHEARD: Settle = { resolve: () => {}, reject: () => {} }

/** Events a follower reads at once (src/events/postgres/commit-notices.ts): more are read at once after. */
const FOLLOW_BATCH = 1000

/** Blob hashes PostgresEventLog remembers as stored, at most (then it starts again). */
const STORED_BLOBS_KEPT = 10_000

/** A reader that waits for nothing queued: the log as committed (PostgresEventLog.reader). */
export const COMMITTED = Symbol('as committed')

/** int8 (seq, at) as numbers: safe below 2^53, which a log does not reach. */
export const PG_TYPES = {
  getTypeParser(oid: number, format?: string) {
    if (oid === 20) return (value: string) => Number(value)
    return pg.types.getTypeParser(oid, format as 'text')
  },
} as pg.CustomTypesConfig

const COLUMNS = 'seq, session_id, version, type, schema_version, data, meta, at'
/** A follower's read (PostgresEventLog.follow), prepared once a connection. */
const FOLLOW = `SELECT ${COLUMNS} FROM events WHERE seq > $1 ORDER BY seq LIMIT ${FOLLOW_BATCH}`

/**
 * The append's statements, prepared once a connection (named): PostgreSQL parses and plans them once. The
 * streams' rows locked (an upsert, so a new stream's row is made and locked by the same statement) with their
 * heads; the numbering; the events, the streams' heads and the log's head in one statement.
 */
const LOCK_STREAMS = {
  name: 'chronicle_lock_streams',
  text: `INSERT INTO streams (id, version) SELECT unnest($1::text[]), 0
         ON CONFLICT (id) DO UPDATE SET id = EXCLUDED.id RETURNING id, version, hash`,
}
/**
 * On a cluster, the same with each row's owner and epoch (src/events/postgres/fence.ts): a new session's row is
 * made this node's ($2) at epoch 1; `xmax = 0` only on a row this statement inserted (an updated one carries
 * the locking transaction's id).
 */
const LOCK_OWNED_STREAMS = {
  name: 'chronicle_lock_owned_streams',
  text: `INSERT INTO streams (id, version, owner, epoch)
         SELECT x, 0, CASE WHEN starts_with(x, '${SYSTEM_STREAM_PREFIX}') THEN NULL ELSE $2 END, 1
         FROM unnest($1::text[]) AS x
         ON CONFLICT (id) DO UPDATE SET id = EXCLUDED.id
         RETURNING id, version, hash, owner, epoch, (xmax = 0) AS inserted`,
}
const NUMBER = { name: 'chronicle_number', text: 'UPDATE log_head SET seq = seq + $1 WHERE id = 1 RETURNING seq' }
const INSERT_EVENTS = {
  name: 'chronicle_insert_events',
  text: `WITH e AS (
         INSERT INTO events (seq, session_id, version, type, schema_version, data, meta, at, hash)
         SELECT s, i, v, t, ${CURRENT_SCHEMA_VERSION}, d, m, a, h
         FROM unnest($1::bigint[], $2::text[], $3::integer[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::bytea[])
           AS x(s, i, v, t, d, m, a, h)
       ), s AS (
         UPDATE streams SET version = x.v, hash = x.h
         FROM unnest($9::text[], $10::integer[], $11::bytea[]) AS x(i, v, h) WHERE streams.id = x.i
       )
       UPDATE log_head SET hash = $12 WHERE id = 1`,
}

export class PostgresEventLog implements EventLog {
  private queue: PendingAppend[] = []
  /** each session's last append in `queue`: where its next delta may merge */
  private lastQueued = new Map<string, PendingAppend>()
  private scheduled = false
  private draining: Promise<void> | undefined
  /** appends ever queued, and how many of them have committed or failed (in queue order): read-your-writes */
  private queued = 0
  private settledCount = 0
  private lastCommitMs = Number.NaN
  private settledWaiters: { upTo: number; wake: () => void }[] = []
  private readonly listeners = new CommitListeners()
  private closed = false
  /** a commit failed with its connection: it may have committed without being heard */
  private unsure = false
  /** the last seq published, or the head at open: where what committed unheard starts */
  private heard: number
  /**
   * Blobs this log has stored (committed): a blob is never changed or deleted (schema.ts), so putting one again
   * sends nothing — a run puts the same system prompt and tool schemas at every step.
   */
  private readonly storedBlobs = new Set<string>()
  /** on a cluster: what wakes the log to read the other nodes' commits (src/events/postgres/commit-notices.ts) */
  private notices: CommitNotices | undefined
  /**
   * The first seq of this node's commit under way, once numbered, until its events are published: events
   * from it on that a follower reads are this node's own, published by the commit (never as another's).
   */
  private ownFrom: number | undefined
  /** the sessions the commit under way has projected (its projection's cache holds them as if committed) */
  private projected: readonly string[] | undefined
  private following = false
  private followAgain = false

  private constructor(
    private readonly pool: pg.Pool,
    /**
     * The commits' own connection: a commit never waits in `pool`'s queue (first in, first out) behind the
     * reads of a loaded server — 10 ms a commit at the median, 150 at p99, with 400 sessions streaming. The
     * log commits one transaction at a time, so one is all it needs.
     */
    private readonly writer: pg.Pool,
    private readonly now: () => number,
    private readonly project: PostgresLogOptions['project'],
    head: number,
    private readonly fence: Fence | undefined,
  ) {
    this.heard = head
  }

  /** Connects (a clear STORE_UNAVAILABLE naming the server, its password hidden, when it cannot), then migrates. */
  static async open(url: string, options: PostgresLogOptions = {}): Promise<PostgresEventLog> {
    const pool = newPool(url, options.connections ?? 8)
    const writer = newPool(url, 1)
    const end = () => Promise.all([pool.end().catch(() => {}), writer.end().catch(() => {})])
    let client: pg.PoolClient
    try {
      client = await pool.connect()
    } catch (err) {
      await end()
      throw cannotConnect(url, err)
    }
    let head: number
    try {
      await supportedVersion(client, url)
      await migratePostgres(client)
      head = (await client.query<{ seq: number }>('SELECT seq FROM log_head WHERE id = 1')).rows[0]?.seq ?? 0
    } catch (err) {
      client.release()
      await end()
      throw err
    }
    client.release()
    const log = new PostgresEventLog(pool, writer, options.now ?? Date.now, options.project, head, options.fence)
    if (options.follow) log.notices = new CommitNotices(url, () => log.follow(), options.followPollMs)
    return log
  }

  append(sessionId: string, events: readonly ChronicleEvent[], options: AppendOptions): Promise<StoredEvent[]> {
    return this.enqueue(sessionId, events, options)
  }

  /**
   * Runs `work` in one read-only REPEATABLE READ transaction: its statements see one snapshot, so a read of
   * several tables (a session's view) is never torn by a commit between them. Read-your-writes for `sessionId`
   * (every session, if none) unless `committed`.
   */
  async snapshot<T>(
    work: (client: pg.ClientBase) => Promise<T>,
    opts: { sessionId?: string; committed?: boolean } = {},
  ): Promise<T> {
    if (!opts.committed) await this.readYourWrites(opts.sessionId)
    return this.transaction(['BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY'], work)
  }

  /**
   * Runs `work` in one transaction holding the log head's lock, so no append commits meanwhile: for work on
   * the whole store (src/projections/postgres/copy.ts). What it throws rolls it all back.
   */
  async exclusive<T>(work: (client: pg.ClientBase) => Promise<T>): Promise<T> {
    return this.transaction(['BEGIN', 'SELECT seq FROM log_head WHERE id = 1 FOR UPDATE'], work)
  }

  /** `work` on one pooled client inside a transaction opened by `begin`; what it throws rolls it back. */
  private async transaction<T>(begin: readonly string[], work: (client: pg.ClientBase) => Promise<T>): Promise<T> {
    const client = await this.pool.connect().catch((err: unknown) => Promise.reject(unavailable(err)))
    const pipe = new Pipe(client)
    try {
      for (const statement of begin) pipe.send(statement)
      pipe.flushSoon() // with work's first statement, which work sends on the client itself
      const result = await work(client)
      await pipe.commit()
      return result
    } catch (err) {
      const failed = await firstFailure(pipe, err)
      await client.query('ROLLBACK').catch(() => {})
      throw lostServer(failed) ? unavailable(failed) : failed
    } finally {
      client.release()
    }
  }

  /** Queued; its caller waits on it, so it is stored as it came (nothing merges into it or with it). */
  enqueue(sessionId: string, events: readonly ChronicleEvent[], options: AppendOptions): Promise<StoredEvent[]> {
    return new Promise((resolve, reject) => {
      if (!this.queueAppend(sessionId, events, options, { resolve, reject }, true)) resolve([])
    })
  }

  /** Queued; a lone delta nobody awaits may join its part's queued one while the log is behind (`behind`). */
  submit(sessionId: string, events: readonly ChronicleEvent[], options: AppendOptions, done: Settle): boolean {
    return this.queueAppend(sessionId, events, options, done, false)
  }

  private queueAppend(
    sessionId: string,
    events: readonly ChronicleEvent[],
    options: AppendOptions,
    done: Settle,
    awaited: boolean,
  ): boolean {
    if (this.closed) throw new ChronicleError('INTERNAL', 'the event store is closed')
    const validated = validate(events) // INVALID_EVENT throws before anything is queued
    if (validated.length === 0) return false
    const last = this.lastQueued.get(sessionId)
    if (last && this.behind() && joinDelta(last, validated, options, done, awaited)) return true
    const item = pending(sessionId, validated, options, done, awaited)
    this.queue.push(item)
    this.lastQueued.set(sessionId, item)
    this.queued++
    if (!this.scheduled) {
      this.scheduled = true
      setImmediate(() => void this.drain())
    }
    return true
  }

  /**
   * Deltas merge only behind a transaction in flight, into a queue that holds the appends of LOADED_SESSIONS
   * sessions or more (many sessions streaming), or into one MERGE_FROM_QUEUED long whatever it holds (a
   * server behind): what queues then commits in one transaction anyway, once this one has, so a part's
   * deltas in it may as well be one event. A server keeping up, or one session's own burst, stores every
   * delta as the model sent it.
   */
  private behind(): boolean {
    return (
      this.queue.length >= MERGE_FROM_QUEUED || (this.draining !== undefined && this.lastQueued.size >= LOADED_SESSIONS)
    )
  }

  /** Every turn's queue commits at the next turn already: nothing to hurry. */
  awaited(_sessionId: string): void {}

  /** Queued as one item that commits alone, in its turn: what was queued before it commits first. */
  appendTogether(build: (firstSeq: number) => readonly Append[]): Promise<StoredEvent[]> {
    if (this.closed) throw new ChronicleError('INTERNAL', 'the event store is closed')
    return new Promise((resolve, reject) => {
      const options = { meta: { actor: 'system' as const }, durability: 'full' as const }
      this.queue.push(pending('', [], options, { resolve, reject }, true, build))
      // nothing queued later joins an append queued before it: its events would commit ahead of these
      this.lastQueued.clear()
      this.queued++
      if (!this.scheduled) {
        this.scheduled = true
        setImmediate(() => void this.drain())
      }
    })
  }

  /** Commits what is queued, a batch a transaction, one transaction at a time (what queues meanwhile is the next). */
  private drain(): Promise<void> {
    this.scheduled = false
    this.draining ??= (async () => {
      try {
        if (this.unsure) await this.publishUnheard(this.pool)
        while (this.queue.length > 0) {
          if (this.unsure) await this.publishUnheard(this.pool)
          // what is queued, up to an appendTogether, which commits alone
          const together = this.queue.findIndex((q) => q.together)
          const batch = this.queue.splice(0, together < 0 ? this.queue.length : Math.max(together, 1))
          for (const item of batch)
            if (this.lastQueued.get(item.sessionId) === item) this.lastQueued.delete(item.sessionId)
          try {
            await (batch[0]?.together ? this.commitTogether(batch[0]) : this.commitQueued(batch))
          } finally {
            this.settle(batch.length)
          }
        }
      } finally {
        this.draining = undefined
      }
    })()
    return this.draining
  }

  /** `n` more appends committed or failed, in the order they were queued: the readers waiting on them go on. */
  private settle(n: number): void {
    this.settledCount += n
    if (this.settledWaiters.length === 0) return
    const waiting = this.settledWaiters
    this.settledWaiters = waiting.filter((w) => w.upTo > this.settledCount)
    for (const w of waiting) if (w.upTo <= this.settledCount) w.wake()
  }

  private async commitQueued(batch: PendingAppend[]): Promise<void> {
    let stored: StoredEvent[][]
    try {
      stored = await this.commit(batch)
    } catch (err) {
      if (batch.length === 1) return failJoined(batch[0] as PendingAppend, err)
      // One bad append must not sink the others: each alone.
      for (const item of batch) {
        try {
          const [alone] = await this.commit([item])
          settleJoined(item, alone ?? [])
        } catch (e) {
          failJoined(item, e)
        }
      }
      return
    }
    batch.forEach((item, i) => {
      settleJoined(item, stored[i] ?? [])
    })
  }

  /**
   * An appendTogether: its streams' locks, then the log head's, so its seq is known before the appends are
   * built; then the appends inserted and projected as one batch. Its events must take the seqs promised.
   */
  private async commitTogether(item: PendingAppend): Promise<void> {
    const build = item.together as NonNullable<PendingAppend['together']>
    try {
      const [stored] = await this.commit([], async (pipe) => {
        // the streams' rows locked before the head's, in id order, as every append takes them (no deadlock
        // with another server's): their ids are what build gives whatever the seq
        const ids = [...new Set(build(0).map((a) => a.sessionId))].sort()
        const locked = this.lockStreams(pipe, ids)
        const { rows } = await pipe.query<{ seq: number }>('SELECT seq FROM log_head WHERE id = 1 FOR UPDATE')
        // the sessions it creates are this node's: the insert below finds their rows made
        if (this.fence) fencedEpochs(this.fence, (await locked).rows)
        const first = (rows[0]?.seq ?? 0) + 1
        this.ownFrom = first
        const appends = build(first).map(({ sessionId, events, options }) =>
          pending(sessionId, validate(events), options, UNHEARD, true),
        )
        const out = (await this.insert(pipe, appends)).flat()
        checkNumbered(out, first)
        return [out]
      })
      settleJoined(item, stored ?? [])
    } catch (err) {
      failJoined(item, err)
    }
  }

  private async commit(
    batch: readonly PendingAppend[],
    work: (pipe: Pipe) => Promise<StoredEvent[][]> = (pipe) => this.insert(pipe, batch),
  ): Promise<StoredEvent[][]> {
    const client = await this.writer.connect().catch((err: unknown) => {
      throw unavailable(err)
    })
    try {
      // durable whatever the batch asked: what is published must outlive a database crash (above)
      const began = performance.now()
      const pipe = new Pipe(client)
      pipe.send('BEGIN') // with the transaction's first statements
      try {
        const out = await work(pipe)
        await pipe.commit() // behind the events and the read models' writes, in their round trip
        this.lastCommitMs = performance.now() - began
        const events = out.flat()
        // what other nodes committed before it is heard first (on a cluster, or after a commit whose answer was
        // lost): seq is gap-free and commit order is seq order, so all of it has committed
        const first = events[0]?.seq
        if (this.unsure || (this.notices && first !== undefined && first > this.heard + 1))
          await this.publishUnheard(client, first)
        this.notices?.committed() // first: the other nodes' readers need not wait on this node's listeners
        this.publish(events)
        return out
      } catch (err) {
        const failed = await firstFailure(pipe, err)
        await client.query('ROLLBACK').catch(() => {})
        throw acceptedTwice(failed) ?? failed
      }
    } catch (err) {
      // what the projection cached of this transaction's sessions may hold versions that never committed
      if (this.projected) this.project?.forget?.(this.projected)
      if (err instanceof ChronicleError) throw err
      this.unsure = true // its COMMIT may have reached the server: the log looks before it goes on
      throw unavailable(err)
    } finally {
      this.projected = undefined
      client.release()
      this.ownFrom = undefined
      if (this.followAgain) this.follow()
    }
  }

  /**
   * The body of one append transaction: the streams' rows locked with their heads and the events numbered,
   * sent together (one round trip); the checks; then the events, the streams' heads and the log's head in one
   * statement, sent with the projection's writes and COMMIT (the statements above). A check that fails rolls
   * the numbering back with the rest: the numbering lock is then held one round trip longer, on a conflict.
   */
  private async insert(pipe: Pipe, batch: readonly PendingAppend[]): Promise<StoredEvent[][]> {
    const ids = [...new Set(batch.map((b) => b.sessionId))].sort()
    const count = batch.reduce((n, b) => n + b.events.length, 0)
    const locked = this.lockStreams(pipe, ids)
    const numbered = pipe.query<{ seq: number }>(NUMBER, [count])
    const lockedRows = (await locked).rows
    const heads = new Map(lockedRows.map((r) => [r.id, { version: r.version, hash: r.hash }]))
    // the fence before any other check: a deposed owner learns so whatever else its append got wrong
    const epochs = this.fence ? fencedEpochs(this.fence, lockedRows, batch) : undefined
    const versions = new Map<string, number>()
    for (const { sessionId, events, options } of batch) {
      let version = versions.get(sessionId) ?? (heads.get(sessionId)?.version as number)
      checkExpectedVersion(sessionId, version, options.expectedVersion)
      for (const e of events) checkBelongs(sessionId, ++version, e.type)
      versions.set(sessionId, version)
    }
    let seq = ((await numbered).rows[0]?.seq as number) - count
    this.ownFrom = seq + 1
    const at = this.now()
    const atIso = new Date(at).toISOString()
    const rows = { seq: [] as number[], session: [] as string[], version: [] as number[], type: [] as string[] }
    const texts = { data: [] as string[], meta: [] as string[], at: [] as number[], hash: [] as Buffer[] }
    const out: StoredEvent[][] = []
    const last = new Map<string, { version: number; hash: Buffer }>()
    for (const { sessionId, events, options } of batch) {
      const head = last.get(sessionId) ?? heads.get(sessionId)
      let version = head?.version ?? 0
      let previous = head?.hash ?? null
      const epoch = epochs?.get(sessionId)
      const meta = epoch === undefined ? options.meta : copyWith(options.meta, { epoch })
      const metaJson = JSON.stringify(meta)
      const itemAt = options.at ?? at
      const itemAtIso = options.at === undefined ? atIso : new Date(options.at).toISOString()
      const stored: StoredEvent[] = []
      for (const e of events) {
        version++
        seq++
        const json = JSON.stringify(e.data)
        const hash = eventHash(previous, {
          seq,
          sessionId,
          version,
          type: e.type,
          schemaVersion: CURRENT_SCHEMA_VERSION,
          at: itemAt,
          meta: metaJson,
          data: json,
        })
        previous = hash
        rows.seq.push(seq)
        rows.session.push(sessionId)
        rows.version.push(version)
        rows.type.push(e.type)
        texts.data.push(json)
        texts.meta.push(metaJson)
        texts.at.push(itemAt)
        texts.hash.push(hash)
        stored.push({
          seq,
          sessionId,
          version,
          type: e.type,
          schemaVersion: CURRENT_SCHEMA_VERSION,
          data: e.data,
          meta,
          at: itemAtIso,
        } as StoredEvent)
      }
      last.set(sessionId, { version, hash: previous as Buffer })
      out.push(stored)
    }
    const streams = [...last.entries()]
    pipe.send(INSERT_EVENTS, [
      rows.seq,
      rows.session,
      rows.version,
      rows.type,
      texts.data,
      texts.meta,
      texts.at,
      texts.hash,
      streams.map(([id]) => id),
      streams.map(([, h]) => h.version),
      streams.map(([, h]) => h.hash),
      texts.hash.at(-1),
    ])
    this.projected = [...last.keys()]
    await this.project?.(pipe, out.flat())
    return out
  }

  /**
   * The streams' rows locked with their heads; on a cluster with their owners and epochs, a new session's row
   * made this node's (LOCK_OWNED_STREAMS). Sessions in a batch are locked in id order: no deadlock between nodes.
   */
  private lockStreams(pipe: Pipe, ids: readonly string[]) {
    type Row = { id: string; version: number; hash: Buffer | null } & LockedStream
    return this.fence
      ? pipe.query<Row>(LOCK_OWNED_STREAMS, [ids, this.fence.node])
      : pipe.query<Row>(LOCK_STREAMS, [ids])
  }

  private publish(events: readonly StoredEvent[], elsewhere = false): void {
    const last = events[events.length - 1]
    if (last && last.seq > this.heard) this.heard = last.seq
    this.listeners.publish(events, elsewhere)
  }

  /**
   * On a cluster: reads what committed after the last seq heard — the other nodes' commits — and publishes it,
   * while this node commits too: what it reads from the seq this node's own commit was numbered at on is left
   * to that commit, which publishes it as its own once the other nodes' commits before it are published.
   * Commits are numbered in commit order, so what a read returns runs on from the last seq heard, gap-free.
   */
  private follow(): void {
    this.followAgain = false
    if (this.closed) return
    if (this.following) {
      this.followAgain = true
      return
    }
    this.following = true
    this.pool
      .query<EventRow>({ name: 'chronicle_follow', text: FOLLOW, values: [this.heard] })
      .then(
        ({ rows }) => {
          const own = this.ownFrom ?? Number.POSITIVE_INFINITY
          const unheard = rows.filter((r) => r.seq > this.heard && r.seq < own).map(toEvent)
          if (unheard.length > 0) this.publish(unheard, true)
          // more to read, or another node's rows after this node's commit: read again once that is published
          if (rows.length === FOLLOW_BATCH || (rows.at(-1)?.seq ?? 0) >= own) this.followAgain = true
        },
        () => {}, // the database away: the next notice or poll reads again
      )
      .finally(() => {
        this.following = false
        if (this.followAgain && this.ownFrom === undefined) this.follow()
      })
  }

  /**
   * After a commit whose answer was lost: publishes what committed after the last seq heard (below `before`,
   * the seq a commit just made starts at), so listeners — subscriptions, the runtime's caches — miss nothing
   * that committed (another server's commits in that span are heard too). Still unreachable: stays unsure.
   */
  private async publishUnheard(db: Pick<pg.ClientBase, 'query'>, before = Number.MAX_SAFE_INTEGER): Promise<void> {
    try {
      const { rows } = await db.query<EventRow>(
        `SELECT ${COLUMNS} FROM events WHERE seq > $1 AND seq < $2 ORDER BY seq`,
        [this.heard, before],
      )
      this.unsure = false
      const unheard = rows.filter((r) => r.seq > this.heard).map(toEvent)
      if (unheard.length > 0) this.publish(unheard, true)
    } catch {
      // still away: the next commit or read looks again
    }
  }

  onCommit(listener: CommitListener): () => void {
    return this.listeners.add(listener)
  }

  /**
   * Read-your-writes (docs/ARCHITECTURE.md "The store port"): the pool, once every append made to `sessionId`
   * before this call — to any session when none is named — has committed. What the read models
   * (src/projections/postgres/) read through, as SQLite's read through EventStore.reader.
   */
  async reader(sessionId?: string | typeof COMMITTED): Promise<Pick<pg.Pool, 'query'>> {
    if (sessionId !== COMMITTED) await this.readYourWrites(sessionId)
    return this.guarded
  }

  /** The pool as the read models query it: a server gone is STORE_UNAVAILABLE, as for the log's own reads. */
  private readonly guarded: Pick<pg.Pool, 'query'> = {
    query: ((text: string, values?: unknown[]) =>
      this.pool.query(text, values).catch((err: unknown) => {
        throw lostServer(err) ? unavailable(err) : err
      })) as pg.Pool['query'],
  }

  /** Waits out the appends queued, or committing, that a read of the session (of every one, if none) must see. */
  private async readYourWrites(sessionId?: string): Promise<void> {
    if (this.unsure) await this.drain() // what committed unheard is published before anything reads past it
    const mine = (q: PendingAppend) => sessionId === undefined || q.sessionId === sessionId
    if (!this.draining && !this.queue.some(mine)) return
    // Appends commit in the order they were queued: waiting for every one queued so far is enough, and ends
    // however many come after (waiting for an empty queue would not, under load).
    const upTo = this.queued
    if (this.settledCount >= upTo) return
    await new Promise<void>((wake) => this.settledWaiters.push({ upTo, wake }))
  }

  async readSession(
    sessionId: string,
    opts: { after?: number; upTo?: number; limit?: number } = {},
  ): Promise<StoredEvent[]> {
    await this.readYourWrites(sessionId)
    return this.rows(
      `SELECT ${COLUMNS} FROM events WHERE session_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4`,
      [sessionId, opts.after ?? 0, opts.upTo ?? Number.MAX_SAFE_INTEGER, opts.limit ?? null],
    )
  }

  async chainOf(sessionId: string, opts: { after?: number; upTo?: number; limit?: number } = {}): Promise<ChainLink[]> {
    await this.readYourWrites(sessionId)
    const { rows } = await this.query<ChainLink>(
      'SELECT seq, hash FROM events WHERE session_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4',
      [sessionId, opts.after ?? 0, opts.upTo ?? Number.MAX_SAFE_INTEGER, opts.limit ?? null],
    )
    return rows
  }

  /** How long the commit being published took, in ms, its round trips included: read by a commit listener. */
  get commitMs(): number {
    return this.lastCommitMs
  }

  heldAt(sessionId: string): number | undefined {
    return this.fence?.epochOf(sessionId)
  }

  async seqOfVersion(sessionId: string, version: number): Promise<number | undefined> {
    await this.readYourWrites(sessionId)
    const { rows } = await this.query<{ seq: number }>(
      'SELECT seq FROM events WHERE session_id = $1 AND version = $2',
      [sessionId, version],
    )
    return rows[0]?.seq
  }

  async readSessionOfType(sessionId: string, type: string): Promise<StoredEvent[]> {
    await this.readYourWrites(sessionId)
    return this.rows(`SELECT ${COLUMNS} FROM events WHERE session_id = $1 AND type = $2 ORDER BY seq`, [
      sessionId,
      type,
    ])
  }

  async readAll(after: number, limit = 1000): Promise<StoredEvent[]> {
    return this.rows(`SELECT ${COLUMNS} FROM events WHERE seq > $1 ORDER BY seq LIMIT $2`, [after, limit])
  }

  async readFiltered(sessions: readonly string[] | '*', after: number, limit: number): Promise<StoredEvent[]> {
    if (sessions === '*') return this.readAll(after, limit)
    return this.rows(
      `SELECT ${COLUMNS} FROM events WHERE session_id = ANY($1::text[]) AND seq > $2 ORDER BY seq LIMIT $3`,
      [sessions, after, limit],
    )
  }

  async get(seq: number): Promise<StoredEvent | undefined> {
    return (await this.rows(`SELECT ${COLUMNS} FROM events WHERE seq = $1`, [seq]))[0]
  }

  async version(sessionId: string): Promise<number> {
    await this.readYourWrites(sessionId)
    const { rows } = await this.query<{ version: number }>('SELECT version FROM streams WHERE id = $1', [sessionId])
    return rows[0]?.version ?? 0
  }

  settled(sessionId: string): Promise<void> {
    return this.readYourWrites(sessionId)
  }

  async head(): Promise<number> {
    const { rows } = await this.query<{ seq: number }>('SELECT seq FROM log_head WHERE id = 1')
    return rows[0]?.seq ?? 0
  }

  async chainHead(): Promise<{ seq: number; hash: Buffer | null }> {
    const { rows } = await this.query<{ seq: number; hash: Buffer | null }>(
      'SELECT seq, hash FROM log_head WHERE id = 1',
    )
    return rows[0] ?? { seq: 0, hash: null }
  }

  readonly blobs = {
    put: async (content: string): Promise<string> => {
      const hash = blobHash(content)
      if (this.storedBlobs.has(hash)) return hash
      await this.query('INSERT INTO blobs (hash, content) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING', [
        hash,
        content,
      ])
      if (this.storedBlobs.size >= STORED_BLOBS_KEPT) this.storedBlobs.clear()
      this.storedBlobs.add(hash)
      return hash
    },
    get: async (hash: string): Promise<string | undefined> => {
      const { rows } = await this.query<{ content: string }>('SELECT content FROM blobs WHERE hash = $1', [hash])
      return rows[0]?.content
    },
  }

  async close(): Promise<void> {
    if (this.closed) return
    while (this.queue.length > 0 || this.draining) await this.drain()
    this.closed = true
    await this.notices?.close()
    await Promise.all([this.pool.end(), this.writer.end()])
  }

  private async rows(sql: string, params: unknown[]): Promise<StoredEvent[]> {
    return (await this.query<EventRow>(sql, params)).rows.map(toEvent)
  }

  private async query<R extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<pg.QueryResult<R>> {
    try {
      return await this.pool.query<R>(sql, params)
    } catch (err) {
      throw err instanceof ChronicleError ? err : unavailable(err)
    }
  }
}

/**
 * A pool of `max` connections to `url`: pipelined (a transaction's statements that need no answer in between share
 * a round trip: pipe.ts) unless `pipeline` is false; with `timeoutMs`, each query and connect gives up after it.
 */
export function newPool(url: string, max: number, options: { pipeline?: boolean; timeoutMs?: number } = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    types: PG_TYPES,
    pipeline: options.pipeline ?? true,
    ...(options.timeoutMs !== undefined && {
      query_timeout: options.timeoutMs,
      connectionTimeoutMillis: options.timeoutMs,
    }),
  })
  // A connection lost (the server gone) is said by the query that used it (STORE_UNAVAILABLE), not by an
  // 'error' event nobody hears: the pool replaces it on the next checkout.
  pool.on('error', () => {})
  pool.on('connect', (client) => client.on('error', () => {}))
  return pool
}

/** What a failed transaction says: its first statement that failed, else what `work` threw. */
async function firstFailure(pipe: Pipe, err: unknown): Promise<unknown> {
  return (
    (await pipe.settle().then(
      () => undefined,
      (failed: unknown) => failed,
    )) ?? err
  )
}

/**
 * An input accepted by another node a moment before (schema migration 5): a conflict with that write, so its
 * command is decided again and finds it (src/commands/input.ts).
 */
function acceptedTwice(err: unknown): ChronicleError | undefined {
  if (!(err instanceof pg.DatabaseError) || err.code !== '23505' || err.constraint !== 'events_input_once') return
  return new ChronicleError('VERSION_CONFLICT', 'the input was accepted meanwhile by another command')
}

/**
 * Whether `err` says the server could not be reached or went away, rather than refusing the statement: a
 * socket error (ECONNREFUSED, ECONNRESET…), SQLSTATE class 08 (connection exception) or 57P01–57P03 (the
 * server shutting down, crashed, or starting up), or the client's own "Connection terminated".
 */
function lostServer(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code
  if (typeof code === 'string') return /^(E[A-Z]+|08...|57P0[123])$/.test(code)
  return err instanceof Error && !(err instanceof pg.DatabaseError) && /connection|terminated/i.test(err.message)
}

/** A database error that is not the log's own (a lost connection, a server gone): nothing was acknowledged. */
function unavailable(err: unknown): ChronicleError {
  if (err instanceof ChronicleError) return err
  return new ChronicleError(
    'STORE_UNAVAILABLE',
    `the PostgreSQL event store is unavailable: ${err instanceof Error ? err.message : String(err)}`,
  )
}

/**
 * Connects once and reads the server's version, changing nothing: what `chronicle doctor` checks.
 * STORE_UNAVAILABLE when it cannot connect, STORE_UNSUPPORTED when the server is too old (both name the URL,
 * its password hidden); the version otherwise.
 */
export async function probePostgres(url: string, timeoutMs = 5_000): Promise<{ version: string }> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs })
  client.on('error', () => {})
  try {
    await client.connect()
  } catch (err) {
    await client.end().catch(() => {})
    throw cannotConnect(url, err)
  }
  try {
    return { version: await supportedVersion(client, url) }
  } catch (err) {
    throw err instanceof ChronicleError ? err : unavailable(err)
  } finally {
    await client.end().catch(() => {})
  }
}

function cannotConnect(url: string, err: unknown): ChronicleError {
  return new ChronicleError(
    'STORE_UNAVAILABLE',
    `cannot connect to PostgreSQL at ${redactUrl(url)}: ${err instanceof Error ? err.message : String(err)}`,
  )
}

/** The server's version, read on `client`; STORE_UNSUPPORTED when it is older than MIN_SERVER_VERSION. */
async function supportedVersion(client: Pick<pg.ClientBase, 'query'>, url: string): Promise<string> {
  const { rows } = await client.query<{ num: number; version: string }>(
    "SELECT current_setting('server_version_num')::int AS num, current_setting('server_version') AS version",
  )
  const version = rows[0]?.version ?? 'unknown'
  checkServerVersion(rows[0]?.num ?? 0, version, url)
  return version
}

/** The oldest PostgreSQL the store is built and tested on (its schema and statements need 15). */
export const MIN_SERVER_VERSION = 150000

/** Refuses a server older than MIN_SERVER_VERSION (`server_version_num`), naming it and its version. */
export function checkServerVersion(versionNum: number, version: string, url: string): void {
  if (versionNum >= MIN_SERVER_VERSION) return
  throw new ChronicleError(
    'STORE_UNSUPPORTED',
    `PostgreSQL at ${redactUrl(url)} is version ${version}: Chronicle needs PostgreSQL 15 or later`,
  )
}

/**
 * Each fenced session's epoch, its locked row checked against what the fence holds (src/events/postgres/fence.ts):
 * NOT_OWNER for the first that is not this node's at its epoch, before anything is inserted, unless every
 * append to it in `batch` is a client's command (AppendOptions.anyNode); NOT_OWNER too for an append made under
 * an epoch the node no longer holds the session at (AppendOptions.epoch), the session staying held.
 */
function fencedEpochs(
  fence: Fence,
  rows: readonly LockedStream[],
  batch: readonly { sessionId: string; options: AppendOptions }[] = [],
): Map<string, number> {
  // a session any node may append to: every append to it in the batch is a client's command, decided on a version
  const owners = new Set(
    batch.filter((b) => !b.options.anyNode || b.options.expectedVersion === undefined).map((b) => b.sessionId),
  )
  const epochs = new Map<string, number>()
  for (const row of rows) {
    const epoch = fence.check(row, batch.length > 0 && !owners.has(row.id))
    if (epoch !== undefined) epochs.set(row.id, epoch)
  }
  for (const { sessionId, options } of batch) {
    const held = epochs.get(sessionId)
    if (options.epoch !== undefined && held !== undefined && options.epoch !== held)
      throw staleEpoch(sessionId, options.epoch, held)
  }
  return epochs
}
