import type { EventStore } from '../../events/store.js'
import type { SessionView } from '../fold/model.js'
import { type HistoryPage, type HistoryQuery, history } from '../queries/history.js'
import { type SessionState, stateAt, type TimeTravelOptions, viewAt } from './time-travel.js'

/**
 * Time travel as a port (docs/ARCHITECTURE.md "The store port"): a session's
 * state at any event of its history, and that history paged by seq.
 * Asynchronous because PostgreSQL answers over the network; SQLite's answers
 * at once (`sqliteTimeTravel`), PostgreSQL's on its pool
 * (`postgresTimeTravel`, src/projections/postgres/time-travel.ts). Both read
 * their own writes. One contract suite runs on both
 * (test/time-travel/time-travel-contract.ts).
 */
export interface TimeTravel {
  /** right after event `seq` (default: the latest); SESSION_NOT_FOUND, SEQ_OUT_OF_RANGE */
  stateAt(sessionId: string, seq?: number): Promise<SessionState>
  /** stateAt as a view (maps): what a fork starts from. Read-only: it may be shared with a cache. */
  viewAt(sessionId: string, seq?: number): Promise<SessionView>
  history(sessionId: string, query?: HistoryQuery): Promise<HistoryPage>
}

export function sqliteTimeTravel(store: EventStore, options: TimeTravelOptions = {}): TimeTravel {
  return {
    stateAt: async (sessionId, seq) => stateAt(store, sessionId, seq, options),
    viewAt: async (sessionId, seq) => viewAt(store, sessionId, seq, options),
    history: async (sessionId, query) => history(store, sessionId, query),
  }
}
