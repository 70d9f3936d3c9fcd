import type { ChronicleEvent } from '../events/catalogue.js'
import { ChronicleError } from '../events/errors.js'
import type { Session } from '../projections/model.js'
import { assertWritable } from './read-only.js'

/**
 * Cancelling a run: the request is a durable fact (`run.cancel.requested`),
 * so a cancelled run is never resumed after a restart. Cancelling an idle
 * session, or one already being cancelled, appends nothing.
 */
export function decideCancel(session: Session | undefined, sessionId: string): ChronicleEvent[] {
  if (!session) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
  assertWritable(session)
  if (!session.run || session.run.cancelRequested) return []
  return [{ type: 'run.cancel.requested', data: { runId: session.run.runId } }]
}
