import type { ChronicleEvent } from '../../events/catalogue.js'
import type { EventMeta } from '../../events/envelope.js'
import { isChronicleError } from '../../events/errors.js'
import type { EventLog } from '../../events/log.js'
import type { AppendOptions, Durability, Settle } from '../../events/store.js'

/**
 * Appends one run's events through the batching appender without awaiting
 * each delta: everything emitted in one tick commits in one transaction.
 * `settle()` waits for all of them and rethrows the first failure, so a
 * rejected append is never lost nor left unhandled.
 *
 * Once an append fails because the store is unavailable (STORE_UNAVAILABLE),
 * the recorder records nothing more — what follows a lost event would leave
 * a hole in the run's history — and every `settle()` says so: the run pauses
 * and continues with a new recorder once the store is back
 * (src/runtime/recovery/outage.ts).
 */
export class Recorder {
  /** appends emitted, and how many of them have committed or failed (a session's commit in emit order) */
  private emitted = 0
  private ended = 0
  private waiters: { readonly upTo: number; readonly wake: () => void }[] = []
  private failure: unknown
  /** the store was lost under an append: nothing more is recorded (STORE_UNAVAILABLE) */
  private lost: unknown
  /** one for every append: a streamed delta costs no promise of its own */
  private readonly done: Settle = {
    resolve: () => this.end(),
    reject: (err) => {
      this.failure ??= err
      if (isChronicleError(err, 'STORE_UNAVAILABLE')) this.lost ??= err
      this.end()
    },
  }

  /**
   * (cluster) the epoch the node held the session at when the run began: every append carries it, so once the
   * node has let the session go and claimed it back, what this run still records is refused (AppendOptions.epoch)
   */
  private readonly epoch: number | undefined

  constructor(
    private readonly log: EventLog,
    readonly sessionId: string,
  ) {
    this.epoch = log.heldAt?.(sessionId)
  }

  emit(events: ChronicleEvent | readonly ChronicleEvent[], meta: EventMeta, durability: Durability = 'normal'): void {
    if (this.lost !== undefined) return
    const list = Array.isArray(events) ? events : [events as ChronicleEvent]
    try {
      if (this.log.submit(this.sessionId, list, this.options(meta, durability), this.done)) this.emitted++
    } catch (err) {
      this.failure ??= err // never queued: settle() rethrows it
    }
  }

  private end(): void {
    this.ended++
    if (this.waiters.length === 0) return
    const waiting = this.waiters
    this.waiters = waiting.filter((w) => w.upTo > this.ended)
    for (const w of waiting) if (w.upTo <= this.ended) w.wake()
  }

  /**
   * Waits until everything emitted so far is committed. Under load the run's
   * own appends commit now (its session's only, EventLog.awaited): a run
   * waiting on them would otherwise wait out the loaded interval at each of
   * its starts, steps and its end (two intervals a turn, whoever waits on the
   * turn), while deltas nobody waits on keep sharing commits.
   */
  async settle(): Promise<void> {
    if (this.ended < this.emitted) this.log.awaited(this.sessionId)
    const upTo = this.emitted // what is emitted from here on is not waited for
    if (this.ended < upTo) await new Promise<void>((wake) => this.waiters.push({ upTo, wake }))
    if (this.lost !== undefined) throw this.lost
    if (this.failure !== undefined) {
      const err = this.failure
      this.failure = undefined
      throw err
    }
  }

  /** Appends now (after everything queued), in one transaction. */
  async append(events: readonly ChronicleEvent[], meta: EventMeta, durability: Durability = 'normal'): Promise<void> {
    if (this.lost !== undefined) throw this.lost
    await this.log.append(this.sessionId, events, this.options(meta, durability))
  }

  private options(meta: EventMeta, durability: Durability): AppendOptions {
    return this.epoch === undefined ? { meta, durability } : { meta, durability, epoch: this.epoch }
  }
}
