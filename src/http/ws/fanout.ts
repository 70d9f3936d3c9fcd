import type { StoredEvent } from '../../events/envelope.js'
import type { EventStore } from '../../events/store.js'
import { Subscription, type SubscriptionFilter, type SubscriptionOptions } from '../../events/subscription.js'

/**
 * Routes commits to the WebSocket subscriptions that want them. Each
 * Subscription registered on the store directly would scan every commit:
 * with S sessions and two watchers each, that is 2·S scans per commit — the
 * cost per event grows with the number of sessions. Here one store listener
 * splits a commit by session and hands each single-session subscription only
 * its own session's events (in seq order, in the same synchronous publish,
 * so the Subscription's exactly-once, gap-free reasoning is unchanged).
 * Subscriptions to several sessions or to all get the whole commit, as before.
 */

type Listener = (events: readonly StoredEvent[]) => void

export class SessionFanout {
  private readonly bySession = new Map<string, Set<Listener>>()
  private readonly whole = new Set<Listener>()
  private unsubscribe: (() => void) | undefined

  constructor(private readonly store: EventStore) {}

  /** A catch-up subscription (as store.subscribe) whose live events come through this fan-out. */
  subscribe(filter: SubscriptionFilter, after: number, options: SubscriptionOptions = {}): Subscription {
    const store = this.store
    const single = filter.sessions !== '*' && filter.sessions.length === 1 ? (filter.sessions[0] as string) : undefined
    return new Subscription(
      {
        head: () => store.head(),
        readFiltered: (sessions, from, limit) => store.readFiltered(sessions, from, limit),
        onCommit: (listener) => (single === undefined ? this.addWhole(listener) : this.addSession(single, listener)),
      },
      filter,
      after,
      options,
    )
  }

  private addWhole(listener: Listener): () => void {
    this.whole.add(listener)
    this.listen()
    return () => {
      this.whole.delete(listener)
      this.release()
    }
  }

  private addSession(sessionId: string, listener: Listener): () => void {
    let set = this.bySession.get(sessionId)
    if (!set) {
      set = new Set()
      this.bySession.set(sessionId, set)
    }
    set.add(listener)
    this.listen()
    return () => {
      const current = this.bySession.get(sessionId)
      current?.delete(listener)
      if (current?.size === 0) this.bySession.delete(sessionId)
      this.release()
    }
  }

  private listen(): void {
    this.unsubscribe ??= this.store.onCommit((events) => this.publish(events))
  }

  private release(): void {
    if (this.whole.size > 0 || this.bySession.size > 0 || !this.unsubscribe) return
    this.unsubscribe()
    this.unsubscribe = undefined
  }

  private publish(events: readonly StoredEvent[]): void {
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
        // one subscriber's failure is its own, as with store.onCommit
      }
    }
  }
}
