import Database from 'better-sqlite3'
import { type ChronicleEvent, CURRENT_SCHEMA_VERSION } from './catalogue.js'
import { deltaField, type EventRow, toEvent, validate } from './rows.js'
import type { EventMeta, StoredEvent } from './envelope.js'
import { checkBelongs, checkExpectedVersion } from './append-rules.js'
import { type CommitListener, CommitListeners } from './commit-listeners.js'
import { BlobStore } from './blobs.js'
import { eventHash } from './chain.js'
import { ChronicleError } from './errors.js'
import { Interned } from './interned.js'
import { deflated, migrate, PART_PREFIX } from './schema.js'
import { Subscription, type SubscriptionFilter, type SubscriptionOptions } from './subscription.js'

// Row decoding lives in rows.ts; re-exported for the readers that query events directly.
export { toEvent, type EventRow } from './rows.js'

/**
 * The event store: one SQLite file, one writer connection, append-only.
 *
 * Every write is one `BEGIN IMMEDIATE` transaction that inserts events and,
 * through the `project` hook, updates the read models — so the read models
 * always equal a fold of the committed log. Subscribers hear of events only
 * after their commit, in seq order.
 */

export type Durability = 'normal' | 'full'

export interface AppendOptions {
  /** the session's version the caller decided on; a mismatch is VERSION_CONFLICT (0 = the session must not exist) */
  readonly expectedVersion?: number
  /** `full` fsyncs the commit: for facts acknowledged to a client */
  readonly durability?: Durability
  readonly meta: EventMeta
  /** the commit time to record instead of now, in ms (an import keeps the original times) */
  readonly at?: number
  /**
   * (append) nothing this appends refers to another session's queued appends
   * — a client's input: under load it then commits with its own session's
   * queued appends only. Otherwise an append commits everything queued before
   * it, so what it names (a sub-agent's call, its parent's) is in the log first.
   */
  readonly alone?: boolean
}

/** Called inside the append transaction with the events just inserted; throwing rolls the append back. */
export type ProjectHook = ((db: Database.Database, events: readonly StoredEvent[]) => void) & {
  /** forget any state cached between appends (the read-model tables were rewritten behind the hook) */
  reset?: () => void
  /** forget what it cached of sessions idle for a while (src/events/bounded-cache.ts) */
  sweep?: () => void
}
export type { CommitListener } from './commit-listeners.js'

/** Hears how one queued append ended (EventStore.submit). */
export interface Settle {
  resolve(events: StoredEvent[]): void
  reject(err: unknown): void
}

export interface StoreOptions {
  readonly project?: ProjectHook
  readonly now?: () => number
}

interface PendingAppend {
  readonly sessionId: string
  /** validated: the store's own list (a merge replaces its last event) */
  readonly events: ChronicleEvent[]
  readonly options: AppendOptions
  /** hears how it ended: the caller's own (append, enqueue, a run's recorder) */
  readonly done: Settle
  /** the loaded round that commits it (enqueue only): appends queued during a round wait for the next */
  readonly round: number | undefined
  /** later appends merged into this one's last event (a delta): each settles with that event */
  merged: Settle[] | undefined
}

/** Every pending append has one shape, all fields set: one hidden class for the code that reads them. */
const pending = (
  sessionId: string,
  events: ChronicleEvent[],
  options: AppendOptions,
  done: Settle,
  round: number | undefined,
): PendingAppend => ({ sessionId, events, options, done, round, merged: undefined })

/**
 * The shortest time between two batched commits under load. A commit costs
 * about the same whether it holds one delta of a session or several (each
 * session it touches costs a few pages of WAL), so once the commits of one
 * interval held MERGE_FROM_QUEUED appends or more from LOADED_SESSIONS sessions
 * or more (many sessions streaming), for
 * LOADED_FOR_MS the queue waits at least this long after each commit: each session's
 * deltas then share commits, frames and, merged, events. Otherwise the queue
 * commits on the next turn, so a lightly loaded server adds no wait to a
 * turn.
 */
const LOADED_COMMIT_INTERVAL_MS = 40
/**
 * ...and longer the more sessions the commits of the last second touched, up to
 * LOADED_MAX_INTERVAL_MS: every session a commit touches costs each of its
 * subscribers a frame and a socket write, so the writes per second grow with
 * the sessions streaming, not with the deltas. Measured (`npm run bench --
 * stream`, S = 200): 100 ms instead of 40 stores 0.27 events per delta instead
 * of 0.53 and spends about a third less CPU per delta, with the same
 * commit → receipt latency; a delta waits at most the interval longer.
 */
const LOADED_MS_PER_SESSION = 0.5
/** A time before every other (a double, as Date.now() is: see the store's fields). */
const NEVER = Number.NEGATIVE_INFINITY
const LOADED_MAX_INTERVAL_MS = 100
const ACTIVE_GENERATION_MS = 500
/** How long an interval's MERGE_FROM_QUEUED appends keep the store loaded (small forced commits in between do not end it). */
const LOADED_FOR_MS = 1000
/**
 * Sessions an interval's commits must touch to count as load: one session's
 * own burst (a turn appends some 60 events within milliseconds) is a user
 * waiting on it, and gains nothing from sharing commits with nobody.
 */
const LOADED_SESSIONS = 8
/**
 * A loaded round commits what was queued when it started in transactions of
 * at most this many appends, one per turn of the event loop. An event's
 * latency is its transaction's time plus its frames': one commit of every
 * streaming session (S = 400: some 700 events, 20–60 ms) held every frame
 * behind the last insert, and the socket writes behind the promise jobs the
 * whole batch set off. Each transaction costs little besides its rows.
 */
const LOADED_CHUNK = 128

/**
 * Deltas merge only into a queue this long, or while the store is loaded: a
 * server keeping up stores every delta as the model sent it; one behind or
 * loaded (many sessions streaming at once) stores what a flush holds of each
 * part as one event.
 */
const MERGE_FROM_QUEUED = 64

/** Event data whose first key is a partId starts so (schema migration 6). */
/** Characters JSON.stringify writes as they are: no quote, backslash, control character or surrogate. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what this must exclude
const PLAIN = /^[^"\\\u0000-\u001f\ud800-\udfff]*$/

/**
 * Past this many remembered stream versions the store forgets them all (they are only a shortcut): above the
 * sessions that stream at once, and no more, so a server that served many sessions holds few of them.
 */
const STREAM_VERSIONS_KEPT = 2048

export { isSystemStream, SYSTEM_STREAM_PREFIX } from './append-rules.js'

/** A stream's last version and that event's hash (null: logged before the chain). */
interface StreamHead {
  readonly version: number
  readonly hash: Buffer | null
}

/**
 * What reads the read models (src/projections): the database, current for a
 * session's appends — see EventStore.reader.
 */
export interface Readable {
  reader(sessionId?: string): Database.Database
}

export class EventStore implements Readable {
  private readonly db: Database.Database
  /** content-addressed text events name by hash (step.started's context) */
  readonly blobs: BlobStore
  private readonly project: ProjectHook | undefined
  private readonly now: () => number
  private readonly listeners = new CommitListeners()
  private readonly locals = new Map<symbol, unknown>()
  private queue: PendingAppend[] = []
  /** each session's last append in `queue`: where its next delta may merge */
  private lastQueued = new Map<string, PendingAppend>()
  /** a timer or immediate will flush: one at a time, whoever else flushes meanwhile */
  private flushScheduled = false
  /** the loaded interval's timer, while the next round waits for it */
  private roundTimer: NodeJS.Timeout | undefined = undefined
  /** sessions whose queued appends someone awaits: they commit on the next turn, not at the interval */
  private hurried = new Set<string>()
  private hurrying = false
  /*
   * The times below start at NEVER, not 0. A field that holds a small integer
   * until its first Date.now() changes the store's hidden class then, and V8
   * throws away every store method it has compiled (traced with --trace-deopt:
   * insertBatch, publish, flushSession and more, at the first loaded round of
   * `npm run bench -- stream`). For the same reason the loaded interval is a
   * whole number of milliseconds.
   */
  /** the loaded round the next enqueued append belongs to, and when the last one started */
  private round = 0
  private roundAt = NEVER
  private flushedAt = NEVER
  /**
   * Appends committed since `windowAt`, counted per LOADED_COMMIT_INTERVAL_MS:
   * the load is a rate, not one commit's size. A store committing every turn
   * never holds MERGE_FROM_QUEUED in one commit, however many sessions stream.
   */
  private windowAt = NEVER
  private windowAppends = 0
  private windowSessions = new Set<string>()
  /** until when the store counts as loaded: a second after an interval's commits held MERGE_FROM_QUEUED appends */
  private loadedUntil = NEVER
  /** the wait between loaded commits, set from the sessions the last interval touched */
  private loadedInterval = LOADED_COMMIT_INTERVAL_MS
  /**
   * The sessions committed in this half-second (and how many in the last):
   * the sessions streaming, which set the loaded interval. Counted per
   * half-second, not per interval: a commit forced between two loaded ones
   * (an input, a command) holds a fraction of them.
   */
  private activeSessions = new Set<string>()
  private activeBefore = 0
  private activeAt = NEVER
  private headSeq: number
  private closed = false
  /** inside commit (its transaction, then its listeners): a read then sees what is committed, and commits nothing */
  private committing = false
  /**
   * Each stream's version as this connection last committed it, so an append
   * need not look it up. Trusted only while no other connection has committed
   * (PRAGMA data_version, read under the write lock). A write around the store
   * on this connection can leave one stale: a failed append that used them
   * forgets them and runs once more, looking versions up.
   */
  private readonly streamVersions = new Map<number, StreamHead>()
  private dataVersion = -1

  private readonly stmt: {
    insert: Database.Statement
    version: Database.Statement
    streamVersion: Database.Statement
    maxSeq: Database.Statement
    setChainHead: Database.Statement
    seqAt: Database.Statement
    sessionOfType: Database.Statement
    sessionFrom: Database.Statement
    sessionBefore: Database.Statement
    filtered: Database.Statement
    allAfter: Database.Statement
    head: Database.Statement
    bySeq: Database.Statement
    dataVersion: Database.Statement
  }
  /** session ids, types and metas as the integers event_log stores (schema migration 5) */
  private readonly interned: { stream: Interned; type: Interned; meta: Interned; part: Interned }
  /** Made once: better-sqlite3 builds several wrapper functions per transaction() call. */
  private readonly write: Database.Transaction<
    (batch: readonly PendingAppend[], at: number, atIso: string) => ReturnType<EventStore['insertBatch']>
  >

  constructor(db: Database.Database, options: StoreOptions = {}) {
    this.db = db
    this.project = options.project
    this.now = options.now ?? Date.now
    migrate(db)
    this.blobs = new BlobStore(db)
    this.stmt = {
      // Rows go to event_log with interned ids; reads use the `events` view, which joins them back.
      insert: db.prepare(
        'INSERT INTO event_log (seq, stream, version, type, schema_version, data, meta, at, part, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      ),
      version: db
        .prepare('SELECT MAX(version) AS v FROM event_log WHERE stream = (SELECT id FROM streams WHERE session_id = ?)')
        .pluck(),
      streamVersion: db.prepare('SELECT version, hash FROM event_log WHERE stream = ? ORDER BY version DESC LIMIT 1'),
      maxSeq: db.prepare('SELECT MAX(seq) FROM event_log').pluck(),
      setChainHead: db.prepare('UPDATE log_chain SET head_seq = ?, head_hash = ? WHERE id = 1'),
      seqAt: db.prepare('SELECT seq FROM events WHERE session_id = ? AND version = ?').pluck(),
      sessionOfType: db.prepare('SELECT * FROM events WHERE session_id = ? AND type = ? ORDER BY seq'),
      // keyset by version: within a session, version order is seq order, and the UNIQUE index seeks straight to it
      sessionFrom: db.prepare(
        'SELECT * FROM events WHERE session_id = ? AND version > ? AND version <= ? ORDER BY version LIMIT ?',
      ),
      sessionBefore: db.prepare(
        'SELECT * FROM events WHERE session_id = ? AND version <= ? ORDER BY version DESC LIMIT ?',
      ),
      filtered: db.prepare(
        'SELECT * FROM events WHERE session_id IN (SELECT value FROM json_each(?)) AND seq > ? ORDER BY seq LIMIT ?',
      ),
      allAfter: db.prepare('SELECT * FROM events WHERE seq > ? ORDER BY seq LIMIT ?'),
      head: db.prepare('SELECT MAX(seq) FROM events').pluck(),
      bySeq: db.prepare('SELECT * FROM events WHERE seq = ?'),
      dataVersion: db.prepare('PRAGMA data_version').pluck(),
    }
    this.interned = {
      stream: new Interned(db, 'streams', 'session_id', 4096),
      type: new Interned(db, 'event_types', 'type', 1024),
      meta: new Interned(db, 'event_metas', 'meta', 1024, 'substr(meta, -10)'), // migration 8
      part: new Interned(db, 'event_parts', 'part_id', 4096),
    }
    this.write = db.transaction((batch: readonly PendingAppend[], at: number, atIso: string) =>
      this.insertBatch(batch, at, atIso),
    )
    this.headSeq = (this.stmt.head.get() as number | null) ?? 0
  }

  /** Opens (or creates) a store file with the pragmas the log relies on. */
  static open(path: string, options: StoreOptions = {}): EventStore {
    const db = new Database(path)
    db.pragma('busy_timeout = 5000') // first: switching to WAL needs a lock another connection may hold
    // Only takes effect on a new file (before WAL writes its header). Every
    // table and index costs at least one page however few rows it holds (the
    // schema has ~25): 2 KiB halves that floor for small sessions, and with
    // large rows deflated it costs long ones ~2% (bench conversation, N=1000).
    db.pragma('page_size = 2048')
    db.pragma('journal_mode = WAL')
    db.pragma('synchronous = NORMAL')
    db.pragma('cache_size = -64000')
    db.pragma('temp_store = MEMORY')
    return new EventStore(db, options)
  }

  /** The highest committed seq. */
  head(): number {
    return this.headSeq
  }

  /** The log's head as the chain records it: its last seq and that event's hash (null: none yet, or logged before the chain). */
  chainHead(): { seq: number; hash: Buffer | null } {
    this.readYourWrites()
    const row = this.db.prepare('SELECT head_seq AS seq, head_hash AS hash FROM log_chain WHERE id = 1').get() as
      | { seq: number; hash: Buffer | null }
      | undefined
    return row ?? { seq: 0, hash: null }
  }

  /** The session's current version (0 when it has no events), with every append made to it so far. */
  version(sessionId: string): number {
    this.readYourWrites(sessionId)
    return this.committedVersion(sessionId)
  }

  private committedVersion(sessionId: string): number {
    return (this.stmt.version.get(sessionId) as number | null) ?? 0
  }

  /**
   * Read-your-writes (docs/ARCHITECTURE.md "Read-your-writes"): the database,
   * with every append made to `sessionId` before this call committed — to any
   * session when none is named. What is queued commits now (the session's
   * own only, under load), so a reader never sees a session without what it
   * appended, awaited or not. src/projections, the store's other half, reads
   * through it; nothing else names the database.
   */
  reader(sessionId?: string): Database.Database {
    this.readYourWrites(sessionId)
    return this.db
  }

  /** What a read of the session (every session, when none is named) needs committed first. */
  private readYourWrites(sessionId?: string): void {
    if (this.committing) return // a listener, or the projection, reads what this commit made
    if (sessionId === undefined) this.flush()
    else this.flushFor(sessionId)
  }

  /**
   * The database as committed, committing nothing: for a reader that hears
   * the rest as it commits (a cached view at a run's start), or for whom
   * what is queued cannot matter. Batching needs such readers: each read
   * that commits a session's queue early cuts its sharing short.
   */
  readonly asCommitted: Readable = { reader: () => this.db }

  /**
   * Appends now, in one transaction (after any queued batch, so per-session
   * order follows call order). Returns the stored events with their seqs.
   */
  append(sessionId: string, events: readonly ChronicleEvent[], options: AppendOptions): StoredEvent[] {
    const validated = validate(events)
    if (validated.length === 0) return []
    this.assertOpen()
    // Behind everything queued and in the same transaction: one commit, not two (a commit's cost is mostly per
    // commit). Under load, one `alone` goes behind its session's own only: the others' wait for the interval.
    let stored: StoredEvent[] = []
    let failure: { err: unknown } | undefined
    const done: Settle = {
      resolve: (events) => {
        stored = events
      },
      reject: (err) => {
        failure = { err }
      },
    }
    this.queue.push(pending(sessionId, validated, options, done, undefined))
    if (options.alone && this.loaded()) this.flushSession(sessionId)
    else this.flush()
    if (failure) throw failure.err
    return stored
  }

  /**
   * Batching appender: queues the events; everything queued until the next
   * flush (the next turn; under load, the loaded interval after the
   * last) commits in one transaction. Resolves once committed (and, for `full`, fsynced).
   * Validation errors reject before anything is queued.
   *
   * Under load (a queue of MERGE_FROM_QUEUED, or the loaded regime), a delta queued right behind a delta of
   * the same part, from the same actor, is stored as one event with both
   * texts (docs/EVENTS.md "Deltas"): what a flush holds of one streaming
   * part is one event, so a server under load writes, hashes and sends
   * fewer, larger deltas instead of falling further behind. Both calls
   * resolve with that event.
   */
  enqueue(sessionId: string, events: readonly ChronicleEvent[], options: AppendOptions): Promise<StoredEvent[]> {
    // what submit throws rejects this promise
    return new Promise((resolve, reject) => {
      if (!this.queueAppend(sessionId, events, options, { resolve, reject }, true)) resolve([])
      else this.hurry(sessionId)
    })
  }

  /**
   * Someone waits on the session's queued appends (an enqueue's promise):
   * while the store is loaded they commit on the next turn, with those of
   * every other session hurried in this turn, instead of waiting out the
   * interval; the other sessions' keep it. The interval is for appends nobody
   * waits on — streamed deltas — which then share commits; one a caller
   * awaits would otherwise wait it out, and producers that await each append
   * would commit once an interval (bench store: 1,263 events/s). Taking every
   * session's with them would cut the streaming sessions' sharing short.
   */
  private hurry(sessionId: string): void {
    if (this.roundTimer === undefined) return // not waiting on an interval: the next turn commits it anyway
    this.hurried.add(sessionId)
    if (this.hurrying) return
    this.hurrying = true
    setImmediate(this.flushHurried)
  }

  private readonly flushHurried = (): void => {
    this.hurrying = false
    const sessions = this.hurried
    this.hurried = new Set()
    if (this.closed) return
    const batch: PendingAppend[] = []
    const rest: PendingAppend[] = []
    for (const item of this.queue) (sessions.has(item.sessionId) ? batch : rest).push(item)
    if (batch.length === 0) return
    this.queue = rest
    for (const sessionId of sessions) this.lastQueued.delete(sessionId)
    this.commitQueued(batch)
  }

  /**
   * `enqueue` without a promise of its own: queues the events and returns
   * true, and `done` hears once, when they commit or fail; returns false for
   * no events, and throws for invalid ones or a closed store, as `append`
   * does. A run's recorder hands every append the same `done`, so a streamed
   * delta costs no promise and no closure.
   */
  submit(sessionId: string, events: readonly ChronicleEvent[], options: AppendOptions, done: Settle): boolean {
    return this.queueAppend(sessionId, events, options, done, false)
  }

  /** `awaited`: an enqueue, whose caller waits on it: it commits on the next turn, as it came (no merge). */
  private queueAppend(
    sessionId: string,
    events: readonly ChronicleEvent[],
    options: AppendOptions,
    done: Settle,
    awaited: boolean,
  ): boolean {
    const validated = validate(events)
    if (validated.length === 0) return false
    this.assertOpen()
    const last = this.lastQueued.get(sessionId)
    // a long queue is a server behind; a loaded one waits for the interval anyway
    if (
      !awaited &&
      last &&
      (this.queue.length >= MERGE_FROM_QUEUED || this.loaded()) &&
      mergeDelta(last, validated, options)
    ) {
      last.merged ??= []
      last.merged.push(done)
      return true
    }
    const item = pending(sessionId, validated, options, done, this.round)
    this.queue.push(item)
    this.lastQueued.set(sessionId, item)
    if (!this.flushScheduled) this.scheduleFlush()
    return true
  }

  /** The next turn, or under load the loaded interval after the last round started. */
  private scheduleFlush(): void {
    this.flushScheduled = true
    const now = Date.now()
    const wait = now < this.loadedUntil ? this.roundAt + this.loadedInterval - now : 0
    if (wait > 0) this.roundTimer = setTimeout(this.startRound, wait)
    else setImmediate(this.startRound)
  }

  private readonly startRound = (): void => {
    this.roundTimer = undefined
    this.roundAt = Date.now()
    if (!this.loaded()) {
      this.flushScheduled = false
      this.flush()
      return
    }
    this.flushRound(this.round++)
  }

  /**
   * Commits the round's first LOADED_CHUNK queued appends (a prefix of the
   * queue, so what was appended first commits first), and the rest of the
   * round on the next turn.
   */
  private flushRound(round: number): void {
    if (this.closed) return
    let n = 0
    while (n < this.queue.length && n < LOADED_CHUNK && (this.queue[n]?.round ?? round) <= round) n++
    if (n > 0) {
      const batch = this.queue.splice(0, n)
      for (const item of batch) if (this.lastQueued.get(item.sessionId) === item) this.lastQueued.delete(item.sessionId)
      this.commitQueued(batch)
    }
    const next = this.queue[0]
    if (next && (next.round ?? round) <= round) setImmediate(() => this.flushRound(round))
    else if (next) this.scheduleFlush()
    else this.flushScheduled = false
  }

  /**
   * Someone waits on the session's queued appends (a run settling what it
   * recorded): under load they commit now, alone, rather than at the loaded
   * interval; otherwise the next turn commits them anyway.
   */
  awaited(sessionId: string): void {
    if (this.loaded()) this.flushFor(sessionId)
  }

  /**
   * Commits the session's queued appends, if it has any: what a reader of that
   * session's state needs. Under load only those (flushSession); otherwise
   * everything queued, as the next turn would.
   */
  private flushFor(sessionId: string): void {
    if (!this.lastQueued.has(sessionId)) return
    if (this.loaded()) this.flushSession(sessionId)
    else this.flush()
  }

  /** Commits everything queued. */
  private flush(): void {
    if (this.queue.length === 0) return
    const batch = this.queue
    this.queue = []
    this.lastQueued = new Map()
    this.commitQueued(batch)
  }

  /**
   * Under load, an append that must commit now and refers to no other session
   * (`alone`: an accepted input), or a reader of one session (flushFor), takes
   * only that session's queued appends with it; the other
   * sessions' wait for the loaded interval. Taking them all made each input
   * cost a commit, an fsync and frames for every session streaming, so a
   * burst of inputs cut every session's merges short and slowed itself down
   * (`npm run bench -- stream`: runs that should start within a second
   * started over ten). Their seqs follow this commit's; each session's own
   * order is kept.
   */
  private flushSession(sessionId: string): void {
    const batch: PendingAppend[] = []
    const rest: PendingAppend[] = []
    for (const item of this.queue) (item.sessionId === sessionId ? batch : rest).push(item)
    if (batch.length === 0) return
    this.queue = rest
    this.lastQueued.delete(sessionId)
    this.commitQueued(batch)
  }

  /** the last flush fell in the loaded regime: the queue waits for the loaded interval */
  loaded(): boolean {
    return this.flushedAt < this.loadedUntil
  }

  private commitQueued(batch: PendingAppend[]): void {
    this.assertOpen()
    this.flushedAt = Date.now()
    if (this.flushedAt - this.windowAt >= LOADED_COMMIT_INTERVAL_MS) {
      this.windowAt = this.flushedAt
      this.windowAppends = 0
      this.windowSessions.clear()
    }
    this.windowAppends += batch.length
    if (this.flushedAt - this.activeAt >= ACTIVE_GENERATION_MS) {
      this.activeBefore = this.activeSessions.size
      this.activeSessions.clear()
      this.activeAt = this.flushedAt
    }
    for (const item of batch) {
      this.windowSessions.add(item.sessionId)
      this.activeSessions.add(item.sessionId)
    }
    if (this.windowAppends >= MERGE_FROM_QUEUED && this.windowSessions.size >= LOADED_SESSIONS) {
      this.loadedUntil = this.flushedAt + LOADED_FOR_MS
      const streaming = Math.max(this.activeBefore, this.activeSessions.size)
      this.loadedInterval = Math.min(
        LOADED_MAX_INTERVAL_MS,
        Math.max(LOADED_COMMIT_INTERVAL_MS, Math.round(streaming * LOADED_MS_PER_SESSION)), // whole ms: see the fields
      )
    }
    let committed: StoredEvent[][]
    try {
      committed = this.commit(batch)
    } catch {
      // One bad append must not sink the others: retry each alone.
      for (const item of batch) {
        try {
          const [stored] = this.commit([item])
          settled(item, stored ?? [])
        } catch (err) {
          failed(item, err)
        }
      }
      return
    }
    batch.forEach((item, i) => {
      settled(item, committed[i] ?? [])
    })
  }

  private commit(batch: readonly PendingAppend[]): StoredEvent[][] {
    const full = batch.some((b) => b.options.durability === 'full')
    const at = this.now()
    const atIso = new Date(at).toISOString()
    // The level cannot change inside a transaction; an append nested in a caller's
    // transaction is made durable by that transaction's own commit.
    const nested = this.db.inTransaction
    const sync = full && !nested
    if (sync) this.db.pragma('synchronous = FULL')
    let result: ReturnType<EventStore['insertBatch']>
    const trusted = this.streamVersions.size > 0
    const outer = this.committing
    this.committing = true
    try {
      result = this.write.immediate(batch, at, atIso)
    } catch (err) {
      this.settleInterned(false)
      this.streamVersions.clear()
      // A remembered version may be stale (a write around the store on this connection): once more, looked up.
      if (trusted) return this.commit(batch)
      throw err
    } finally {
      if (sync) this.db.pragma('synchronous = NORMAL')
      this.committing = outer
    }
    // Inside a caller's transaction the ids are not committed yet: that caller may still roll back.
    this.settleInterned(!nested)
    if (nested || this.streamVersions.size > STREAM_VERSIONS_KEPT) this.streamVersions.clear()
    else for (const [stream, head] of result.versions) this.streamVersions.set(stream, head)
    const last = result.all[result.all.length - 1]
    if (last) this.headSeq = last.seq
    this.committing = true
    try {
      this.publish(result.all)
    } finally {
      this.committing = outer
    }
    return result.out
  }

  /**
   * The event's data as stored: a leading plain partId becomes an interned id
   * (schema migration 6), and the rest, from DEFLATE_FROM characters, is
   * stored deflated as a BLOB when that is smaller (migration 7).
   */
  private encode(json: string, e: ChronicleEvent): [data: string | Buffer, part: number | null] {
    const partId = (e.data as { partId?: unknown }).partId
    // Only an id JSON writes as-is (no escapes), so the view's plain concatenation restores it exactly;
    // and only when it is the first key: the JSON then starts {"partId":"<id>".
    if (typeof partId !== 'string' || !PLAIN.test(partId) || !json.startsWith(PART_PREFIX))
      return [deflated(json), null]
    return [deflated(json.slice(PART_PREFIX.length + partId.length + 1)), this.interned.part.id(partId)]
  }

  private settleInterned(committed: boolean): void {
    for (const table of Object.values(this.interned)) {
      if (committed) table.commit()
      else table.rollback()
    }
  }

  /** The body of one append transaction: version checks, inserts, then the projection. */
  private insertBatch(batch: readonly PendingAppend[], at: number, atIso: string) {
    const dataVersion = this.stmt.dataVersion.get() as number
    if (dataVersion !== this.dataVersion) {
      this.streamVersions.clear()
      this.dataVersion = dataVersion
    }
    // Seqs are given, not left to SQLite: each event's hash covers its own (src/events/chain.ts).
    let seq = (this.stmt.maxSeq.get() as number | null) ?? 0
    let head: Buffer | null = null
    const versions = new Map<number, StreamHead>()
    const out: StoredEvent[][] = []
    const all: StoredEvent[] = []
    for (const { sessionId, events, options } of batch) {
      const stream = this.interned.stream.id(sessionId)
      const last = versions.get(stream) ??
        this.streamVersions.get(stream) ??
        (this.stmt.streamVersion.get(stream) as StreamHead | undefined) ?? { version: 0, hash: null }
      let version = last.version
      let previous = last.hash
      checkExpectedVersion(sessionId, version, options.expectedVersion)
      const stored: StoredEvent[] = []
      const metaJson = JSON.stringify(options.meta)
      const meta = this.interned.meta.id(metaJson)
      const itemAt = options.at ?? at
      const itemAtIso = options.at === undefined ? atIso : new Date(options.at).toISOString()
      for (const e of events) {
        version++
        checkBelongs(sessionId, version, e.type)
        const json = JSON.stringify(e.data)
        const [data, part] = this.encode(json, e)
        seq++
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
        head = hash
        this.stmt.insert.run(
          seq,
          stream,
          version,
          this.interned.type.id(e.type),
          CURRENT_SCHEMA_VERSION,
          data,
          meta,
          itemAt,
          part,
          hash,
        )
        stored.push({
          seq,
          sessionId,
          version,
          type: e.type,
          schemaVersion: CURRENT_SCHEMA_VERSION,
          data: e.data,
          meta: options.meta,
          at: itemAtIso,
        } as StoredEvent)
      }
      versions.set(stream, { version, hash: previous })
      out.push(stored)
      all.push(...stored)
    }
    if (head) this.stmt.setChainHead.run(seq, head)
    this.project?.(this.db, all)
    return { out, all, versions }
  }

  private publish(events: readonly StoredEvent[]): void {
    this.listeners.publish(events)
  }

  /** Tells the projection that its tables were rewritten (rebuild): it must not trust what it cached. */
  resetProjection(): void {
    this.project?.reset?.()
  }

  /** Lets the projection forget what it cached of idle sessions (the runtime calls it while the server is quiet). */
  sweep(): void {
    this.project?.sweep?.()
  }

  /** Hears of every commit, after it is durable, in seq order. Returns the unsubscribe function. */
  onCommit(listener: CommitListener): () => void {
    return this.listeners.add(listener)
  }

  /*
   * Reads of one session see every append made to it before the read
   * (readYourWrites). Reads by seq — readAll, readFiltered, get, head — see
   * what is committed: a queued append has no seq yet, and a subscription
   * hears it when it commits.
   */

  /** One session's own events with after < seq <= upTo, in order, at most `limit`. */
  readSession(sessionId: string, opts: { after?: number; upTo?: number; limit?: number } = {}): StoredEvent[] {
    this.readYourWrites(sessionId)
    return this.committedSession(sessionId, opts)
  }

  private committedSession(
    sessionId: string,
    opts: { after?: number; upTo?: number; limit?: number } = {},
  ): StoredEvent[] {
    const after = opts.after ?? 0
    const from = after > 0 ? this.committedVersionAt(sessionId, after) : 0
    const to = opts.upTo === undefined ? Number.MAX_SAFE_INTEGER : this.committedVersionAt(sessionId, opts.upTo)
    return (this.stmt.sessionFrom.all(sessionId, from, to, opts.limit ?? -1) as EventRow[]).map(toEvent)
  }

  /** One session's own events with seq < before, newest first, at most `limit`. */
  readSessionBackward(sessionId: string, before: number, limit: number): StoredEvent[] {
    this.readYourWrites(sessionId)
    return (
      this.stmt.sessionBefore.all(sessionId, this.committedVersionAt(sessionId, before - 1), limit) as EventRow[]
    ).map(toEvent)
  }

  /**
   * The session's version as of a global seq: its last event with seq <= `seq`
   * (0 if none). Versions and seqs grow together within a session, so this is
   * a binary search of point lookups on the (session, version) index — paging
   * by seq deep into a long session costs O(log n), not a scan from its start.
   */
  versionAt(sessionId: string, seq: number): number {
    this.readYourWrites(sessionId)
    return this.committedVersionAt(sessionId, seq)
  }

  private committedVersionAt(sessionId: string, seq: number): number {
    let lo = 0
    let hi = this.committedVersion(sessionId)
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2)
      if ((this.stmt.seqAt.get(sessionId, mid) as number) <= seq) lo = mid
      else hi = mid - 1
    }
    return lo
  }

  /** Iterates one session's events in keyset pages, never holding more than a page. */
  *iterateSession(
    sessionId: string,
    opts: { after?: number; upTo?: number; pageSize?: number } = {},
  ): Generator<StoredEvent> {
    this.readYourWrites(sessionId)
    const pageSize = opts.pageSize ?? 1000
    const to = opts.upTo === undefined ? Number.MAX_SAFE_INTEGER : this.committedVersionAt(sessionId, opts.upTo)
    let from = opts.after ? this.committedVersionAt(sessionId, opts.after) : 0
    for (;;) {
      const page = (this.stmt.sessionFrom.all(sessionId, from, to, pageSize) as EventRow[]).map(toEvent)
      yield* page
      if (page.length < pageSize) return
      from = (page[page.length - 1] as StoredEvent).version
    }
  }

  /** The seq of a session's own event at `version`, or undefined. */
  seqOfVersion(sessionId: string, version: number): number | undefined {
    this.readYourWrites(sessionId)
    return (this.stmt.seqAt.get(sessionId, version) as number | undefined) ?? undefined
  }

  /** One session's own events of one type, in order (e.g. its model steps, for an audit). */
  readSessionOfType(sessionId: string, type: string): StoredEvent[] {
    this.readYourWrites(sessionId)
    return (this.stmt.sessionOfType.all(sessionId, type) as EventRow[]).map(toEvent)
  }

  /** All events with seq > after, in seq order, at most `limit`. */
  readAll(after: number, limit = 1000): StoredEvent[] {
    return (this.stmt.allAfter.all(after, limit) as EventRow[]).map(toEvent)
  }

  /** All events after `after`, in keyset pages. */
  *iterateAll(after = 0, pageSize = 2000): Generator<StoredEvent> {
    let cursor = after
    for (;;) {
      const page = this.readAll(cursor, pageSize)
      yield* page
      if (page.length < pageSize) return
      cursor = (page[page.length - 1] as StoredEvent).seq
    }
  }

  /** Events of several sessions (or all) after a seq, for subscriptions. */
  readFiltered(sessions: readonly string[] | '*', after: number, limit: number): StoredEvent[] {
    if (sessions === '*') return this.readAll(after, limit)
    if (sessions.length === 1) return this.committedSession(sessions[0] as string, { after, limit })
    return (this.stmt.filtered.all(JSON.stringify(sessions), after, limit) as EventRow[]).map(toEvent)
  }

  /** The event at a seq, or undefined. */
  get(seq: number): StoredEvent | undefined {
    const row = this.stmt.bySeq.get(seq) as EventRow | undefined
    return row && toEvent(row)
  }

  /**
   * Stored events matching `filter` with seq > after, then live ones, each
   * exactly once and in seq order, with bounded memory (see Subscription).
   */
  subscribe(filter: SubscriptionFilter, after: number, options: SubscriptionOptions = {}): Subscription {
    return new Subscription(this, filter, after, options)
  }

  /**
   * State a module built on this store keeps for the store's lifetime (its
   * defaults, a cache), under a key of its own: owned by the store, gone with it.
   */
  local<T>(key: symbol, make: () => T): T {
    if (!this.locals.has(key)) this.locals.set(key, make())
    return this.locals.get(key) as T
  }

  /** closed: nothing more appends or reads */
  get isClosed(): boolean {
    return this.closed
  }

  close(): void {
    if (this.closed) return
    this.flush()
    this.closed = true
    this.db.close()
  }

  private assertOpen(): void {
    if (this.closed) throw closedError()
  }
}

function closedError(): ChronicleError {
  return new ChronicleError('INTERNAL', 'the event store is closed')
}

function settled(item: PendingAppend, stored: StoredEvent[]): void {
  item.done.resolve(stored)
  if (item.merged) {
    const last = stored.slice(-1) // a merged delta's event: the item's last
    for (const m of item.merged) m.resolve(last)
  }
}

function failed(item: PendingAppend, err: unknown): void {
  item.done.reject(err)
  for (const m of item.merged ?? []) m.reject(err)
}

/** Merges a lone delta into the queued append's last event when both are deltas of one part; true if it did. */
function mergeDelta(queued: PendingAppend, events: readonly ChronicleEvent[], options: AppendOptions): boolean {
  const next = events[0]
  const field = events.length === 1 && next ? deltaField(next.type) : undefined
  const last = queued.events[queued.events.length - 1]
  if (field === undefined || last?.type !== next?.type || !plainAppend(options) || !plainAppend(queued.options))
    return false
  const into = last?.data as Record<string, string>
  const from = next?.data as Record<string, string>
  if (into.partId !== from.partId || !sameMeta(queued.options.meta, options.meta)) return false
  // a new event, not the queued one changed: its data keeps one hidden class, written once
  const merged = { type: last?.type, data: { partId: into.partId, [field]: (into[field] as string) + from[field] } }
  queued.events[queued.events.length - 1] = merged as ChronicleEvent
  return true
}

/** No version check, no fsync, no given time: an append another may join. */
const plainAppend = (o: AppendOptions) =>
  o.expectedVersion === undefined && o.durability !== 'full' && o.at === undefined

function sameMeta(a: EventMeta, b: EventMeta): boolean {
  if (a === b) return true
  const keys = Object.keys(a)
  return keys.length === Object.keys(b).length && keys.every((k) => a[k as keyof EventMeta] === b[k as keyof EventMeta])
}
