import type { StoredEvent } from '../../events/envelope.js'
import type { EventLog } from '../../events/log.js'
import { LogSubscription } from '../../events/log-subscription.js'
import type { SubscriptionFilter, SubscriptionOptions } from '../../events/subscription.js'

/**
 * Routes commits to the WebSocket subscriptions that want them, over the
 * log port (src/events/log.ts), so either engine serves them. Each
 * subscription listening to the log directly would scan every commit: with S
 * sessions and two watchers each, that is 2·S scans per commit — the cost
 * per event grows with the number of sessions. Here one log listener splits
 * a commit by session and hands each single-session subscription only its
 * own session's events (in seq order, in the same synchronous publish, so
 * the catch-up subscription's exactly-once, gap-free reasoning is
 * unchanged: src/events/log-subscription.ts). Subscriptions to several
 * sessions or to all get the whole commit.
 *
 * It also keeps the head as this server has heard it (the last seq
 * published): what heartbeats and closing frames carry without a read.
 */

type Listener = (events: readonly StoredEvent[]) => void

export type FanoutLog = Pick<EventLog, 'readFiltered' | 'onCommit' | 'head'>

export class SessionFanout {
  private readonly bySession = new Map<string, Set<Listener>>()
  private readonly whole = new Set<Listener>()
  private readonly unsubscribe: () => void
  private heard = 0

  private constructor(private readonly log: FanoutLog) {
    this.unsubscribe = log.onCommit((events) => this.publish(events))
  }

  /** Listening from now, the head read once (a commit heard meanwhile counts as well). */
  static async open(log: FanoutLog): Promise<SessionFanout> {
    const fanout = new SessionFanout(log)
    const head = await log.head()
    fanout.heard = Math.max(fanout.heard, head)
    return fanout
  }

  /** The last seq committed, as heard. */
  get head(): number {
    return this.heard
  }

  /** A catch-up subscription whose live events come through this fan-out. */
  subscribe(filter: SubscriptionFilter, after: number, options: SubscriptionOptions = {}): LogSubscription {
    const single = filter.sessions !== '*' && filter.sessions.length === 1 ? (filter.sessions[0] as string) : undefined
    return new LogSubscription(
      {
        readFiltered: (sessions, from, limit) => this.log.readFiltered(sessions, from, limit),
        onCommit: (listener) => (single === undefined ? this.addWhole(listener) : this.addSession(single, listener)),
      },
      filter,
      after,
      options,
    )
  }

  close(): void {
    this.unsubscribe()
  }

  private addWhole(listener: Listener): () => void {
    this.whole.add(listener)
    return () => this.whole.delete(listener)
  }

  private addSession(sessionId: string, listener: Listener): () => void {
    let set = this.bySession.get(sessionId)
    if (!set) {
      set = new Set()
      this.bySession.set(sessionId, set)
    }
    set.add(listener)
    return () => {
      const current = this.bySession.get(sessionId)
      current?.delete(listener)
      if (current?.size === 0) this.bySession.delete(sessionId)
    }
  }

  private publish(events: readonly StoredEvent[]): void {
    const last = events[events.length - 1]
    if (last && last.seq > this.heard) this.heard = last.seq
    if (this.whole.size > 0) this.call(this.whole, events)
    if (this.bySession.size === 0) return
    // Most commits carry one session (or a few): group without copying when possible.
    const first = events[0]?.sessionId
    if (events.every((e) => e.sessionId === first)) {
      this.deliver(first as string, events)
      return
    }
    const groups = new Map<string, StoredEvent[]>()
    for (const e of events) {
      if (!this.bySession.has(e.sessionId)) continue
      const group = groups.get(e.sessionId)
      if (group) group.push(e)
      else groups.set(e.sessionId, [e])
    }
    for (const [sessionId, group] of groups) this.deliver(sessionId, group)
  }

  private deliver(sessionId: string, events: readonly StoredEvent[]): void {
    const set = this.bySession.get(sessionId)
    if (set) this.call(set, events)
  }

  private call(listeners: ReadonlySet<Listener>, events: readonly StoredEvent[]): void {
    // A copy: a listener may unsubscribe (or another subscribe) while we deliver.
    for (const listener of [...listeners]) {
      try {
        listener(events)
      } catch {
        // one subscriber's failure is its own, as with the log's onCommit
      }
    }
  }
}
