import type { ChronicleEvent, PermissionRule } from '../events/catalogue.js'
import { ChronicleError } from '../events/errors.js'
import type { Session } from '../projections/fold/model.js'
import { assertWritable } from './read-only.js'

/** Pure deciders for the session lifecycle: decide(command, state) → events. */

export type SessionCommand =
  | {
      readonly type: 'create'
      readonly directory: string
      readonly agent: string
      readonly model: string | null
      readonly title?: string
      readonly parent?: { sessionId: string; callId: string; agent?: string }
      readonly rules?: PermissionRule[]
    }
  | { readonly type: 'rename'; readonly title: string }
  | { readonly type: 'archive' }
  | { readonly type: 'unarchive' }
  | { readonly type: 'set-rules'; readonly rules: PermissionRule[] }

export function decideSession(
  command: SessionCommand,
  session: Session | undefined,
  sessionId: string,
): ChronicleEvent[] {
  if (command.type === 'create') {
    // a second session.created would reset the session when folded
    if (session) throw new ChronicleError('VERSION_CONFLICT', `session ${sessionId} already exists`)
    const { directory, agent, model, title, parent, rules } = command
    return [
      {
        type: 'session.created',
        data: { directory, agent, model, ...(title && { title }), ...(parent && { parent }), ...(rules && { rules }) },
      },
    ]
  }
  if (!session) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
  switch (command.type) {
    case 'rename':
      assertWritable(session)
      return [{ type: 'session.renamed', data: { title: command.title } }]
    case 'archive':
      // allowed for an imported session too: archiving only hides it from the listing
      return session.archived ? [] : [{ type: 'session.archived', data: {} }]
    case 'unarchive':
      return session.archived ? [{ type: 'session.unarchived', data: {} }] : []
    case 'set-rules':
      assertWritable(session)
      return [{ type: 'session.rules.changed', data: { rules: command.rules } }]
    default: {
      const unknown: never = command
      throw new ChronicleError('BAD_REQUEST', `unknown session command ${JSON.stringify(unknown)}`)
    }
  }
}
