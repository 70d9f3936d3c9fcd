import type { WebSocket } from 'ws'
import type { LogSubscription } from '../../events/log-subscription.js'
import type { SubscriptionReach } from '../reach.js'
import { caughtUpFrame, eventFrame } from './frames.js'

/**
 * Moves one subscription's events onto a socket, one at a time, and only
 * while the socket's unsent bytes stay under a high-water mark. Nothing is
 * buffered here: while the socket is full the subscription holds at most its
 * own bounded live tail and then falls back to the log (the log is the
 * buffer). A socket that does not drain at all for `stallMs` is reported as
 * a slow consumer with the cursor it can resume from. A limited token's
 * subscription sends only the sessions its principal reaches (src/http/reach.ts):
 * known at once for a session seen before or born in the stream, read once
 * for any other.
 */

/** What the pump takes from a catch-up subscription (src/events/log-subscription.ts). */
export type PumpSource = Pick<LogSubscription, 'take' | 'ready' | 'isClosed' | 'isLive' | 'buffered' | 'close'>

export interface PumpOptions {
  readonly highWaterBytes: number
  readonly stallMs: number
  readonly onSlowConsumer: () => void
  /** a limited token's: the sessions it may hear */
  readonly reach?: SubscriptionReach
}

const POLL_MS = 5

export class SubscriptionPump {
  /** seq of the last event written to the socket: the client's resume cursor */
  cursor: number
  private stopped = false

  constructor(
    readonly id: string,
    private readonly socket: WebSocket,
    private readonly subscription: PumpSource,
    after: number,
    private readonly options: PumpOptions,
  ) {
    this.cursor = after
  }

  /** Sends the caught-up marker; wire it to the Subscription's onCaughtUp. */
  caughtUp(head: number): void {
    if (!this.stopped && this.open()) this.socket.send(caughtUpFrame(this.id, head))
  }

  async run(): Promise<void> {
    while (!this.stopped) {
      // Only a full socket, an empty subscription or a session not seen before costs an await: a commit's events go out in one synchronous run.
      if (this.socket.bufferedAmount > this.options.highWaterBytes && !(await this.drained())) return
      const event = this.subscription.take()
      if (event === undefined) {
        if (this.subscription.isClosed) return
        await this.subscription.ready()
        continue
      }
      const reach = this.options.reach
      if (reach && !(reach.of(event) ?? (await reach.resolve(event.sessionId)))) continue
      if (this.stopped || !this.open()) return
      this.cork()
      this.socket.send(eventFrame(this.id, event))
      this.cursor = event.seq
    }
  }

  /** Events committed for this subscription and not yet sent: its live tail, or up to the head while it reads the log. */
  lag(head: number): number {
    return this.subscription.isLive ? this.subscription.buffered : Math.max(0, head - this.cursor)
  }

  stop(): void {
    this.stopped = true
    this.subscription.close()
  }

  /**
   * Frames of one commit leave in one write: the raw socket is corked on the
   * first and uncorked once the promise jobs the commit set off have run
   * (process.nextTick runs after the microtask queue drains). Not on the next
   * turn of the event loop: that would hold the frames behind whatever timers
   * and I/O that turn brings, adding that to every event's latency.
   */
  private cork(): void {
    const raw = (this.socket as unknown as { _socket?: { cork(): void; uncork(): void; writableCorked: number } })
      ._socket
    if (!raw || raw.writableCorked > 0) return
    raw.cork()
    process.nextTick(() => raw.uncork())
  }

  private open(): boolean {
    return this.socket.readyState === this.socket.OPEN
  }

  /** Waits until the socket is under the high-water mark; false if it stalled or closed. */
  private async drained(): Promise<boolean> {
    let amount = this.socket.bufferedAmount
    if (amount <= this.options.highWaterBytes) return true
    let progressAt = Date.now()
    while (!this.stopped && this.open()) {
      await new Promise((resolve) => setTimeout(resolve, POLL_MS))
      const now = this.socket.bufferedAmount
      if (now <= this.options.highWaterBytes) return true
      if (now < amount) progressAt = Date.now()
      amount = now
      if (Date.now() - progressAt > this.options.stallMs) {
        this.options.onSlowConsumer()
        return false
      }
    }
    return false
  }
}
