import type { ExecuteOptions } from '../../src/commands/execute.js'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import type { StoredEvent } from '../../src/events/envelope.js'
import type { EventStore } from '../../src/events/store.js'
import type { Session } from '../../src/projections/fold/model.js'
import { getSession } from '../../src/projections/queries/read-model.js'

/**
 * The command path (src/commands/execute.ts) on SQLite's synchronous store, for fixtures that set a session up
 * before anything runs: the same decision on the session as read, appended with the version read. Tests of the
 * commands themselves call them through the ports.
 */
export function executeNow(
  store: EventStore,
  sessionId: string,
  decide: (session: Session | undefined) => readonly ChronicleEvent[],
  options: ExecuteOptions,
): StoredEvent[] {
  const state = getSession(store, sessionId)
  const events = decide(state)
  if (events.length === 0) return []
  return store.append(sessionId, events, {
    expectedVersion: state?.version ?? 0,
    meta: options.meta,
    ...(options.durability && { durability: options.durability }),
  })
}
