import type { EventStore } from '../../src/events/store.js'
import { foldSession } from '../../src/projections/fold/fold.js'
import type { SessionView } from '../../src/projections/fold/model.js'
import type { SessionState } from '../../src/projections/time-travel/time-travel.js'

/** A view as stateAt returns it (entities ordered by id), through JSON like the stored read models. */
export function asState(view: SessionView, seq: number): unknown {
  const byId = <T extends { id: string }>(m: Map<string, T>) =>
    [...m.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  return JSON.parse(
    JSON.stringify({ session: view.session, messages: byId(view.messages), parts: byId(view.parts), seq }),
  )
}

export function json(state: SessionState): unknown {
  return JSON.parse(JSON.stringify(state))
}

/** The plain fold (no snapshots) of the session that owns `seq`, as a state. */
export function plainStateAt(store: EventStore, ownerId: string, seq: number): unknown {
  return asState(foldSession(store, ownerId, seq), seq)
}

export function snapshotRows(store: EventStore): number {
  return store.asCommitted.reader().prepare('SELECT COUNT(*) FROM snapshots').pluck().get() as number
}
