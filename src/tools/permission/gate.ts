import type { PermissionRule } from '../../events/catalogue.js'
import type { StoredEvent } from '../../events/envelope.js'
import type { IdSource } from '../../events/ids.js'
import type { EventStore } from '../../events/store.js'
import type { Session } from '../../projections/model.js'
import { getSession } from '../../projections/read-model.js'
import type { AgentDefinition } from '../agents.js'
import { type PermissionAsk, type PermissionGate, type PermissionScope, ToolFailure } from '../tool.js'
import { decide, lastMatch, type PermissionAction } from './evaluate.js'
import { defaultAlways, expandPatterns } from './bash-patterns.js'

/**
 * The permission gate (DESIGN §8): evaluate the rules; `allow` resolves,
 * `deny` rejects, `ask` appends `permission.requested` and parks the call
 * until a `permission.replied` for that request is committed.
 *
 * Waiting is keyed by (session, requestId) and fed by the store's commit
 * stream, not by in-memory state of the call that asked — so a gate created
 * after a restart can also wait for requests made before it (`waitForReply`).
 */
export interface PermissionGateDeps {
  readonly store: EventStore
  readonly ids: IdSource
  readonly agents: ReadonlyMap<string, AgentDefinition>
}

export interface Evaluation {
  readonly action: PermissionAction
  /** the patterns the rules saw (a bash command expanded into its sub-commands) */
  readonly patterns: readonly string[]
  /** for a deny: the pattern and rule that denied it */
  readonly denied?: { readonly pattern: string; readonly rule?: PermissionRule }
}

export interface PermissionGateHandle extends PermissionGate {
  /** the decision the rules give now, without asking */
  evaluate(scope: { sessionId: string; agent: string }, request: PermissionAsk): Evaluation
  /** resolves on a once/always reply, rejects ToolFailure('denied') on reject, ToolFailure('aborted') on abort */
  waitForReply(sessionId: string, requestId: string, signal?: AbortSignal): Promise<void>
  /** stops listening to the store; pending waits reject as aborted */
  close(): void
}

type Reply = StoredEvent & { type: 'permission.replied' }

interface Waiter {
  settle(reply: Reply['data']): void
}

export { defaultAlways }

export const DEFAULT_REJECT_MESSAGE =
  'The user rejected permission to use this tool call. Do not retry it as is; ask the user how to proceed if needed.'

export function createPermissionGate(deps: PermissionGateDeps): PermissionGateHandle {
  const { store, ids, agents } = deps
  const waiters = new Map<string, Set<Waiter>>()
  const key = (sessionId: string, requestId: string) => `${sessionId}\u0000${requestId}`

  const unsubscribe = store.onCommit((events) => {
    for (const e of events) {
      if (e.type !== 'permission.replied') continue
      const set = waiters.get(key(e.sessionId, e.data.requestId))
      if (!set) continue
      waiters.delete(key(e.sessionId, e.data.requestId))
      for (const w of set) w.settle(e.data)
    }
  })

  function sessionOf(sessionId: string): Session {
    store.flush() // the read model must include everything queued before we decide
    const session = getSession(store.db, sessionId)
    if (!session) throw new ToolFailure('failed', `no session ${sessionId}`)
    return session
  }

  function evaluateWith(session: Session, agentName: string, request: PermissionAsk): Evaluation {
    const agent = agents.get(agentName)
    const sources = { agent: agent?.rules ?? [], session: session.rules, approvals: session.approvals }
    const { patterns, complete } = expandPatterns(request)
    let action: PermissionAction = 'allow'
    for (const pattern of patterns) {
      const a = decide(request.permission, pattern, sources)
      if (a === 'deny') {
        const rule = lastMatch(request.permission, pattern, sources.agent, sources.session)
        return { action: 'deny', patterns, denied: { pattern, ...(rule && { rule }) } }
      }
      if (a === 'ask') action = 'ask'
    }
    // A command we could not fully parse is never auto-allowed.
    if (!complete && action === 'allow') action = 'ask'
    return { action, patterns }
  }

  function waitForReply(sessionId: string, requestId: string, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const k = key(sessionId, requestId)
      const onAbort = () => {
        waiters.get(k)?.delete(waiter)
        reject(new ToolFailure('aborted', 'The tool call was cancelled while waiting for permission.'))
      }
      const waiter: Waiter = {
        settle(reply) {
          signal?.removeEventListener('abort', onAbort)
          if (reply.reply === 'reject') reject(new ToolFailure('denied', reply.message || DEFAULT_REJECT_MESSAGE))
          else resolve()
        },
      }
      if (signal?.aborted) return onAbort()
      // Already replied (e.g. before a restart)? Settle from the log.
      const past = findReply(store, sessionId, requestId)
      if (past) return waiter.settle(past)
      let set = waiters.get(k)
      if (!set) waiters.set(k, (set = new Set()))
      set.add(waiter)
      signal?.addEventListener('abort', onAbort, { once: true })
    })
  }

  async function ask(scope: PermissionScope, request: PermissionAsk): Promise<void> {
    if (scope.abort.aborted) throw new ToolFailure('aborted', 'The tool call was cancelled.')
    const session = sessionOf(scope.sessionId)
    const evaluation = evaluateWith(session, scope.agent, request)
    if (evaluation.action === 'allow') return
    if (evaluation.action === 'deny') throw new ToolFailure('denied', deniedMessage(request.permission, evaluation))
    const requestId = ids.next('per')
    const always = request.always ?? defaultAlways(request)
    store.append(
      scope.sessionId,
      [
        {
          type: 'permission.requested',
          data: {
            requestId,
            ...(scope.partId && { partId: scope.partId }),
            ...(scope.callId && { callId: scope.callId }),
            permission: request.permission,
            patterns: [...request.patterns],
            metadata: { ...request.metadata, always: [...always] },
          },
        },
      ],
      { durability: 'full', meta: { actor: 'tool', ...(scope.callId && { call: scope.callId }), request: requestId } },
    )
    try {
      await waitForReply(scope.sessionId, requestId, scope.abort)
    } catch (err) {
      if (err instanceof ToolFailure && err.kind === 'aborted') closeAbandoned(scope.sessionId, requestId)
      throw err
    }
  }

  /** A cancelled call's request is closed, so the session does not stay `waiting` on it. */
  function closeAbandoned(sessionId: string, requestId: string): void {
    try {
      const session = sessionOf(sessionId)
      if (!session.pendingPermissions.some((p) => p.requestId === requestId)) return
      store.append(
        sessionId,
        [{ type: 'permission.replied', data: { requestId, reply: 'reject', message: 'cancelled: the tool call was aborted' } }],
        { expectedVersion: session.version, meta: { actor: 'runtime', request: requestId } },
      )
    } catch {
      // Someone replied or the session moved on in between: nothing left to close.
    }
  }

  return {
    ask,
    waitForReply,
    evaluate: (scope, request) => evaluateWith(sessionOf(scope.sessionId), scope.agent, request),
    check: (scope, request) => evaluateWith(sessionOf(scope.sessionId), scope.agent, request).action,
    close() {
      unsubscribe()
      for (const set of waiters.values()) for (const w of set) w.settle({ requestId: '', reply: 'reject', message: 'permission gate closed' })
      waiters.clear()
    },
  }
}

function deniedMessage(permission: string, evaluation: Evaluation): string {
  const d = evaluation.denied
  const rule = d?.rule ? ` (rule: ${d.rule.permission} ${JSON.stringify(d.rule.pattern)} deny)` : ''
  return `Permission denied: ${permission} ${JSON.stringify(d?.pattern ?? '')} is not allowed${rule}. Do not retry it; choose another approach or ask the user.`
}

function findReply(store: EventStore, sessionId: string, requestId: string): Reply['data'] | undefined {
  const seq = store.db
    .prepare(
      "SELECT seq FROM events WHERE session_id = ? AND type = 'permission.replied' AND json_extract(data, '$.requestId') = ? ORDER BY seq LIMIT 1",
    )
    .pluck()
    .get(sessionId, requestId) as number | undefined
  const event = seq === undefined ? undefined : store.get(seq)
  return event?.type === 'permission.replied' ? event.data : undefined
}
