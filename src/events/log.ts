import type { ChronicleEvent } from './catalogue.js'
import type { StoredEvent } from './envelope.js'
import { checkBelongs, checkExpectedVersion } from './append-rules.js'
import { ChronicleError } from './errors.js'
import { validate } from './rows.js'
import type { AppendOptions, CommitListener, EventStore, Settle } from './store.js'

/**
 * The event log as a port (docs/ARCHITECTURE.md "The store port"): what every
 * engine gives, asynchronous because a database over a network is.
 * SQLite's EventStore (synchronous, in process) is one through `sqliteLog`;
 * PostgreSQL's is `PostgresEventLog` (src/events/postgres/log.ts). One
 * contract suite runs against both (test/events/log-contract.ts).
 *
 * - **append / enqueue** check the expected version and where each event
 *   belongs (src/events/append-rules.ts), give each event the next global
 *   `seq` — gap-free, commit order = seq order — and the next stream
 *   `version`, chain its hash to its stream's last (src/events/chain.ts), and
 *   commit; `full` durability before they resolve. `enqueue` batches: what is
 *   queued in one turn commits in one transaction, a failing append retried
 *   alone.
 * - **reads** in seq order, never a gap; **onCommit** hears each commit once,
 *   after it, in seq order.
 */
export interface EventLog {
  append(sessionId: string, events: readonly ChronicleEvent[], options: AppendOptions): Promise<StoredEvent[]>
  enqueue(sessionId: string, events: readonly ChronicleEvent[], options: AppendOptions): Promise<StoredEvent[]>
  /**
   * `enqueue` without a promise of its own, for a run's streamed deltas: `done` hears once, when they commit or
   * fail. False for no events; throws for invalid ones or a closed log, as append does.
   */
  submit(sessionId: string, events: readonly ChronicleEvent[], options: AppendOptions, done: Settle): boolean
  /** someone waits on the session's queued appends: an engine that batches may commit them now */
  awaited(sessionId: string): void
  /**
   * Appends to several sessions in ONE transaction, all or nothing, after everything queued before it, with
   * `full` durability: an import. `build` gets the seq its first event will take — events are numbered in
   * order from it — so its events may name seqs of the batch itself (an imported fork's point). `build` is
   * pure: an engine may call it more than once (PostgreSQL's learns the sessions to lock first).
   */
  appendTogether(build: (firstSeq: number) => readonly Append[]): Promise<StoredEvent[]>
  /** One session's own events with after < seq <= upTo, in order, at most `limit`. */
  readSession(sessionId: string, opts?: { after?: number; upTo?: number; limit?: number }): Promise<StoredEvent[]>
  /**
   * The chain hashes (src/events/chain.ts) of one session's own events with after < seq <= upTo, in seq
   * order, at most `limit`; null for an event logged before the chain. What an export carries beside each event.
   */
  chainOf(sessionId: string, opts?: { after?: number; upTo?: number; limit?: number }): Promise<ChainLink[]>
  /** The seq of a session's own event at `version`, or undefined. */
  seqOfVersion(sessionId: string, version: number): Promise<number | undefined>
  /** One session's own events of one type, in order. */
  readSessionOfType(sessionId: string, type: string): Promise<StoredEvent[]>
  /** All events with seq > after, in seq order, at most `limit`. */
  readAll(after: number, limit?: number): Promise<StoredEvent[]>
  /** Events of the given sessions (or all) after a seq. */
  readFiltered(sessions: readonly string[] | '*', after: number, limit: number): Promise<StoredEvent[]>
  get(seq: number): Promise<StoredEvent | undefined>
  /** The session's version (0 when it has no events). */
  version(sessionId: string): Promise<number>
  /**
   * Once every append made to the session before this call has committed or failed: read-your-writes that
   * reads nothing, for a cache fed by onCommit (src/runtime/loop/session-views.ts).
   */
  settled(sessionId: string): Promise<void>
  /** The highest committed seq. */
  head(): Promise<number>
  /** The last seq and that event's hash, as the chain records them. */
  chainHead(): Promise<{ seq: number; hash: Buffer | null }>
  onCommit(listener: CommitListener): () => void
  /** how long the commit being published took to write, in ms (NaN before the first): read by a commit listener */
  readonly commitMs: number
  /**
   * (cluster) the epoch this node holds the session at, undefined when it holds none (or there is no fence):
   * what a run's appends carry as AppendOptions.epoch
   */
  heldAt?(sessionId: string): number | undefined
  /** content-addressed text events name by hash (src/events/blobs.ts): written before the event that names it */
  readonly blobs: {
    /** stores `content` once; its key, sha256 hex */
    put(content: string): Promise<string>
    get(hash: string): Promise<string | undefined>
  }
  close(): Promise<void>
}

/** One session's events in an `appendTogether`, with the options of an append. */
export interface Append {
  readonly sessionId: string
  readonly events: readonly ChronicleEvent[]
  readonly options: AppendOptions
}

/** An event's place in the hash chain. */
export interface ChainLink {
  readonly seq: number
  readonly hash: Buffer | null
}

/** The embedded SQLite store as the port. */
export function sqliteLog(store: EventStore): EventLog {
  return {
    // Through the queue: the appends of one turn (commands of many sessions) share a commit; a
    // commit's cost is mostly per commit. It still commits on the next turn, loaded or not.
    append: (sessionId, events, options) => store.enqueue(sessionId, events, options),
    enqueue: (sessionId, events, options) => store.enqueue(sessionId, events, options),
    submit: (sessionId, events, options, done) => store.submit(sessionId, events, options, done),
    awaited: (sessionId) => store.awaited(sessionId),
    appendTogether: async (build) => {
      const db = store.reader() // behind everything queued
      // durable like any acknowledged commit: FULL for this transaction (unless nested in a caller's)
      const sync = !db.inTransaction
      if (sync) db.pragma('synchronous = FULL')
      try {
        return db
          .transaction(() => {
            const first = store.head() + 1
            const appends = build(first)
            // Every check before the first append: an append nested in this transaction is told to the
            // store's listeners at once, so what can be refused must be refused before any is made.
            checkTogether(appends, (sessionId) => store.version(sessionId))
            const stored = appends.flatMap(({ sessionId, events, options }) => store.append(sessionId, events, options))
            checkNumbered(stored, first)
            return stored
          })
          .immediate()
      } finally {
        if (sync) db.pragma('synchronous = NORMAL')
      }
    },
    readSession: async (sessionId, opts) => store.readSession(sessionId, opts),
    chainOf: async (sessionId, opts) => store.chainOf(sessionId, opts),
    seqOfVersion: async (sessionId, version) => store.seqOfVersion(sessionId, version),
    readSessionOfType: async (sessionId, type) => store.readSessionOfType(sessionId, type),
    readAll: async (after, limit) => store.readAll(after, limit),
    readFiltered: async (sessions, after, limit) => store.readFiltered(sessions, after, limit),
    get: async (seq) => store.get(seq),
    version: async (sessionId) => store.version(sessionId),
    settled: async (sessionId) => {
      store.reader(sessionId) // commits what the session queued
    },
    head: async () => store.head(),
    chainHead: async () => store.chainHead(),
    onCommit: (listener) => store.onCommit(listener),
    get commitMs() {
      return store.commitMs
    },
    blobs: {
      put: async (content) => store.blobs.put(content),
      get: async (hash) => store.blobs.get(hash),
    },
    close: async () => store.close(),
  }
}

/** What appendTogether promised its build: the events numbered in order from `first`. Else it rolls back. */
export function checkNumbered(stored: readonly StoredEvent[], first: number): void {
  stored.forEach((e, i) => {
    if (e.seq !== first + i)
      throw new ChronicleError('INTERNAL', `appended together: event ${i} took seq ${e.seq}, not ${first + i}`)
  })
}

/** The checks each of the appends would make (valid events, expected versions, where each belongs), as a whole. */
export function checkTogether(appends: readonly Append[], version: (sessionId: string) => number): void {
  const versions = new Map<string, number>()
  for (const { sessionId, events, options } of appends) {
    let at = versions.get(sessionId) ?? version(sessionId)
    checkExpectedVersion(sessionId, at, options.expectedVersion)
    for (const e of validate(events)) checkBelongs(sessionId, ++at, e.type)
    versions.set(sessionId, at)
  }
}
