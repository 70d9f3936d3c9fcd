import type { ChronicleEvent, DataOf, ElicitationValue } from '../events/catalogue.js'
import type { EventMeta } from '../events/envelope.js'
import { ChronicleError } from '../events/errors.js'
import type { Session } from '../projections/fold/model.js'
import { type CommandPorts, type Executed, execute } from './execute.js'
import { assertWritable } from './read-only.js'

/**
 * MCP elicitations (docs/TOOLS.md "Elicitation"): the decider and the command
 * every path uses (the runtime's bridge asking, a client answering, the
 * runtime closing one whose call was aborted).
 *
 * - `request` parks the server's question: `elicitation.requested`;
 * - `answer` closes it with the user's action; an accepted answer's content
 *   gets the schema's defaults, then must be valid against the requested
 *   schema (ELICITATION_INVALID otherwise, and nothing is appended);
 * - `abandon` closes it `cancel` with a reason (nothing if it is no longer pending).
 *
 * What a form's content must be is the MCP spec's (src/tools/mcp/elicitation-content.ts): it comes in as
 * `check`, a pure function, since commands do not import tools.
 */
export type ContentCheck = (
  schema: Record<string, unknown>,
  content: Record<string, unknown>,
) =>
  | { readonly ok: true; readonly content: Record<string, ElicitationValue> }
  | { readonly ok: false; readonly problems: readonly string[] }

export type ElicitationCommand =
  | { readonly type: 'request'; readonly request: DataOf<'elicitation.requested'> }
  | {
      readonly type: 'answer'
      readonly elicitationId: string
      readonly action: 'accept' | 'decline' | 'cancel'
      readonly content?: Record<string, unknown>
    }
  | { readonly type: 'abandon'; readonly elicitationId: string; readonly reason: string }

/** Decides and appends an elicitation command (FULL: an answer acknowledges something to a client). */
export async function elicitationCommand(
  ports: CommandPorts,
  sessionId: string,
  command: ElicitationCommand,
  meta: EventMeta,
  check: ContentCheck,
): Promise<Executed> {
  return execute(ports, sessionId, (session) => decideElicitation(command, session, sessionId, check), {
    meta,
    durability: 'full',
    anyNode: command.type === 'answer', // the user's, taken by whichever node they reached
  })
}

export function decideElicitation(
  command: ElicitationCommand,
  session: Session | undefined,
  sessionId: string,
  check: ContentCheck,
): ChronicleEvent[] {
  if (!session) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
  assertWritable(session)
  const pending = session.pendingElicitations ?? []
  switch (command.type) {
    case 'request':
      return [{ type: 'elicitation.requested', data: command.request }]
    case 'abandon':
      if (!pending.some((e) => e.elicitationId === command.elicitationId)) return []
      return [
        {
          type: 'elicitation.answered',
          data: { elicitationId: command.elicitationId, action: 'cancel', reason: command.reason },
        },
      ]
    case 'answer': {
      const request = pending.find((e) => e.elicitationId === command.elicitationId)
      if (!request) {
        throw new ChronicleError(
          'ELICITATION_NOT_FOUND',
          `no pending elicitation ${command.elicitationId} in ${sessionId} (unknown, or already answered)`,
        )
      }
      const { elicitationId, action } = command
      if (action !== 'accept') {
        if (command.content !== undefined) {
          throw new ChronicleError('ELICITATION_INVALID', `content is sent only with action accept, not ${action}`)
        }
        return [{ type: 'elicitation.answered', data: { elicitationId, action } }]
      }
      const checked = check(request.requestedSchema, command.content ?? {})
      if (!checked.ok) {
        throw new ChronicleError(
          'ELICITATION_INVALID',
          `the content does not match the requested schema: ${checked.problems.join('; ')}`,
        )
      }
      return [{ type: 'elicitation.answered', data: { elicitationId, action, content: checked.content } }]
    }
    default: {
      const unknown: never = command
      throw new ChronicleError('BAD_REQUEST', `unknown elicitation command ${JSON.stringify(unknown)}`)
    }
  }
}
