import type { ChronicleEvent } from '../events/catalogue.js'
import type { EventMeta } from '../events/envelope.js'
import { ChronicleError } from '../events/errors.js'
import type { IdSource } from '../events/ids.js'
import type { Session, SessionView } from '../projections/fold/model.js'
import type { StorePorts } from '../projections/store-ports.js'
import { checkDirectory } from './directory.js'
import type { CommandPorts } from './execute.js'
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
export interface ForkOptions {
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
export async function readForkPoint(ports: StorePorts, sessionId: string, atSeq: number): Promise<ForkPoint> {
  const parent = await ports.timeTravel.viewAt(sessionId, atSeq)
  const imported = async (id: string | undefined) =>
    id !== undefined && (await ports.readModels.session(id))?.imported !== undefined
  // At an inherited seq the view is the ancestor's (its id is the owner of the fork point).
  return { parent, fromImport: (await imported(sessionId)) || (await imported(parent.session?.id)) }
}

/** Appends a new session's first events (a new id: VERSION_CONFLICT should it exist). */
export async function appendFork(
  ports: CommandPorts,
  childId: string,
  events: readonly ChronicleEvent[],
  meta?: EventMeta,
): Promise<Session> {
  await ports.log.append(childId, events, {
    expectedVersion: 0,
    durability: 'full',
    meta: meta ?? { actor: 'user', command: 'fork' },
  })
  return (await ports.readModels.session(childId)) as Session
}

/** A fork of the history (a fork with files: src/runtime/workspace/forks.ts, on the same two steps). */
export async function fork(
  ports: StorePorts,
  ids: IdSource,
  sessionId: string,
  atSeq: number,
  options: ForkOptions = {},
): Promise<Session> {
  const { parent, fromImport } = await readForkPoint(ports, sessionId, atSeq)
  const events = forkEvents(parent, { sessionId, seq: atSeq }, options, fromImport)
  return appendFork(ports, ids.next('ses'), events, options.meta)
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
