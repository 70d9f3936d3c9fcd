import type { ChronicleEvent } from '../events/catalogue.js'
import { ChronicleError } from '../events/errors.js'
import type { IdSource } from '../events/ids.js'
import type { EventStore } from '../events/store.js'
import type { Session } from '../projections/model.js'
import { getSession } from '../projections/read-model.js'
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

/** Appends the request (FULL durability) and says which compaction will run. */
export function requestCompaction(store: EventStore, ids: IdSource, sessionId: string): CompactRequested {
  store.flush()
  const session = getSession(store.db, sessionId)
  const events = decideCompact(session, sessionId, ids.next('cmp'))
  const requested = events[0]
  if (!requested || requested.type !== 'compaction.requested') {
    const c = session?.compaction
    return { compactionId: c?.compactionId ?? '', seq: session?.lastSeq ?? 0, duplicate: true }
  }
  const [stored] = store.append(sessionId, events, {
    expectedVersion: session?.version ?? 0,
    durability: 'full',
    meta: { actor: 'user', command: 'compact' },
  })
  return { compactionId: requested.data.compactionId, seq: stored?.seq ?? 0, duplicate: false }
}
