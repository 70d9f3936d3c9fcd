import type { StoredEvent } from './envelope.js'
import { isChronicleError } from './errors.js'
import type { EventLog } from './log.js'
import type { SubscriptionFilter, SubscriptionOptions } from './subscription.js'

/**
 * A catch-up subscription over the asynchronous log (src/events/log.ts): the
 * stored events after `after`, then live ones, each exactly once, in seq
 * order, with bounded memory — what `Subscription` is over SQLite's
 * synchronous store.
 *
 * A log page is read asynchronously, so commits published while it is read
 * would fall between the page and live. So the subscription listens from the
 * start, holding what is published while it catches up (at most
 * `maxBuffer`): when a page comes back empty and nothing was dropped meanwhile,
 * what it holds past the page is the live tail, handed over without a gap.
 * Past `maxBuffer` it drops that tail and reads again from the log. The seq
 * last scanned drops what both the page and the listener saw.
 *
 * A page that cannot be read because the store is away (STORE_UNAVAILABLE:
 * PostgreSQL lost) is read again, after a pause that doubles up to
 * `UNAVAILABLE_RETRY_MAX_MS`, until the store answers: the subscriber waits
 * and then goes on from where it was, never silent for good.
 */

/** How soon a page the store could not serve is read again, doubling up to the max. */
const UNAVAILABLE_RETRY_MS = 100
const UNAVAILABLE_RETRY_MAX_MS = 2_000
export class LogSubscription implements AsyncIterableIterator<StoredEvent> {
  /** seq of the last event handed to the consumer */
  delivered: number
  private scanned: number
  private live = false
  private caughtUpOnce = false
  private buffer: StoredEvent[] = []
  /** published while catching up: the live tail, unless it overflowed */
  private held: StoredEvent[] = []
  private overflowed = false
  private reading: Promise<void> | undefined
  private waiters: (() => void)[] = []
  private closed = false
  /** the pause before the next page, while the store is unavailable */
  private retryMs = 0
  private readonly unsubscribe: () => void
  private readonly sessions: ReadonlySet<string> | null
  private readonly types: ReadonlySet<string> | null
  private readonly maxBuffer: number
  private readonly pageSize: number

  constructor(
    private readonly log: Pick<EventLog, 'readFiltered' | 'onCommit'>,
    private readonly filter: SubscriptionFilter,
    after: number,
    private readonly options: SubscriptionOptions = {},
  ) {
    this.delivered = after
    this.scanned = after
    this.sessions = filter.sessions === '*' ? null : new Set(filter.sessions)
    this.types = filter.types ? new Set(filter.types) : null
    this.maxBuffer = options.maxBuffer ?? 1000
    this.pageSize = Math.max(1, Math.min(options.pageSize ?? 500, this.maxBuffer))
    this.unsubscribe = log.onCommit((events) => this.onCommit(events))
  }

  get buffered(): number {
    return this.buffer.length + this.held.length
  }

  get isLive(): boolean {
    return this.live
  }

  get isClosed(): boolean {
    return this.closed
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

  /** The next event at hand, without waiting; undefined when none is (then `ready()` says when to ask again). */
  take(): StoredEvent | undefined {
    if (this.closed) return undefined
    const event = this.buffer.shift()
    if (event) {
      this.delivered = event.seq
      return event
    }
    if (!this.live) this.reading ??= this.catchUp()
    return undefined
  }

  /** Resolves once events may be at hand (a page read, a commit heard), or the subscription closed. */
  ready(): Promise<void> {
    if (this.closed || this.buffer.length > 0) return Promise.resolve()
    if (!this.live) return (this.reading ??= this.catchUp())
    return new Promise<void>((resolve) => this.waiters.push(resolve))
  }

  async return(): Promise<IteratorResult<StoredEvent>> {
    this.close()
    return { done: true, value: undefined }
  }

  close(): void {
    if (this.closed) return
    this.closed = true
    this.buffer = []
    this.held = []
    this.unsubscribe()
    this.signal()
  }

  /** One page from the log after what was scanned; an empty one with nothing dropped meanwhile turns live. */
  private async catchUp(): Promise<void> {
    try {
      this.overflowed = false
      const page = await this.page()
      if (this.closed || page === undefined) return
      if (page.length > 0) {
        this.scanned = (page[page.length - 1] as StoredEvent).seq
        this.buffer.push(...page.filter((e) => this.matches(e)))
        return
      }
      if (this.overflowed) return // the live tail was dropped while reading: read again
      // the page was read after the head given was: nothing of the filter's lies between
      this.scanned = Math.max(this.scanned, this.options.head ?? 0)
      const tail = this.held.filter((e) => e.seq > this.scanned)
      this.held = []
      this.live = true
      for (const e of tail) this.accept(e)
      if (!this.caughtUpOnce) {
        this.caughtUpOnce = true
        this.options.onCaughtUp?.(this.scanned)
      }
    } finally {
      this.reading = undefined
      this.signal()
    }
  }

  /** The next page from the log; undefined (after a pause) when the store is unavailable: read again. */
  private async page(): Promise<StoredEvent[] | undefined> {
    try {
      const page = await this.log.readFiltered(this.filter.sessions, this.scanned, this.pageSize)
      this.retryMs = 0
      return page
    } catch (err) {
      if (!isChronicleError(err, 'STORE_UNAVAILABLE')) throw err
      this.retryMs = Math.min(UNAVAILABLE_RETRY_MAX_MS, Math.max(UNAVAILABLE_RETRY_MS, this.retryMs * 2))
      await new Promise((resolve) => setTimeout(resolve, this.retryMs))
      return undefined
    }
  }

  private onCommit(events: readonly StoredEvent[]): void {
    if (this.closed) return
    if (!this.live) {
      this.held.push(...events)
      if (this.held.length > this.maxBuffer) {
        this.held = []
        this.overflowed = true
      }
      return
    }
    for (const e of events) this.accept(e)
    if (this.buffer.length > this.maxBuffer) {
      // The consumer is behind: forget the live tail and read it from the log later.
      this.buffer = []
      this.scanned = this.delivered
      this.live = false
    }
    this.signal()
  }

  private accept(e: StoredEvent): void {
    if (e.seq <= this.scanned) return
    this.scanned = e.seq
    if (this.matches(e)) this.buffer.push(e)
  }

  private matches(e: StoredEvent): boolean {
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
