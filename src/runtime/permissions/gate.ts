import { permissionCommand } from '../../commands/permission.js'
import type { PermissionRule } from '../../events/catalogue.js'
import type { IdSource } from '../../events/ids.js'
import type { DataOf } from '../../events/catalogue.js'
import type { CommandPorts } from '../../commands/execute.js'
import type { Session } from '../../projections/fold/model.js'
import type { AgentDefinition } from '../../tools/agents.js'
import {
  type PermissionAsk,
  type PermissionChecker,
  type PermissionDecision,
  type PermissionGate,
  type PermissionScope,
  ToolFailure,
} from '../../tools/tool.js'
import { ruleDecision, lastMatch, type PermissionAction } from '../../tools/permission/evaluate.js'
import { defaultAlways, expandPatterns } from '../../tools/permission/bash-patterns.js'
import { wildcardMatch } from '../../tools/permission/wildcard.js'

/**
 * The permission gate (docs/TOOLS.md, docs/SECURITY.md): evaluate the rules;
 * `allow` resolves, `deny` rejects, `ask` appends `permission.requested` and
 * parks the call until a `permission.replied` for that request is committed.
 *
 * Delegation never widens permission. Inside a sub-agent every decision is
 * the stricter of the child's own rules and its parent's at that moment,
 * recursively up the chain (deny > ask > allow); approvals the user gave
 * anywhere in the chain can lift an `ask`, never a `deny`. A child's `ask` is
 * raised in the top session of the chain (the one a user watches) with
 * `from` naming the child's session and call, so it is seen and answered there.
 *
 * Waiting is keyed by (session, requestId) and fed by the store's commit
 * stream, not by in-memory state of the call that asked — so a gate created
 * after a restart can also wait for requests made before it (`waitForReply`).
 */
export interface PermissionGateDeps {
  /** where sessions and replies are read, and the permission commands append */
  readonly ports: CommandPorts
  readonly ids: IdSource
  readonly agents: ReadonlyMap<string, AgentDefinition>
}

/**
 * A scope as the loop gives it: with the calling session as committed, read from the view the loop holds —
 * no read of the store, so on PostgreSQL a call's `tool.called` still commits with its end. Else the gate
 * reads the session.
 */
export interface LoopScope extends PermissionScope {
  readonly session?: () => Promise<Session | null>
}

/** One session of a sub-agent chain, with the agent acting in it. */
export interface Level {
  readonly session: Session
  readonly agent: string
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
  evaluate(scope: { sessionId: string; agent: string }, request: PermissionAsk): Promise<Evaluation>
  /** resolves on a once/always reply, rejects ToolFailure('denied') on reject, ToolFailure('aborted') on abort */
  waitForReply(sessionId: string, requestId: string, signal?: AbortSignal): Promise<void>
  /** stops listening to the store; pending waits reject as aborted */
  close(): void
}

type PermissionReply = DataOf<'permission.replied'>

interface Waiter {
  settle(reply: PermissionReply): void
}

export { defaultAlways }

export const DEFAULT_REJECT_MESSAGE =
  'The user rejected permission to use this tool call. Do not retry it as is; ask the user how to proceed if needed.'

const GATE_CLOSED: PermissionReply = { requestId: '', reply: 'reject', message: 'permission gate closed' }

export function createPermissionGate(deps: PermissionGateDeps): PermissionGateHandle {
  const { ports, ids, agents } = deps
  const waiters = new Map<string, Set<Waiter>>()
  let closed = false
  const key = (sessionId: string, requestId: string) => `${sessionId}\u0000${requestId}`

  const unsubscribe = ports.log.onCommit((events) => {
    for (const e of events) {
      if (e.type !== 'permission.replied') continue
      const set = waiters.get(key(e.sessionId, e.data.requestId))
      if (!set) continue
      waiters.delete(key(e.sessionId, e.data.requestId))
      for (const w of set) w.settle(e.data)
    }
  })

  // Rules and approvals change only by commands, committed before they answer (a reply that adds a rule commits
  // with it): what the run has queued (the call's own tool.called) cannot change them, so the read takes the
  // session as committed and leaves that queue to commit with the call's end. A session whose creation is still
  // queued (a sub-agent's, just made) is read with what is queued.
  async function sessionOf(sessionId: string): Promise<Session> {
    const session =
      (await ports.readModels.session(sessionId, { committed: true })) ?? (await ports.readModels.session(sessionId))
    if (!session) throw new ToolFailure('failed', `no session ${sessionId}`)
    return session
  }

  /** The session and its ancestors (a sub-agent's parents), each with the agent acting in it. */
  async function chainOf({
    sessionId,
    agent,
    session,
  }: Pick<LoopScope, 'sessionId' | 'agent' | 'session'>): Promise<Level[]> {
    const levels: Level[] = [{ session: (await session?.()) ?? (await sessionOf(sessionId)), agent }]
    for (let parent = levels[0]?.session.parent; parent; ) {
      const id = parent.sessionId
      if (levels.length > MAX_CHAIN || levels.some((l) => l.session.id === id)) {
        throw new ToolFailure('denied', `the sub-agent chain of ${sessionId} is too deep or circular`)
      }
      const session = await sessionOf(id)
      levels.push({ session, agent: parent.agent ?? session.agent })
      parent = session.parent
    }
    return levels
  }

  /** The first reply to a request in the log: one given before a restart, or while the request was being made. */
  async function replyTo(sessionId: string, requestId: string): Promise<PermissionReply | undefined> {
    for (const e of await ports.log.readSessionOfType(sessionId, 'permission.replied'))
      if (e.type === 'permission.replied' && e.data.requestId === requestId) return e.data
    return undefined
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
      // an ask whose request committed as the gate closed: nobody hears its reply here any more
      if (closed) return waiter.settle(GATE_CLOSED)
      // Waiting first, then the log: a reply committed while it is read is heard either way.
      let set = waiters.get(k)
      if (!set) waiters.set(k, (set = new Set()))
      set.add(waiter)
      signal?.addEventListener('abort', onAbort, { once: true })
      replyTo(sessionId, requestId).then(
        (past) => {
          if (!past || !waiters.get(k)?.delete(waiter)) return
          if (waiters.get(k)?.size === 0) waiters.delete(k)
          waiter.settle(past)
        },
        (err: unknown) => {
          if (!waiters.get(k)?.delete(waiter)) return
          signal?.removeEventListener('abort', onAbort)
          reject(err)
        },
      )
    })
  }

  async function ask(scope: LoopScope, request: PermissionAsk): Promise<void> {
    if (scope.abort.aborted) throw new ToolFailure('aborted', 'The tool call was cancelled.')
    const levels = await chainOf(scope)
    const evaluation = evaluateChain(agents, levels, request)
    if (evaluation.action === 'allow' && !request.requireUser) return
    if (evaluation.action === 'deny') throw new ToolFailure('denied', deniedMessage(request.permission, evaluation))
    const requestId = ids.next('per')
    const always = request.always ?? defaultAlways(request)
    const top = (levels.at(-1) as Level).session.id
    const call = { ...(scope.partId && { partId: scope.partId }), ...(scope.callId && { callId: scope.callId }) }
    // Raised where the user watches: a sub-agent's call is named by `from`, not as a part of the top session.
    const where = top === scope.sessionId ? call : { from: { sessionId: scope.sessionId, ...call } }
    await permissionCommand(
      ports,
      ids,
      top,
      {
        type: 'request',
        request: {
          requestId,
          permission: request.permission,
          patterns: [...request.patterns],
          metadata: { ...request.metadata, always: [...always] },
          ...where,
        },
      },
      { actor: 'tool', ...(scope.callId && { call: scope.callId }), request: requestId },
    )
    try {
      await waitForReply(top, requestId, scope.abort)
    } catch (err) {
      if (err instanceof ToolFailure && err.kind === 'aborted') await closeAbandoned(top, requestId)
      throw err
    }
  }

  /** A cancelled call's request is closed, so the session does not stay `waiting` on it. */
  async function closeAbandoned(sessionId: string, requestId: string): Promise<void> {
    try {
      const message = 'cancelled: the tool call was aborted'
      await permissionCommand(
        ports,
        ids,
        sessionId,
        { type: 'abandon', requestId, message },
        { actor: 'runtime', request: requestId },
      )
    } catch {
      // The session moved on in between (a conflict): nothing left to close.
    }
  }

  return {
    ask,
    waitForReply,
    evaluate: async (scope, request) => evaluateChain(agents, await chainOf(scope), request),
    async checker(scope): Promise<PermissionChecker> {
      const levels = await chainOf(scope)
      return (request) => checkDecision(evaluateChain(agents, levels, request), request)
    },
    close() {
      closed = true
      unsubscribe()
      for (const set of waiters.values()) for (const w of set) w.settle(GATE_CLOSED)
      waiters.clear()
    },
  }
}

/**
 * The rules' decision over a sub-agent chain (the session first, its parents after): the strictest level's,
 * lifted from ask to allow by an approval given anywhere in the chain. Pure.
 */
export function evaluateChain(
  agents: ReadonlyMap<string, AgentDefinition>,
  levels: readonly Level[],
  request: PermissionAsk,
): Evaluation {
  const approvals = levels.flatMap((l) => l.session.approvals)
  const configured = levels.map((l) => ({ agent: agents.get(l.agent)?.rules ?? [], session: l.session.rules }))
  const { patterns, complete, dynamic } = expandPatterns(request)
  let action: PermissionAction = 'allow'
  for (const pattern of patterns) {
    for (const rules of configured) {
      const a = ruleDecision(request.permission, pattern, { ...rules, approvals })
      if (a === 'deny') {
        const rule = lastMatch(request.permission, pattern, rules.agent, rules.session)
        return { action: 'deny', patterns, denied: { pattern, ...(rule && { rule }) } }
      }
      if (a === 'ask') action = 'ask'
    }
  }
  // A command we could not fully parse is never auto-allowed; one whose name is only known
  // at run time (`$x f`, `eval "$s"`) asks whenever any configured rule restricts the permission.
  if (action === 'allow' && !complete) action = 'ask'
  if (action === 'allow' && dynamic && configured.some((r) => restricts(request.permission, r.agent, r.session)))
    action = 'ask'
  return { action, patterns }
}

/** What `check` answers for an evaluation: a request that requires the user is asked even when allowed. */
export function checkDecision(evaluation: Evaluation, request: PermissionAsk): PermissionDecision {
  return evaluation.action === 'allow' && request.requireUser ? 'ask' : evaluation.action
}

/** A bound on the walk up a sub-agent chain (the configured nesting limit is far lower). */
const MAX_CHAIN = 16

/** Whether any configured rule for the permission denies or asks: then nothing uncertain is auto-allowed. */
function restricts(permission: string, ...rulesets: readonly (readonly PermissionRule[])[]): boolean {
  return rulesets.some((rules) => rules.some((r) => r.action !== 'allow' && wildcardMatch(permission, r.permission)))
}

function deniedMessage(permission: string, evaluation: Evaluation): string {
  const d = evaluation.denied
  const rule = d?.rule ? ` (rule: ${d.rule.permission} ${JSON.stringify(d.rule.pattern)} deny)` : ''
  return `Permission denied: ${permission} ${JSON.stringify(d?.pattern ?? '')} is not allowed${rule}. Do not retry it; choose another approach or ask the user.`
}
