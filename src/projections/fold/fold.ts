import { copyWith } from '../../events/copy.js'
import type { StoredEvent } from '../../events/envelope.js'
import { ChronicleError } from '../../events/errors.js'
import { apply, evolve } from './evolve.js'
import { emptyView, type Message, type Part, type SessionView } from './model.js'

/** What folding needs from the log: a session's own events in order. */
export interface EventReader {
  iterateSession(sessionId: string, opts?: { after?: number; upTo?: number }): Iterable<StoredEvent>
  readSession(sessionId: string, opts?: { after?: number; upTo?: number; limit?: number }): StoredEvent[]
}

/** Folds events into a view in place and returns it. */
export function fold(view: SessionView, events: Iterable<StoredEvent>): SessionView {
  for (const event of events) apply(view, evolve(view, event))
  return view
}

/** A copy of a view whose messages and parts belong to another session (a fork's inheritance). */
export function rekey(view: SessionView, sessionId: string): SessionView {
  const messages = new Map<string, Message>()
  const parts = new Map<string, Part>()
  for (const [id, m] of view.messages) messages.set(id, copyWith(m, { sessionId }))
  for (const [id, p] of view.parts) parts.set(id, copyWith(p, { sessionId }))
  return { session: view.session, messages, parts }
}

/** Resolves the state a fork inherits: the parent's view right after `from.seq`. */
export type InheritFn = (from: { sessionId: string; seq: number }) => SessionView

/**
 * The state a session had right after event `upTo` (default: now), by
 * folding its log from the start; a fork starts from its parent's state at
 * the fork point (recursively). Time travel adds snapshots on top of this.
 */
export function foldSession(reader: EventReader, sessionId: string, upTo?: number): SessionView {
  return foldFrom(reader, sessionId, upTo, (from) => foldSession(reader, from.sessionId, from.seq))
}

/** foldSession with a pluggable way to resolve what a fork inherits (snapshots plug in here). */
export function foldFrom(
  reader: EventReader,
  sessionId: string,
  upTo: number | undefined,
  inherit: InheritFn,
): SessionView {
  let view = emptyView()
  let first = true
  for (const event of reader.iterateSession(sessionId, upTo === undefined ? {} : { upTo })) {
    if (first && event.type === 'session.forked') view = inheritedView(inherit, event)
    first = false
    apply(view, evolve(view, event))
  }
  if (view.session === null) {
    // upTo lies before a fork's first event: it is in the inherited prefix, whose state is the ancestor's.
    const start = reader.readSession(sessionId, { limit: 1 })[0]
    if (start?.type === 'session.forked' && upTo !== undefined && upTo <= start.data.from.seq) {
      return inherit({ sessionId: start.data.from.sessionId, seq: upTo })
    }
    throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
  }
  return view
}

/** The view a `session.forked` event starts from, before it is applied. */
export function inheritedView(inherit: InheritFn, event: StoredEvent): SessionView {
  if (event.type !== 'session.forked') throw new ChronicleError('INTERNAL', 'not a fork event')
  const parent = inherit(event.data.from)
  return rekey(parent, event.sessionId)
}
