import type { ChronicleEvent } from '../events/catalogue.js'
import type { EventMeta } from '../events/envelope.js'
import { ChronicleError } from '../events/errors.js'
import type { IdSource } from '../events/ids.js'
import type { EventLog } from '../events/log.js'
import type { EventStore } from '../events/store.js'
import type { ReadModels } from '../projections/read-models.js'
import type { TimeTravel } from '../projections/time-travel/port.js'
import type { Session, SessionView } from '../projections/fold/model.js'
import { getSession, requireSession } from '../projections/queries/read-model.js'
import { type TimeTravelOptions, viewAt } from '../projections/time-travel/time-travel.js'
import { checkDirectory } from './directory.js'
import { execute } from './execute.js'
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
 *
 * `directory` (an existing absolute directory) is where the child works; by
 * default the parent's. A fork of imported history — the session forked is
 * imported, or the fork point is an event of an imported session (a seq a
 * fork inherited from one) — requires it (DIRECTORY_REQUIRED): the imported
 * directory is never used. Its `session.forked` carries `fromImport`, so the
 * child starts with no rules, approvals or queued inputs of the file's.
 */
export interface ForkOptions extends TimeTravelOptions {
  readonly title?: string
  readonly directory?: string
  readonly meta?: EventMeta
}

export interface ForkDecision {
  readonly title?: string
  readonly directory?: string
  /** the fork point is imported history */
  readonly fromImport?: boolean
}

/** The pure half: the child's first events, given the parent's state at the fork point. */
export function decideFork(
  parentAtSeq: SessionView,
  from: { sessionId: string; seq: number },
  decision: ForkDecision = {},
): ChronicleEvent[] {
  const { title, directory, fromImport } = decision
  if (fromImport && directory === undefined) {
    throw new ChronicleError(
      'DIRECTORY_REQUIRED',
      `session ${from.sessionId} at seq ${from.seq} is imported history: a fork of it needs a directory to work in (its imported directory is not used)`,
      { sessionId: from.sessionId, seq: from.seq },
    )
  }
  const data = {
    from,
    ...(title !== undefined && { title }),
    ...(directory !== undefined && { directory }),
    ...(fromImport && { fromImport: true as const }),
  }
  // Rekeying keeps entity ids, so what is open in the parent's view is what is open in the child.
  return [{ type: 'session.forked', data }, ...settleInFlight(parentAtSeq, FORK_SETTLEMENT)]
}

/** The parent's state at the fork point, and whether that is imported history. */
export interface ForkPoint {
  readonly parent: SessionView
  readonly fromImport: boolean
}

/** Reads the fork point (SESSION_NOT_FOUND / SEQ_OUT_OF_RANGE), what is queued included. */
export function readForkPoint(
  store: EventStore,
  sessionId: string,
  atSeq: number,
  travel: TimeTravelOptions = {},
): ForkPoint {
  const parent = viewAt(store, sessionId, atSeq, travel)
  // At an inherited seq the view is the ancestor's (its id is the owner of the fork point).
  return { parent, fromImport: isImported(store, sessionId) || isImported(store, parent.session?.id) }
}

/** Appends a new session's first events (a new id: VERSION_CONFLICT should it exist). */
export function appendFork(
  store: EventStore,
  childId: string,
  events: readonly ChronicleEvent[],
  meta?: EventMeta,
): Session {
  execute(
    store,
    childId,
    (child) => {
      if (child) throw new ChronicleError('VERSION_CONFLICT', `session ${childId} already exists`)
      return events
    },
    { durability: 'full', meta: meta ?? { actor: 'user', command: 'fork' } },
  )
  return requireSession(store, childId)
}

/** A fork of the history (a fork with files: src/runtime/workspace/forks.ts, on the same two steps). */
export function fork(
  store: EventStore,
  ids: IdSource,
  sessionId: string,
  atSeq: number,
  options: ForkOptions = {},
): Session {
  const { title, directory, meta, ...travel } = options
  const { parent, fromImport } = readForkPoint(store, sessionId, atSeq, travel)
  const events = forkEvents(parent, { sessionId, seq: atSeq }, options, fromImport)
  return appendFork(store, ids.next('ses'), events, meta)
}

/** What fork needs of a store through the ports (docs/ARCHITECTURE.md "The store port"): either engine's. */
export interface ForkPorts {
  readonly log: EventLog
  readonly readModels: ReadModels
  readonly timeTravel: TimeTravel
}

/** fork through the ports: the same decision, the child appended as a new stream (expected version 0). */
export async function forkThrough(
  ports: ForkPorts,
  ids: IdSource,
  sessionId: string,
  atSeq: number,
  options: Omit<ForkOptions, keyof TimeTravelOptions> = {},
): Promise<Session> {
  const parent = await ports.timeTravel.viewAt(sessionId, atSeq)
  const imported = async (id: string | undefined) =>
    id !== undefined && (await ports.readModels.session(id))?.imported !== undefined
  const fromImport = (await imported(sessionId)) || (await imported(parent.session?.id))
  const events = forkEvents(parent, { sessionId, seq: atSeq }, options, fromImport)
  const childId = ids.next('ses')
  await ports.log.append(childId, events, {
    expectedVersion: 0,
    durability: 'full',
    meta: options.meta ?? { actor: 'user', command: 'fork' },
  })
  return (await ports.readModels.session(childId)) as Session
}

/** The child's first events for a fork with these options (its directory checked first). */
function forkEvents(
  parent: SessionView,
  from: { sessionId: string; seq: number },
  { title, directory }: ForkOptions,
  fromImport: boolean,
): ChronicleEvent[] {
  if (directory !== undefined) checkDirectory(directory)
  return decideFork(parent, from, {
    ...(title !== undefined && { title }),
    ...(directory !== undefined && { directory }),
    fromImport,
  })
}

function isImported(store: EventStore, sessionId: string | undefined): boolean {
  return sessionId !== undefined && getSession(store, sessionId)?.imported !== undefined
}
