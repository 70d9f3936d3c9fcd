import type { ChronicleEvent } from '../events/catalogue.js'
import type { EventMeta } from '../events/envelope.js'
import type { IdSource } from '../events/ids.js'
import type { EventStore } from '../events/store.js'
import type { Session, SessionView } from '../projections/model.js'
import { requireSession } from '../projections/read-model.js'
import { type TimeTravelOptions, viewAt } from '../projections/time-travel.js'
import { FORK_SETTLEMENT, settleInFlight } from './settle.js'

/**
 * Fork: a new session whose history is the parent's history up to `atSeq`
 * followed by its own events. Nothing of the parent is copied into the log:
 * the child's first event `session.forked {from}` points at the fork point,
 * and its read model starts as the parent's state there (the projector
 * resolves it by time travel, so the cost does not grow with the log). The
 * same append then settles what was in flight, so the child is idle and
 * ready for input. The parent is untouched; siblings share nothing but the
 * prefix.
 */
export interface ForkOptions extends TimeTravelOptions {
  readonly title?: string
  readonly meta?: EventMeta
}

/** The pure half: the child's first events, given the parent's state at the fork point. */
export function decideFork(parentAtSeq: SessionView, from: { sessionId: string; seq: number }, title?: string): ChronicleEvent[] {
  const forked: ChronicleEvent = { type: 'session.forked', data: { from, ...(title !== undefined && { title }) } }
  // Rekeying keeps entity ids, so what is open in the parent's view is what is open in the child.
  return [forked, ...settleInFlight(parentAtSeq, FORK_SETTLEMENT)]
}

export function fork(store: EventStore, ids: IdSource, sessionId: string, atSeq: number, options: ForkOptions = {}): Session {
  store.flush() // the fork point may be an event still queued
  const { title, meta, ...travel } = options
  const parent = viewAt(store, sessionId, atSeq, travel) // SESSION_NOT_FOUND / SEQ_OUT_OF_RANGE
  const childId = ids.next('ses')
  store.append(childId, decideFork(parent, { sessionId, seq: atSeq }, title), {
    expectedVersion: 0,
    durability: 'full',
    meta: meta ?? { actor: 'user', command: 'fork' },
  })
  return requireSession(store.db, childId)
}
