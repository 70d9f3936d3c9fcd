import type { EventStore } from '../../events/store.js'
import type { InheritFn } from '../fold/fold.js'
import { type Located, locate } from './lineage.js'
import type { Message, Part, Session, SessionView } from '../fold/model.js'
import { SnapshotFold } from './snapshot-fold.js'

/**
 * Time travel: a session exactly as it was right after any event of its
 * history — mid-stream too — by the same evolve the live projection runs.
 *
 * Cost is bounded by the snapshot cache (snapshots.ts): merge the session's
 * chain of delta rows up to the event, then fold at most `snapshotEvery`
 * events from the log. Folding writes the rows it passes, so the cache fills
 * itself; it is never required — with the table empty the answer is the same,
 * only slower.
 */

export const DEFAULT_SNAPSHOT_EVERY = 1000

export interface TimeTravelOptions {
  /** while folding, record a snapshot row every this many of a session's events (0: never write) */
  readonly snapshotEvery?: number
}

/**
 * What time travel keeps per store: its defaults (set by openStore) and the
 * last state it computed. The state at an event never changes (the log is
 * immutable), so that answer can be reused — fork computes it, then the
 * projector asks again. Only answers computed outside a transaction are
 * kept: a rolled-back transaction may have held events whose seqs get reused.
 */
interface TimeTravelState {
  options: TimeTravelOptions
  recent: { sessionId: string; seq: number; view: SessionView } | undefined
}

const TIME_TRAVEL = Symbol('time travel')
const stateOf = (store: EventStore) =>
  store.local<TimeTravelState>(TIME_TRAVEL, () => ({ options: {}, recent: undefined }))

/** Sets the store's time-travel defaults (openStore does this with its options). */
export function configureTimeTravel(store: EventStore, options: TimeTravelOptions): void {
  stateOf(store).options = options
}

function every(store: EventStore, options: TimeTravelOptions): number {
  return options.snapshotEvery ?? stateOf(store).options.snapshotEvery ?? DEFAULT_SNAPSHOT_EVERY
}

export interface SessionState {
  readonly session: Session
  /** ordered by id, like the stored read models */
  readonly messages: Message[]
  readonly parts: Part[]
  /** the event the state is right after */
  readonly seq: number
}

/**
 * The session's state right after event `seq` (default: its latest event).
 * `seq` must be an event of the session's history: its own, or for a fork an
 * inherited one — then the answer is the ancestor's state at that event (the
 * fork did not exist yet). Otherwise SEQ_OUT_OF_RANGE; unknown session:
 * SESSION_NOT_FOUND.
 */
export function stateAt(
  store: EventStore,
  sessionId: string,
  seq?: number,
  options: TimeTravelOptions = {},
): SessionState {
  const at = locate(store, sessionId, seq)
  return stateOfView(ownViewAt(store, at, options), at.seq)
}

/** A view as a SessionState right after `seq`: its messages and parts ordered by id. */
export function stateOfView(view: SessionView, seq: number): SessionState {
  return { session: view.session as Session, messages: byId(view.messages), parts: byId(view.parts), seq }
}

/**
 * stateAt as a SessionView (maps). The view may be shared with a cache: treat
 * it as read-only (fold.rekey copies it).
 */
export function viewAt(
  store: EventStore,
  sessionId: string,
  seq?: number,
  options: TimeTravelOptions = {},
): SessionView {
  return ownViewAt(store, locate(store, sessionId, seq), options)
}

/** How openStore resolves a fork's inherited state: snapshot-accelerated, so a fork costs the same at any log length. */
export function snapshotInherit(store: EventStore, options: TimeTravelOptions = {}): InheritFn {
  return (from) => viewAt(store, from.sessionId, from.seq, options)
}

/** Brings a session's snapshot chain up to date (e.g. after a long run), so the next stateAt or fork is fast. */
export function ensureSnapshots(store: EventStore, sessionId: string, options: TimeTravelOptions = {}): void {
  viewAt(store, sessionId, undefined, options)
}

/**
 * Drops the snapshot cache and derives it again from the log, for every
 * session with at least `snapshotEvery` events (the cache is never needed
 * for a correct answer; this only makes the next answers fast again).
 */
export function rebuildSnapshots(
  store: EventStore,
  options: TimeTravelOptions = {},
): { sessions: number; rows: number } {
  const db = store.reader()
  const k = every(store, options)
  db.exec('DELETE FROM snapshots')
  stateOf(store).recent = undefined
  const ids = db.prepare('SELECT session_id FROM events WHERE version = ?').pluck().all(Math.max(k, 1)) as string[]
  if (k > 0) for (const id of ids) ensureSnapshots(store, id, options)
  return { sessions: ids.length, rows: db.prepare('SELECT COUNT(*) FROM snapshots').pluck().get() as number }
}

function ownViewAt(store: EventStore, at: Located, options: TimeTravelOptions): SessionView {
  const state = stateOf(store)
  const hit = state.recent
  if (hit && hit.sessionId === at.sessionId && hit.seq === at.seq) return hit.view
  const view = foldWithSnapshots(store, at, options)
  if (!store.asCommitted.reader().inTransaction) state.recent = { sessionId: at.sessionId, seq: at.seq, view }
  return view
}

function foldWithSnapshots(store: EventStore, at: Located, options: TimeTravelOptions): SessionView {
  const inherit: InheritFn = (from) => viewAt(store, from.sessionId, from.seq, options)
  return new SnapshotFold(store, at.sessionId, at.version, every(store, options), inherit).advance(at.version)
}

function byId<T extends { id: string }>(map: Map<string, T>): T[] {
  return [...map.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}
