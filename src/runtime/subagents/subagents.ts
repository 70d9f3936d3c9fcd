import { execute } from '../../commands/execute.js'
import { decideSession, type SessionCommand } from '../../commands/session.js'
import type { ChronicleEvent, PermissionRule, RunOutcome } from '../../events/catalogue.js'
import type { IdSource } from '../../events/ids.js'
import type { CommandPorts } from '../../commands/execute.js'
import type { Session } from '../../projections/fold/model.js'
import type { ReadModels } from '../../projections/read-models.js'
import type { AgentDefinition } from '../../tools/agents.js'
import type { BackgroundTask, SubtaskRequest, SubtaskResult } from '../../tools/builtin/task.js'
import type { TaskStatus } from '../../tools/builtin/task-status.js'
import { ToolFailure, type ToolContext } from '../../tools/tool.js'
import { SHUTDOWN } from '../loop/loop.js'

/**
 * Sub-agents (docs/COMPACTION.md "Sub-agents"): the task tool's child session.
 *
 *   parent: tool.called {task} → subtask.started {partId, callId, childSessionId}
 *   child:  session.created {parent: {sessionId, callId}, rules} → input.accepted {prompt} → its own run …
 *   parent: subtask.finished {outcome} → tool.completed {<task_result>} | tool.failed
 *
 * The child's rules are the intersection with the parent's: every deny rule
 * of the parent's agent and session (which include its own ancestors') is
 * appended after the child agent's rules, so last-match-wins can only make
 * the child stricter; at the depth limit `task` is denied too. The child
 * works in the parent's directory. Cancelling the parent cancels the child;
 * a shutdown does not (both runs are left for recovery).
 *
 * With `background: true` the call returns once the child is started; the
 * child's end reaches the parent as a recorded input (orphans.ts), and so
 * does a cancel of the parent's run reach the child.
 */

/** What the sub-agent machinery needs of the runtime (bound late: the runtime needs the tools first). */
export interface ChildRuntime {
  submit(
    sessionId: string,
    input: {
      inputId?: string
      parts: { type: 'text'; text: string }[]
      agent?: string
      delivery?: 'queue' | 'steer'
      noReply?: boolean
    },
    by: 'runtime',
  ): Promise<unknown>
  cancel(sessionId: string): Promise<unknown>
  idle(sessionId: string): Promise<void>
}

export interface SubagentDeps {
  /** where sessions are read, children created and the parent's subtask events appended */
  readonly ports: CommandPorts
  readonly ids: IdSource
  readonly agents: ReadonlyMap<string, AgentDefinition>
  readonly runtime: () => ChildRuntime
  /** how deep sub-agents may nest; 1 (default): children cannot start children */
  readonly maxDepth?: number
}

export const DEFAULT_MAX_DEPTH = 1

/** How many parents a session has. */
async function depthOf(sessions: ReadModels, session: Session): Promise<number> {
  let depth = 0
  for (let s: Session | undefined = session; s?.parent; s = await sessions.session(s.parent.sessionId)) depth++
  return depth
}

/** The child's session rules: the parent's denies (agent, then session), and `task` denied at the depth limit. */
export function childRules(
  parentAgent: AgentDefinition | undefined,
  parent: Session,
  atDepthLimit: boolean,
): PermissionRule[] {
  const denies = [...(parentAgent?.rules ?? []), ...parent.rules].filter((r) => r.action === 'deny')
  const unique = new Map(denies.map((r) => [`${r.permission}\u0000${r.pattern}`, r]))
  return [...unique.values(), ...(atDepthLimit ? [{ permission: 'task', pattern: '*', action: 'deny' as const }] : [])]
}

export interface Subagents {
  run(request: SubtaskRequest): Promise<SubtaskResult>
  start(request: SubtaskRequest): Promise<BackgroundTask>
  /** a child of `sessionId` as task_status reports it, cancelled first when asked; any other session is refused */
  status(sessionId: string, taskId: string, cancel: boolean): Promise<TaskStatus>
  /** children some task call in this process is waiting for */
  readonly awaited: ReadonlySet<string>
}

export function createSubagents(deps: SubagentDeps): Subagents {
  const { ports, ids } = deps
  const { readModels } = ports
  const maxDepth = deps.maxDepth ?? DEFAULT_MAX_DEPTH
  const awaited = new Set<string>()

  /** An event of the calling tool's in the parent session: decided over the session as it stands, as every command is. */
  const toParent = (ctx: ToolContext, event: ChronicleEvent) =>
    execute(
      ports,
      ctx.sessionId,
      (s) => {
        if (!s) throw new ToolFailure('failed', `no session ${ctx.sessionId}`)
        return [event]
      },
      { meta: { actor: 'tool', call: ctx.callId } },
    )

  /** The child session, linked to the call (subtask.started); its prompt not yet submitted. */
  async function open({ description, agent, ctx }: SubtaskRequest): Promise<string> {
    const parent = await readModels.session(ctx.sessionId)
    if (!parent) throw new ToolFailure('failed', `no session ${ctx.sessionId}`)
    const depth = (await depthOf(readModels, parent)) + 1
    if (depth > maxDepth) {
      throw new ToolFailure(
        'denied',
        `Sub-agents cannot start sub-agents here (nesting limit ${maxDepth}). Do the task yourself.`,
      )
    }
    const childSessionId = ids.next('ses')
    const meta = { actor: 'tool' as const, call: ctx.callId }
    const create: SessionCommand = {
      type: 'create',
      directory: parent.directory,
      agent,
      // the model the parent's calling step used, so the child runs on the same one
      model: (await readModels.message(ctx.sessionId, ctx.messageId))?.model ?? parent.model,
      title: `${description} (@${agent} subagent)`,
      parent: { sessionId: ctx.sessionId, callId: ctx.callId, agent: ctx.agent },
      rules: childRules(deps.agents.get(ctx.agent), parent, depth >= maxDepth),
    }
    await execute(ports, childSessionId, (s) => decideSession(create, s, childSessionId), { meta })
    await toParent(ctx, { type: 'subtask.started', data: { partId: ctx.partId, callId: ctx.callId, childSessionId } })
    return childSessionId
  }

  /**
   * A background child: nobody awaits it. Its end reaches the parent through the watcher
   * (orphans.ts), as does a cancel of the parent's run.
   */
  async function start(request: SubtaskRequest): Promise<BackgroundTask> {
    const childSessionId = await open(request)
    await deps
      .runtime()
      .submit(childSessionId, { parts: [{ type: 'text', text: request.prompt }], agent: request.agent }, 'runtime')
    return { childSessionId }
  }

  async function run(request: SubtaskRequest): Promise<SubtaskResult> {
    const { prompt, agent, ctx } = request
    const childSessionId = await open(request)
    const runtime = deps.runtime()
    const onAbort = () => {
      // a shutdown leaves the child for recovery; a child that cannot be cancelled (gone, imported) ends anyway
      if (ctx.abort.reason !== SHUTDOWN) runtime.cancel(childSessionId).catch(() => {})
    }
    awaited.add(childSessionId)
    try {
      ctx.abort.addEventListener('abort', onAbort, { once: true })
      await runtime.submit(childSessionId, { parts: [{ type: 'text', text: prompt }], agent }, 'runtime')
      if (ctx.abort.aborted) onAbort()
      await runtime.idle(childSessionId)
    } finally {
      ctx.abort.removeEventListener('abort', onAbort)
      awaited.delete(childSessionId)
    }
    const child = await readModels.session(childSessionId)
    if (ctx.abort.reason === SHUTDOWN || child?.run) {
      throw new ToolFailure(
        'interrupted',
        `the server stopped while the sub-agent session ${childSessionId} was running`,
      )
    }
    const outcome: RunOutcome = child?.lastRun?.outcome ?? 'failed'
    await toParent(ctx, {
      type: 'subtask.finished',
      data: { partId: ctx.partId, callId: ctx.callId, childSessionId, outcome },
    })
    return {
      childSessionId,
      outcome,
      text: await finalText(readModels, childSessionId),
      ...(child?.lastRun?.error && { error: child.lastRun.error }),
    }
  }

  async function status(sessionId: string, taskId: string, cancel: boolean): Promise<TaskStatus> {
    const child = await readModels.session(taskId)
    // The model names the session: only this session's own children are reported or cancelled.
    if (child?.parent?.sessionId !== sessionId || child.imported)
      throw new ToolFailure('invalid', `No sub-agent task ${taskId} was started by this session.`)
    if (cancel && child.run && !child.run.cancelRequested) await deps.runtime().cancel(taskId)
    const now = (await readModels.session(taskId)) ?? child
    return {
      childSessionId: taskId,
      title: now.title,
      running: now.run !== null,
      ...(now.run === null && now.lastRun && { outcome: now.lastRun.outcome }),
      cancelling: now.run?.cancelRequested === true,
      text: await finalText(readModels, taskId),
    }
  }

  return { run, start, status, awaited }
}

/** The text of the child's last assistant message (compaction summaries aside). */
export async function finalText(sessions: ReadModels, sessionId: string): Promise<string> {
  const messages = (await sessions.messages(sessionId)).filter((m) => m.role === 'assistant' && !m.summary)
  for (let i = messages.length - 1; i >= 0; i--) {
    const parts = await sessions.parts(sessionId, messages[i]!.id)
    const text = parts
      .map((p) => (p.type === 'text' ? p.text : ''))
      .join('')
      .trim()
    if (text) return text
  }
  return ''
}
