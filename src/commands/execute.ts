import type { ChronicleEvent } from '../events/catalogue.js'
import type { EventMeta, StoredEvent } from '../events/envelope.js'
import type { Durability, EventStore } from '../events/store.js'
import type { Session } from '../projections/model.js'
import { getSession } from '../projections/read-model.js'

/**
 * The one command path: read the session's state, decide purely, append the
 * decided events with the version that was read. A concurrent write in
 * between is a VERSION_CONFLICT, never a lost update.
 */
export type Decide = (session: Session | undefined) => readonly ChronicleEvent[]

export interface ExecuteOptions {
  readonly meta: EventMeta
  readonly durability?: Durability
}

export function execute(store: EventStore, sessionId: string, decide: Decide, options: ExecuteOptions): StoredEvent[] {
  store.flush() // the read model must include everything queued before we read it
  const session = getSession(store.db, sessionId)
  const events = decide(session)
  return store.append(sessionId, events, {
    expectedVersion: session?.version ?? 0,
    meta: options.meta,
    ...(options.durability && { durability: options.durability }),
  })
}
