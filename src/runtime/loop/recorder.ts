import type { ChronicleEvent } from '../../events/catalogue.js'
import type { EventMeta } from '../../events/envelope.js'
import type { Durability, EventStore } from '../../events/store.js'

/**
 * Appends one run's events through the batching appender without awaiting
 * each delta: everything emitted in one tick commits in one transaction.
 * `settle()` waits for all of them and rethrows the first failure, so a
 * rejected append is never lost nor left unhandled.
 */
export class Recorder {
  private pending: Promise<unknown>[] = []
  private failure: unknown

  constructor(
    private readonly store: EventStore,
    readonly sessionId: string,
  ) {}

  emit(events: ChronicleEvent | readonly ChronicleEvent[], meta: EventMeta, durability: Durability = 'normal'): void {
    const list = Array.isArray(events) ? events : [events as ChronicleEvent]
    const p = this.store.enqueue(this.sessionId, list, { meta, durability }).catch((err: unknown) => {
      this.failure ??= err
    })
    this.pending.push(p)
    if (this.pending.length > 256) this.pending = this.pending.slice(-1) // committed in order: the last one covers the rest
  }

  /**
   * Waits until everything emitted so far is committed. Under load the run's
   * own appends commit now (its session's only, src/events/store.ts): a run
   * waiting on them would otherwise wait out the loaded interval at each of
   * its starts and steps, while deltas nobody waits on keep sharing commits.
   */
  async settle(): Promise<void> {
    if (this.pending.length > 0 && this.store.loaded()) this.store.flushFor(this.sessionId)
    const pending = this.pending
    this.pending = []
    await Promise.all(pending)
    if (this.failure !== undefined) {
      const err = this.failure
      this.failure = undefined
      throw err
    }
  }

  /** Appends now (after everything queued), in one transaction. */
  append(events: readonly ChronicleEvent[], meta: EventMeta, durability: Durability = 'normal'): void {
    this.store.append(this.sessionId, events, { meta, durability })
  }
}
