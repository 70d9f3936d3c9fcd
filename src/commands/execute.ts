import type { ChronicleEvent } from '../events/catalogue.js'
import type { EventMeta, StoredEvent } from '../events/envelope.js'
import { ChronicleError } from '../events/errors.js'
import type { EventLog } from '../events/log.js'
import type { Durability } from '../events/store.js'
import type { Session } from '../projections/fold/model.js'
import type { ReadModels } from '../projections/read-models.js'

/**
 * The one command path (docs/ARCHITECTURE.md "The write path"): read the
 * stream's state, decide purely, append the decided events with the version
 * that was read. A write in between (another command of this process while
 * the read was answered, another server on the same database) makes the
 * append a VERSION_CONFLICT, never a lost update: the command is decided
 * again on the newer state, as it would have been had it come a moment
 * later, up to ATTEMPTS times. Every client command and every runtime
 * decision that appends goes through here; only the model's streamed output
 * and what the run records beside it (runtime/loop/recorder.ts; the
 * workspace snapshots, runtime/workspace/snapshots.ts), recovery's
 * settlement (runtime/recovery/) and an import
 * (projections/transfer/export.ts) append on their own.
 */
/** Decides on the session as read; may await what the decision also depends on (an index over the log). */
export type Decide = (session: Session | undefined) => readonly ChronicleEvent[] | Promise<readonly ChronicleEvent[]>

export interface ExecuteOptions {
  readonly meta: EventMeta
  readonly durability?: Durability
  /** the decided events refer to no other session's queued appends (AppendOptions.alone) */
  readonly alone?: boolean
  /** a client's command: on a cluster any node may append it (AppendOptions.anyNode, docs/CLUSTER.md) */
  readonly anyNode?: boolean
}

export interface Executed {
  /** what was appended (nothing, when the decider decided so) */
  readonly events: StoredEvent[]
  /** the state the decision was made on */
  readonly state: Session | undefined
}

/** What a command needs of the store: either engine's (src/projections/store-ports.ts). */
export interface CommandPorts {
  readonly log: EventLog
  readonly readModels: ReadModels
}

/** Decisions made again after a conflicting write, before the conflict is the caller's. */
const ATTEMPTS = 5
/**
 * A client's command at a node that does not own the session (anyNode) races the owner's run, whose appends
 * (a model's stream) take no expected version and come every few ms: five quick attempts can all lose. It is
 * decided again, after a short random pause, for this long (found by the cluster harness, npm run test:cluster).
 */
const ANY_NODE_RETRY_MS = 5_000

export async function execute(
  ports: CommandPorts,
  sessionId: string,
  decide: Decide,
  options: ExecuteOptions,
): Promise<Executed> {
  const until = options.anyNode ? Date.now() + ANY_NODE_RETRY_MS : 0
  for (let attempt = 1; ; attempt++) {
    const state = await ports.readModels.session(sessionId)
    // What decide throws (a VERSION_CONFLICT of its own included) is the command's answer: it is not retried.
    const decided = await decide(state)
    if (decided.length === 0) return { events: [], state }
    try {
      const events = await ports.log.append(sessionId, decided, {
        expectedVersion: state?.version ?? 0,
        meta: options.meta,
        ...(options.durability && { durability: options.durability }),
        ...(options.alone && { alone: true }),
        ...(options.anyNode && { anyNode: true }),
      })
      return { events, state }
    } catch (err) {
      if (!(err instanceof ChronicleError && err.code === 'VERSION_CONFLICT')) throw err
      if (attempt >= ATTEMPTS && Date.now() >= until) throw err
      if (attempt >= ATTEMPTS) await new Promise((resolve) => setTimeout(resolve, Math.random() * 10))
    }
  }
}
