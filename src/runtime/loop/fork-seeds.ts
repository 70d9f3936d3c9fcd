import { isType, type StoredEvent, type StoredEventOf } from '../../events/envelope.js'
import { fold, inheritedView } from '../../projections/fold/fold.js'
import type { SessionView } from '../../projections/fold/model.js'
import type { TimeTravel } from '../../projections/time-travel/port.js'

/** Forks remembered at once: those made since their first read, which comes right after (a fork is made to run). */
const FORKS_HELD = 32

/** A fork's own events kept at most; past this, its rows are the cheaper read. */
const OWN_EVENTS_HELD = 64

/**
 * A new fork's first view, from the state at its fork point. A fork's rows
 * are its parent's up to the fork point: the first read of a fork of a long
 * session reads and inflates thousands of them (48–65 ms at 1,000 turns,
 * most of its first turn), while the fork command has just computed that
 * very state by time travel, which keeps it. So the loop's views remember
 * the forks they hear being made, with their few events so far, and build a
 * fork's first view from the fork point's state and those events — the same
 * fold the projector ran, so the same view its rows hold.
 *
 * Bounded: FORKS_HELD forks, each OWN_EVENTS_HELD events at most; a fork
 * forgotten, or one whose events were not all heard, is read from its rows.
 */
export class ForkSeeds {
  /** each fork's events since its `session.forked`, in version order */
  private readonly forks = new Map<string, StoredEvent[]>()

  constructor(private readonly timeTravel: TimeTravel) {}

  /** A commit of a session the views do not hold. */
  hear(e: StoredEvent): void {
    if (isType(e, 'session.forked') && e.version === 1) {
      this.forks.set(e.sessionId, [e])
      if (this.forks.size > FORKS_HELD) this.forks.delete(this.forks.keys().next().value as string)
      return
    }
    const events = this.forks.get(e.sessionId)
    if (!events) return
    if (events.length >= OWN_EVENTS_HELD || e.version !== (events.at(-1) as StoredEvent).version + 1) {
      this.forks.delete(e.sessionId)
    } else events.push(e)
  }

  /**
   * The fork's view as of the events heard so far, or undefined when it is not one remembered. Takes what
   * it remembers at once: what commits after this call is the caller's to fold (SessionLoads hears it).
   */
  view(sessionId: string): Promise<SessionView> | undefined {
    const events = this.forks.get(sessionId)
    if (!events) return undefined
    this.forks.delete(sessionId)
    return this.build(events[0] as StoredEventOf<'session.forked'>, events)
  }

  private async build(forked: StoredEventOf<'session.forked'>, events: readonly StoredEvent[]): Promise<SessionView> {
    const parent = await this.timeTravel.viewAt(forked.data.from.sessionId, forked.data.from.seq)
    const own = inheritedView(() => parent, forked) // a copy: what time travel returns may be shared with its cache
    return fold(own, events)
  }

  forget(sessionId: string): void {
    this.forks.delete(sessionId)
  }
}
