import type { StoredEvent } from './envelope.js'

export interface SubscriptionFilter {
  readonly sessions: readonly string[] | '*'
  readonly types?: readonly string[]
  /** a further limit on the sessions (a token limited to some: docs/SECURITY.md) */
  readonly allow?: (sessionId: string) => boolean
}

export interface SubscriptionOptions {
  /** live events held for a consumer that is behind; past this it re-reads from the log */
  readonly maxBuffer?: number
  /** rows read from the log per catch-up page */
  readonly pageSize?: number
  /** called once, when the stored events are replayed and the subscription turns live */
  readonly onCaughtUp?: (head: number) => void
  /**
   * the log's head, read before the subscription was made: what it says it caught up to is at least this
   * (LogSubscription; `Subscription` reads the head itself)
   */
  readonly head?: number
}

interface Source {
  head(): number
  readFiltered(sessions: readonly string[] | '*', after: number, limit: number): StoredEvent[]
  onCommit(listener: (events: readonly StoredEvent[]) => void): () => void
}

/**
 * A catch-up subscription: the stored events after `after`, then live ones,
 * each exactly once, in seq order. Pull-based, so memory stays bounded: the
 * log is the buffer. Live events are held only while the consumer keeps up;
 * past `maxBuffer` they are dropped and re-read from the log when it asks.
 *
 * No gap between log and live: reading a page and switching to live happen
 * in one synchronous step, and the store publishes only after commit, so every
 * event is either in the page or published later.
 */
export class Subscription implements AsyncIterableIterator<StoredEvent> {
  /** seq of the last event handed to the consumer */
  delivered: number
  private scanned: number
  private live = false
  private caughtUpOnce = false
  private buffer: StoredEvent[] = []
  private waiters: (() => void)[] = []
  private closed = false
  private readonly unsubscribe: () => void
  private readonly sessions: ReadonlySet<string> | null
  private readonly types: ReadonlySet<string> | null
  private readonly maxBuffer: number
  private readonly pageSize: number

  constructor(
    private readonly source: Source,
    private readonly filter: SubscriptionFilter,
    after: number,
    private readonly options: SubscriptionOptions = {},
  ) {
    this.delivered = after
    this.scanned = after
    this.sessions = filter.sessions === '*' ? null : new Set(filter.sessions)
    this.types = filter.types ? new Set(filter.types) : null
    this.maxBuffer = options.maxBuffer ?? 1000
    // A catch-up page is held in the buffer too: never more than maxBuffer of it.
    this.pageSize = Math.max(1, Math.min(options.pageSize ?? 500, this.maxBuffer))
    this.unsubscribe = source.onCommit((events) => this.onCommit(events))
  }

  /** Events waiting to be handed over (for memory checks). */
  get buffered(): number {
    return this.buffer.length
  }

  get isLive(): boolean {
    return this.live
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<StoredEvent> {
    return this
  }

  async next(): Promise<IteratorResult<StoredEvent>> {
    for (;;) {
      const event = this.take()
      if (event) return { done: false, value: event }
      if (this.closed) return { done: true, value: undefined }
      await this.ready()
    }
  }

  /**
   * The next event if one is at hand (buffered, or read from the log while
   * catching up), without waiting: a consumer drains a whole commit in one
   * synchronous loop instead of a promise per event. Undefined when none is
   * (or the subscription is closed); then `ready()` says when to ask again.
   */
  take(): StoredEvent | undefined {
    while (!this.closed) {
      const event = this.buffer.shift()
      if (event) {
        this.delivered = event.seq
        return event
      }
      if (this.live) return undefined
      this.catchUp()
    }
    return undefined
  }

  /** Resolves once events may be at hand, or the subscription closed. */
  ready(): Promise<void> {
    if (this.closed || this.buffer.length > 0 || !this.live) return Promise.resolve()
    return new Promise<void>((resolve) => this.waiters.push(resolve))
  }

  get isClosed(): boolean {
    return this.closed
  }

  /** Ends the subscription; a pending next() resolves done. */
  async return(): Promise<IteratorResult<StoredEvent>> {
    this.close()
    return { done: true, value: undefined }
  }

  close(): void {
    if (this.closed) return
    this.closed = true
    this.buffer = []
    this.unsubscribe()
    this.signal()
  }

  private catchUp(): void {
    const page = this.source.readFiltered(this.filter.sessions, this.scanned, this.pageSize)
    if (page.length === 0) {
      this.live = true
      this.scanned = Math.max(this.scanned, this.source.head())
      if (!this.caughtUpOnce) {
        this.caughtUpOnce = true
        this.options.onCaughtUp?.(this.scanned)
      }
      return
    }
    this.scanned = (page[page.length - 1] as StoredEvent).seq
    this.buffer = page.filter((e) => this.matches(e))
  }

  private onCommit(events: readonly StoredEvent[]): void {
    if (this.closed || !this.live) return
    for (const e of events) {
      if (e.seq <= this.scanned) continue
      this.scanned = e.seq
      if (this.matches(e)) this.buffer.push(e)
    }
    if (this.buffer.length > this.maxBuffer) {
      // The consumer is behind: forget the live tail and read it from the log later.
      this.buffer = []
      this.scanned = this.delivered
      this.live = false
    }
    this.signal()
  }

  private matches(e: StoredEvent): boolean {
    // `*` is every session: never a system stream (the token store)
    const session = this.sessions === null ? !e.sessionId.startsWith('sys_') : this.sessions.has(e.sessionId)
    return (
      session &&
      (this.types === null || this.types.has(e.type)) &&
      (this.filter.allow === undefined || this.filter.allow(e.sessionId))
    )
  }

  private signal(): void {
    const waiters = this.waiters
    this.waiters = []
    for (const wake of waiters) wake()
  }
}
