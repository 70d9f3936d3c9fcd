import type { ChronicleEvent, DataOf, PermissionRule } from '../events/catalogue.js'
import type { EventMeta } from '../events/envelope.js'
import { ChronicleError } from '../events/errors.js'
import type { IdSource } from '../events/ids.js'
import type { PendingPermission, Session } from '../projections/fold/model.js'
import { type CommandPorts, type Executed, execute } from './execute.js'
import { assertWritable } from './read-only.js'

/**
 * Permission requests, replies and durable approvals: the decider and the
 * command every path uses (a client's reply, the permission gate's request).
 *
 * - `request` parks a call: `permission.requested` (the gate decided to ask);
 * - `once` lets the parked call run;
 * - `always` also adds a durable approval (`permission.rule.added`) for the
 *   request's "always" patterns (listable in Session.approvals, revocable);
 * - `reject` fails the call with the user's message (the model sees it) and
 *   rejects every other pending request of the session as well;
 * - `abandon` closes a request whose call was cancelled (nothing if it is no longer pending);
 * - `revoke` removes an approval by id.
 */
export type PermissionCommand =
  | { readonly type: 'request'; readonly request: DataOf<'permission.requested'> }
  | {
      readonly type: 'reply'
      readonly requestId: string
      readonly reply: 'once' | 'always' | 'reject'
      readonly message?: string
    }
  | { readonly type: 'abandon'; readonly requestId: string; readonly message: string }
  | { readonly type: 'revoke'; readonly ruleId: string }

/** Decides and appends a permission command (FULL: a reply acknowledges something to a client). */
export async function permissionCommand(
  ports: CommandPorts,
  ids: IdSource,
  sessionId: string,
  command: PermissionCommand,
  meta: EventMeta,
): Promise<Executed> {
  return execute(ports, sessionId, (session) => decidePermission(command, session, sessionId, ids), {
    meta,
    durability: 'full',
    // a reply or a revocation is the user's, taken by whichever node they reached; a request is the run's
    anyNode: command.type === 'reply' || command.type === 'revoke',
  })
}

export function decidePermission(
  command: PermissionCommand,
  session: Session | undefined,
  sessionId: string,
  ids: IdSource,
): ChronicleEvent[] {
  if (!session) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
  assertWritable(session)
  switch (command.type) {
    case 'request':
      return [{ type: 'permission.requested', data: command.request }]
    case 'abandon':
      if (!session.pendingPermissions.some((p) => p.requestId === command.requestId)) return []
      return [
        {
          type: 'permission.replied',
          data: { requestId: command.requestId, reply: 'reject', message: command.message },
        },
      ]
    case 'reply': {
      const request = session.pendingPermissions.find((p) => p.requestId === command.requestId)
      if (!request) {
        throw new ChronicleError(
          'PERMISSION_REQUEST_NOT_FOUND',
          `no pending permission request ${command.requestId} in ${sessionId}`,
        )
      }
      const others = session.pendingPermissions.filter((p) => p.requestId !== command.requestId)
      const message = command.message?.trim() ? command.message : undefined
      const replied = (requestId: string, reply: 'once' | 'always' | 'reject', msg?: string): ChronicleEvent => ({
        type: 'permission.replied',
        data: { requestId, reply, ...(msg !== undefined && { message: msg }) },
      })
      if (command.reply === 'once') return [replied(request.requestId, 'once')]
      if (command.reply === 'reject') {
        return [
          replied(request.requestId, 'reject', message),
          ...others.map((o) => replied(o.requestId, 'reject', message)),
        ]
      }
      const rules = alwaysRules(request).filter(
        (rule) =>
          !session.approvals.some(
            (a) => a.permission === rule.permission && a.pattern === rule.pattern && a.action === 'allow',
          ),
      )
      const added: ChronicleEvent[] = rules.map((rule) => ({
        type: 'permission.rule.added',
        data: { ruleId: ids.next('rul'), rule },
      }))
      // Other pending requests stay pending: each is the user's own decision.
      return [replied(request.requestId, 'always'), ...added]
    }
    case 'revoke': {
      if (!session.approvals.some((r) => r.ruleId === command.ruleId)) {
        throw new ChronicleError('RULE_NOT_FOUND', `no approval ${command.ruleId} in ${sessionId}`)
      }
      return [{ type: 'permission.rule.removed', data: { ruleId: command.ruleId } }]
    }
    default: {
      const unknown: never = command
      throw new ChronicleError('BAD_REQUEST', `unknown permission command ${JSON.stringify(unknown)}`)
    }
  }
}

/** The allow rules an "always" reply adds: the request's `metadata.always` patterns, else its patterns. */
export function alwaysRules(request: PendingPermission): PermissionRule[] {
  const always = request.metadata?.['always']
  const patterns =
    Array.isArray(always) && always.every((p) => typeof p === 'string') ? (always as string[]) : request.patterns
  return [...new Set(patterns)].map((pattern) => ({
    permission: request.permission,
    pattern,
    action: 'allow' as const,
  }))
}
