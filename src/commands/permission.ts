import type { ChronicleEvent, PermissionRule } from '../events/catalogue.js'
import { ChronicleError } from '../events/errors.js'
import type { IdSource } from '../events/ids.js'
import type { PendingPermission, Session } from '../projections/model.js'
import { assertWritable } from './read-only.js'

/**
 * Pure deciders for permission replies and durable approvals.
 *
 * - `once` lets the parked call run;
 * - `always` also adds a durable approval (`permission.rule.added`) for the
 *   request's "always" patterns (listable in Session.approvals, revocable);
 * - `reject` fails the call with the user's message (the model sees it) and
 *   rejects every other pending request of the session as well;
 * - `revoke` removes an approval by id.
 */
export type PermissionCommand =
  | { readonly type: 'reply'; readonly requestId: string; readonly reply: 'once' | 'always' | 'reject'; readonly message?: string }
  | { readonly type: 'revoke'; readonly ruleId: string }

export function decidePermission(
  command: PermissionCommand,
  session: Session | undefined,
  sessionId: string,
  ids: IdSource,
): ChronicleEvent[] {
  if (!session) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
  assertWritable(session)
  switch (command.type) {
    case 'reply': {
      const request = session.pendingPermissions.find((p) => p.requestId === command.requestId)
      if (!request) {
        throw new ChronicleError('PERMISSION_REQUEST_NOT_FOUND', `no pending permission request ${command.requestId} in ${sessionId}`)
      }
      const others = session.pendingPermissions.filter((p) => p.requestId !== command.requestId)
      const message = command.message?.trim() ? command.message : undefined
      const replied = (requestId: string, reply: 'once' | 'always' | 'reject', msg?: string): ChronicleEvent => ({
        type: 'permission.replied',
        data: { requestId, reply, ...(msg !== undefined && { message: msg }) },
      })
      if (command.reply === 'once') return [replied(request.requestId, 'once')]
      if (command.reply === 'reject') {
        return [replied(request.requestId, 'reject', message), ...others.map((o) => replied(o.requestId, 'reject', message))]
      }
      const rules = alwaysRules(request).filter(
        (rule) => !session.approvals.some((a) => a.permission === rule.permission && a.pattern === rule.pattern && a.action === 'allow'),
      )
      const added: ChronicleEvent[] = rules.map((rule) => ({ type: 'permission.rule.added', data: { ruleId: ids.next('rul'), rule } }))
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
  const patterns = Array.isArray(always) && always.every((p) => typeof p === 'string') ? (always as string[]) : request.patterns
  return [...new Set(patterns)].map((pattern) => ({ permission: request.permission, pattern, action: 'allow' as const }))
}
