import type { ChronicleEvent } from '../events/catalogue.js'
import type { EventMeta } from '../events/envelope.js'
import { ChronicleError } from '../events/errors.js'
import type { IdSource } from '../events/ids.js'
import type { Session } from '../projections/fold/model.js'
import { type CommandPorts, execute } from './execute.js'
import { assertWritable } from './read-only.js'

/**
 * Manual compaction (the user's "compact now"): a durable request,
 * `compaction.requested {reason: 'manual'}`, that the runtime performs at the
 * session's next step boundary — at once when it is idle. A compaction
 * already requested or running is not requested twice. Manual compaction
 * works even when automatic compaction is off (`compaction.auto: false`).
 */

export function decideCompact(session: Session | undefined, sessionId: string, compactionId: string): ChronicleEvent[] {
  if (!session) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
  assertWritable(session)
  if (session.archived) throw new ChronicleError('SESSION_ARCHIVED', `session ${sessionId} is archived`)
  const c = session.compaction
  if (c && (c.status === 'requested' || c.status === 'running')) return []
  return [{ type: 'compaction.requested', data: { compactionId, reason: 'manual' } }]
}

export interface CompactRequested {
  readonly compactionId: string
  /** seq of compaction.requested (of the one already in flight when `duplicate`) */
  readonly seq: number
  readonly duplicate: boolean
}

/** Appends the request (FULL durability) and says which compaction will run; waking the run is the caller's next step. */
export async function requestCompaction(
  ports: CommandPorts,
  ids: IdSource,
  sessionId: string,
  by: Partial<EventMeta> = {},
): Promise<CompactRequested> {
  const compactionId = ids.next('cmp')
  const { events, state } = await execute(
    ports,
    sessionId,
    (session) => decideCompact(session, sessionId, compactionId),
    {
      durability: 'full',
      anyNode: true, // the node running the session performs it when it hears the request
      meta: { actor: 'user', command: 'compact', ...by },
    },
  )
  const [stored] = events
  if (!stored) return { compactionId: state?.compaction?.compactionId ?? '', seq: state?.lastSeq ?? 0, duplicate: true }
  return { compactionId, seq: stored.seq, duplicate: false }
}
