import type { ChronicleEvent } from './catalogue.js'
import type { StoredEvent } from './envelope.js'
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
  /** The highest committed seq. */
  head(): Promise<number>
  /** The last seq and that event's hash, as the chain records them. */
  chainHead(): Promise<{ seq: number; hash: Buffer | null }>
  onCommit(listener: CommitListener): () => void
  /** how long the commit being published took to write, in ms (NaN before the first): read by a commit listener */
  readonly commitMs: number
  /** content-addressed text events name by hash (src/events/blobs.ts): written before the event that names it */
  readonly blobs: {
    /** stores `content` once; its key, sha256 hex */
    put(content: string): Promise<string>
    get(hash: string): Promise<string | undefined>
  }
  close(): Promise<void>
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
    readSession: async (sessionId, opts) => store.readSession(sessionId, opts),
    chainOf: async (sessionId, opts) => store.chainOf(sessionId, opts),
    seqOfVersion: async (sessionId, version) => store.seqOfVersion(sessionId, version),
    readSessionOfType: async (sessionId, type) => store.readSessionOfType(sessionId, type),
    readAll: async (after, limit) => store.readAll(after, limit),
    readFiltered: async (sessions, after, limit) => store.readFiltered(sessions, after, limit),
    get: async (seq) => store.get(seq),
    version: async (sessionId) => store.version(sessionId),
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
