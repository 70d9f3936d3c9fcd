import Database from 'better-sqlite3'
import { type ChronicleEvent, CURRENT_SCHEMA_VERSION } from './catalogue.js'
import { type EventRow, toEvent, validate } from './rows.js'
import type { EventMeta, StoredEvent } from './envelope.js'
import { checkBelongs, checkExpectedVersion } from './append-rules.js'
import { ChronicleError } from './errors.js'
import { type CommitListener, CommitListeners } from './commit-listeners.js'
import { BlobStore } from './blobs.js'
import { copyDatabase, type DatabaseCopy } from './backup.js'
import { closedError, CommitScheduler, type PendingAppend, type Settle } from './commit-scheduler.js'
import { chainHex } from './chain.js'
import type { ChainLink } from './log.js'
import { Interned } from './interned.js'
import { LogInserts } from './log-inserts.js'
import { deflated, metaKey, migrate, PART_PREFIX } from './schema.js'
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
  /**
   * A client's command, decided on the session as read (with `expectedVersion`): on a cluster any node may
   * append it, under the session's current epoch, and the node that runs the session acts on it when it hears
   * it (docs/CLUSTER.md "Commands at any node"). Without it an append is the owner's alone.
   */
  readonly anyNode?: boolean
  /**
   * (cluster) the epoch its writer began under (EventLog.heldAt): refused with NOT_OWNER unless the node holds
   * the session at that epoch still. A run the node let go of when its lease lapsed keeps stopping after the
   * node has claimed the session back at a newer epoch; what it records then must not pass as the new owner's
   * (docs/CLUSTER.md "Ownership and the fence"). Ignored where there is no fence.
   */
  readonly epoch?: number
}

/** Called inside the append transaction with the events just inserted; throwing rolls the append back. */
export type ProjectHook = ((db: Database.Database, events: readonly StoredEvent[]) => void) & {
  /** forget any state cached between appends (the read-model tables were rewritten behind the hook) */
  reset?: () => void
  /** forget what it cached of sessions idle for a while (src/events/bounded-cache.ts) */
  sweep?: () => void
}
export type { CommitListener } from './commit-listeners.js'

export type { Settle } from './commit-scheduler.js'

export interface StoreOptions {
  readonly project?: ProjectHook
  readonly now?: () => number
}

/** Event data whose first key is a partId starts so (schema migration 6). */
/** Characters JSON.stringify writes as they are: no quote, backslash, control character or surrogate. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what this must exclude
const PLAIN = /^[^"\\\u0000-\u001f\ud800-\udfff]*$/

/**
 * Past this many remembered stream versions the store forgets them all (they are only a shortcut): above the
 * sessions that stream at once, and no more, so a server that served many sessions holds few of them.
 */
const STREAM_VERSIONS_KEPT = 2048

/** WAL written between automatic checkpoints: SQLite's default (1000 pages) at its default page size, 4 KiB. */
const WAL_CHECKPOINT_BYTES = 4 * 2 ** 20

export { isSystemStream, SYSTEM_STREAM_PREFIX } from './append-rules.js'

/** A stream's last version and that event's hash in hex ('': none, or logged before the chain). */
interface StreamHead {
  readonly version: number
  readonly hash: string
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
  /** when queued appends commit: src/events/commit-scheduler.ts */
  private readonly scheduler: CommitScheduler
  private headSeq: number
  private closed = false
  /** inside commit (its transaction, then its listeners): a read then sees what is committed, and commits nothing */
  private committing = false
  private full: { since: string } | undefined
  /** how long the last commit's transaction took, in ms (a double from the start: see the scheduler's fields) */
  private lastCommitMs = Number.NaN
  /**
   * Each stream's version as this connection last committed it, so an append
   * need not look it up. Trusted only while no other connection has committed
   * (PRAGMA data_version, read under the write lock). A write around the store
   * on this connection can leave one stale: a failed append that used them
   * forgets them and runs once more, looking versions up.
   */
  private readonly streamVersions = new Map<number, StreamHead>()
  private dataVersion = -1

  /** the rows of the commit under way (src/events/log-inserts.ts) */
  private readonly inserts: LogInserts
  private readonly stmt: {
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
    // Rows go to event_log with interned ids; reads use the `events` view, which joins them back.
    this.inserts = new LogInserts(db)
    this.stmt = {
      version: db
        .prepare('SELECT MAX(version) AS v FROM event_log WHERE stream = (SELECT id FROM streams WHERE session_id = ?)')
        .pluck(),
      // hex(NULL) is '': the chain's hex before its first event
      streamVersion: db.prepare(
        'SELECT version, lower(hex(hash)) AS hash FROM event_log WHERE stream = ? ORDER BY version DESC LIMIT 1',
      ),
      maxSeq: db.prepare('SELECT MAX(seq) FROM event_log').pluck(),
      setChainHead: db.prepare('UPDATE log_chain SET head_seq = ?, head_hash = unhex(?) WHERE id = 1'),
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
      meta: new Interned(db, 'event_metas', 'meta', 1024, metaKey), // migration 16
      part: new Interned(db, 'event_parts', 'part_id', 4096),
    }
    this.write = db.transaction((batch: readonly PendingAppend[], at: number, atIso: string) =>
      this.insertBatch(batch, at, atIso),
    )
    this.headSeq = (this.stmt.head.get() as number | null) ?? 0
    this.scheduler = new CommitScheduler(
      (batch) => this.commit(batch),
      () => this.closed,
    )
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
    // A checkpoint (two fsyncs) each WAL_CHECKPOINT_BYTES of log, whatever the page size: SQLite counts pages
    // (1000), which with 2 KiB pages checkpointed twice as often as with its default 4 KiB ones.
    db.pragma(
      `wal_autocheckpoint = ${Math.ceil(WAL_CHECKPOINT_BYTES / (db.pragma('page_size', { simple: true }) as number))}`,
    )
    db.pragma('cache_size = -64000')
    db.pragma('temp_store = MEMORY')
    try {
      return new EventStore(db, options)
    } catch (err) {
      db.close() // a store refused (too new, a migration failed) keeps no handle open
      throw err
    }
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
   * Read-your-writes (docs/ARCHITECTURE.md "The store port"): the database,
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
    if (sessionId === undefined) this.scheduler.flush()
    else this.scheduler.flushFor(sessionId)
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
    this.scheduler.commitNow(sessionId, validated, options, done)
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
      else this.scheduler.hurry(sessionId)
    })
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
    this.scheduler.add(sessionId, validated, options, done, awaited)
    return true
  }

  /**
   * Someone waits on the session's queued appends (a run settling what it
   * recorded): under load they commit on the next turn, with every session's
   * hurried in this one, rather than at the loaded interval; otherwise the
   * next turn commits them anyway.
   */
  awaited(sessionId: string): void {
    this.scheduler.awaited(sessionId)
  }

  /** the last commit fell in the loaded regime: the queue waits for the loaded interval */
  loaded(): boolean {
    return this.scheduler.loaded()
  }

  /**
   * Since when appends fail because the disk is full, until one commits again (docs/BACKUP.md "A full disk"):
   * what /health says. SQLite rolls the failed transaction back, so the store is as it was before it.
   */
  get storageFull(): { readonly since: string } | undefined {
    return this.full
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
    const began = performance.now()
    try {
      result = this.write.immediate(batch, at, atIso)
    } catch (err) {
      this.settleInterned(false)
      this.streamVersions.clear()
      // A remembered version may be stale (a write around the store on this connection): once more, looked up.
      if (trusted && !isDiskFull(err)) return this.commit(batch)
      if (isDiskFull(err)) {
        this.full ??= { since: new Date().toISOString() }
        throw new ChronicleError(
          'STORAGE_FULL',
          `the data directory's filesystem is full (${(err as Error).message}): nothing was written. Free some space; the server goes on by itself`,
        )
      }
      throw err
    } finally {
      if (sync) this.db.pragma('synchronous = NORMAL')
      this.committing = outer
    }
    this.full = undefined
    // Inside a caller's transaction the ids are not committed yet: that caller may still roll back.
    this.settleInterned(!nested)
    if (nested || this.streamVersions.size > STREAM_VERSIONS_KEPT) this.streamVersions.clear()
    else for (const [stream, head] of result.versions) this.streamVersions.set(stream, head)
    const last = result.all[result.all.length - 1]
    if (last) this.headSeq = last.seq
    this.lastCommitMs = performance.now() - began
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
    this.inserts.discard() // what a failed batch left
    const dataVersion = this.stmt.dataVersion.get() as number
    if (dataVersion !== this.dataVersion) {
      this.streamVersions.clear()
      this.dataVersion = dataVersion
    }
    // Seqs are given, not left to SQLite: each event's hash covers its own (src/events/chain.ts).
    let seq = (this.stmt.maxSeq.get() as number | null) ?? 0
    let head = '' // the last event's hash, hex
    const versions = new Map<number, StreamHead>()
    const out: StoredEvent[][] = []
    const all: StoredEvent[] = []
    // Appends of a batch mostly share their meta (a run's recorder passes one object): its JSON and id once.
    let lastMeta: EventMeta | undefined
    let metaJson = ''
    let meta = 0
    for (const { sessionId, events, options } of batch) {
      const stream = this.interned.stream.id(sessionId)
      const last = versions.get(stream) ??
        this.streamVersions.get(stream) ??
        (this.stmt.streamVersion.get(stream) as StreamHead | undefined) ?? { version: 0, hash: '' }
      let version = last.version
      let previous = last.hash
      checkExpectedVersion(sessionId, version, options.expectedVersion)
      const stored: StoredEvent[] = []
      if (options.meta !== lastMeta) {
        lastMeta = options.meta
        metaJson = JSON.stringify(lastMeta)
        meta = this.interned.meta.id(metaJson)
      }
      const itemAt = options.at ?? at
      const itemAtIso = options.at === undefined ? atIso : new Date(options.at).toISOString()
      for (const e of events) {
        version++
        checkBelongs(sessionId, version, e.type)
        const json = JSON.stringify(e.data)
        const [data, part] = this.encode(json, e)
        seq++
        const hex = chainHex(previous, {
          seq,
          sessionId,
          version,
          type: e.type,
          schemaVersion: CURRENT_SCHEMA_VERSION,
          at: itemAt,
          meta: metaJson,
          data: json,
        })
        previous = hex
        head = hex
        this.inserts.add(
          seq,
          stream,
          version,
          this.interned.type.id(e.type),
          CURRENT_SCHEMA_VERSION,
          data,
          meta,
          itemAt,
          part,
          hex,
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
    this.inserts.flush()
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

  /** How long the commit being published took to write, in ms: read by a commit listener (docs/OBSERVABILITY.md). */
  get commitMs(): number {
    return this.lastCommitMs
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

  /** The chain hashes of a session's own events with after < seq <= upTo (EventLog.chainOf). */
  chainOf(sessionId: string, opts: { after?: number; upTo?: number; limit?: number } = {}): ChainLink[] {
    return this.reader(sessionId)
      .prepare(
        'SELECT l.seq, l.hash FROM event_log l JOIN streams s ON s.id = l.stream WHERE s.session_id = ? AND l.seq > ? AND l.seq <= ? ORDER BY l.seq LIMIT ?',
      )
      .all(sessionId, opts.after ?? 0, opts.upTo ?? Number.MAX_SAFE_INTEGER, opts.limit ?? -1) as ChainLink[]
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

  /**
   * A consistent copy of the store into a new file while it serves, off this thread (src/events/backup.ts):
   * what is queued now is committed first, so the copy holds every append made before the call.
   */
  backup(dest: string): Promise<DatabaseCopy> {
    this.assertOpen()
    this.scheduler.flush()
    return copyDatabase(this.db, dest)
  }

  /** closed: nothing more appends or reads */
  get isClosed(): boolean {
    return this.closed
  }

  close(): void {
    if (this.closed) return
    this.scheduler.flush()
    this.closed = true
    this.db.close()
  }

  private assertOpen(): void {
    if (this.closed) throw closedError()
  }
}

/** SQLite's "database or disk is full", or the OS's ENOSPC under it. */
function isDiskFull(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code
  return (
    code === 'SQLITE_FULL' ||
    (typeof code === 'string' &&
      code.startsWith('SQLITE_IOERR') &&
      /ENOSPC|No space/i.test(String((err as Error).message)))
  )
}
