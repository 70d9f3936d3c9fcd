import type { ChronicleEvent } from '../events/catalogue.js'
import type { EventMeta } from '../events/envelope.js'
import { ChronicleError } from '../events/errors.js'
import type { Session } from '../projections/fold/model.js'
import { type CommandPorts, execute } from './execute.js'
import { assertWritable } from './read-only.js'

/**
 * Cancelling a run: the request is a durable fact (`run.cancel.requested`),
 * so a cancelled run is never resumed after a restart, and the runtime aborts
 * the run when it sees it committed. Cancelling an idle session, or one
 * already being cancelled, appends nothing.
 */
export async function cancelRun(
  ports: CommandPorts,
  sessionId: string,
  meta: EventMeta = { actor: 'user' },
): Promise<{ cancelled: boolean }> {
  const { events } = await execute(ports, sessionId, (session) => decideCancel(session, sessionId), {
    meta,
    durability: 'full',
    anyNode: true, // the node running the session aborts the run when it hears the request
  })
  return { cancelled: events.length > 0 }
}

export function decideCancel(session: Session | undefined, sessionId: string): ChronicleEvent[] {
  if (!session) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
  assertWritable(session)
  if (!session.run || session.run.cancelRequested) return []
  return [{ type: 'run.cancel.requested', data: { runId: session.run.runId } }]
}
