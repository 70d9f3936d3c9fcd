import { z } from 'zod'
import type { RunOutcome } from '../../events/catalogue.js'
import type { AgentDefinition } from '../agents.js'
import { defineTool, ToolFailure, type Tool, type ToolContext } from '../tool.js'

/**
 * `task`: delegates a sub-task to a sub-agent running in its own child
 * session (docs/COMPACTION.md "Sub-agents"). The child starts from the task prompt, not
 * from this session's history; its final text is this call's result. The
 * runtime supplies `run` (src/runtime/subagents/subagents.ts): child creation, the
 * child's permissions (the intersection with this session's), the depth
 * limit, cancellation and the subtask.* events.
 */

export interface SubtaskRequest {
  readonly description: string
  readonly prompt: string
  readonly agent: string
  readonly ctx: ToolContext
}

/** A sub-agent started in the background: the call returns with its session at once. */
export interface BackgroundTask {
  readonly childSessionId: string
}

export interface SubtaskResult {
  readonly childSessionId: string
  readonly outcome: RunOutcome
  /** the child's final text (its last assistant message) */
  readonly text: string
  readonly error?: { readonly kind: string; readonly message: string }
}

export interface TaskToolDeps {
  readonly agents: ReadonlyMap<string, AgentDefinition>
  run(request: SubtaskRequest): Promise<SubtaskResult>
  /** starts the child and returns at once (`background: true`); without it, background tasks are refused */
  start?(request: SubtaskRequest): Promise<BackgroundTask>
}

const parameters = z.object({
  description: z.string().min(1).max(200).describe('A short (3-5 words) description of the task'),
  prompt: z
    .string()
    .min(1)
    .describe('The complete task for the sub-agent: it sees nothing of this conversation but this prompt'),
  subagent_type: z.string().min(1).describe('Which sub-agent performs the task'),
  background: z
    .boolean()
    .optional()
    .describe(
      'true: start the sub-agent and continue at once; its result is delivered to you as a message when it finishes',
    ),
})

export const TASK_BUDGET_MS = 60 * 60_000

export function subagentsOf(agents: ReadonlyMap<string, AgentDefinition>): AgentDefinition[] {
  return [...agents.values()].filter((a) => a.mode !== 'primary')
}

export function createTaskTool(deps: TaskToolDeps): Tool<typeof parameters> {
  const listing = subagentsOf(deps.agents)
    .map((a) => `- ${a.name}: ${a.description}`)
    .join('\n')
  return defineTool({
    id: 'task',
    permission: 'task',
    writes: true,
    description:
      'Delegate a self-contained, multi-step task to a sub-agent that runs in its own session and reports back. ' +
      'The sub-agent sees only your prompt, so include every detail it needs. Its final answer is returned to you.\n' +
      `Available sub-agents (subagent_type):\n${listing || '(none)'}`,
    parameters,
    // a whole sub-agent run: its own calls have their budgets, and its steps are bounded
    budgetMs: () => TASK_BUDGET_MS,
    async execute(args, ctx) {
      const agent = deps.agents.get(args.subagent_type)
      if (!agent || agent.mode === 'primary') {
        const known =
          subagentsOf(deps.agents)
            .map((a) => a.name)
            .join(', ') || 'none'
        throw new ToolFailure(
          'invalid',
          `Unknown sub-agent "${args.subagent_type}". Available sub-agents: ${known}. Call task again with one of those.`,
        )
      }
      await ctx.ask({ permission: 'task', patterns: [agent.name], metadata: { description: args.description } })
      const request = { description: args.description, prompt: args.prompt, agent: agent.name, ctx }
      if (args.background) {
        if (!deps.start)
          throw new ToolFailure('invalid', 'Background tasks are not available here: call task without background.')
        const { childSessionId } = await deps.start(request)
        return {
          title: args.description,
          output:
            `task_id: ${childSessionId} (the sub-agent's session, running in the background)\n\n` +
            `The ${agent.name} sub-agent is working on "${args.description}". Its result will be delivered to you as a message ` +
            'when it finishes: continue with other work, and do not wait or poll for it. ' +
            `task_status with task_id ${childSessionId} shows its progress or cancels it.`,
          metadata: { sessionId: childSessionId, agent: agent.name, background: true },
        }
      }
      const result = await deps.run(request)
      const metadata = { sessionId: result.childSessionId, outcome: result.outcome, agent: agent.name }
      if (result.outcome === 'cancelled')
        throw new ToolFailure('aborted', `The sub-agent session ${result.childSessionId} was cancelled.`)
      if (result.outcome === 'rejected')
        throw new ToolFailure(
          'denied',
          `The user rejected a permission request of the ${agent.name} sub-agent (session ${result.childSessionId}), which stopped it.`,
        )
      if (result.outcome === 'error' || result.outcome === 'failed') {
        const why = result.error ? `${result.error.kind}: ${result.error.message}` : 'no reason recorded'
        throw new ToolFailure('failed', `The ${agent.name} sub-agent (session ${result.childSessionId}) failed: ${why}`)
      }
      const note =
        result.outcome === 'max_steps' ? '\n(the sub-agent ran out of steps; its answer may be incomplete)' : ''
      return {
        title: args.description,
        output: `task_id: ${result.childSessionId} (the sub-agent's session)${note}\n\n<task_result>\n${result.text}\n</task_result>`,
        metadata,
      }
    },
  })
}
