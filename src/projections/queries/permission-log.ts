import type { DataOf } from '../../events/catalogue.js'
import type { EventStore } from '../../events/store.js'
import { prepared } from '../rows/prepared.js'

/**
 * Permission requests and replies as the log has them — for the gate and the
 * resumed run, which must find a reply given before a restart (the read
 * model keeps only what is still pending).
 */

export type PermissionReply = DataOf<'permission.replied'>

/** The first reply to a request, if any. */
export function replyTo(store: EventStore, sessionId: string, requestId: string): PermissionReply | undefined {
  const seq = prepared(
    store.reader(sessionId),
    "SELECT seq FROM events WHERE session_id = ? AND type = 'permission.replied' AND json_extract(data, '$.requestId') = ? ORDER BY seq LIMIT 1",
    true,
  ).get(sessionId, requestId) as number | undefined
  const event = seq === undefined ? undefined : store.get(seq)
  return event?.type === 'permission.replied' ? event.data : undefined
}

/** The id of the latest request a tool part made, if any. */
export function lastRequestOf(store: EventStore, sessionId: string, partId: string): string | undefined {
  return prepared(
    store.reader(sessionId),
    "SELECT data ->> '$.requestId' FROM events WHERE session_id = ? AND type = 'permission.requested' AND data ->> '$.partId' = ? ORDER BY seq DESC LIMIT 1",
    true,
  ).get(sessionId, partId) as string | undefined
}
