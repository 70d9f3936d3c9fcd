import { z } from 'zod'
import type { RunOutcome } from '../../events/catalogue.js'
import { defineTool, type Tool } from '../tool.js'

/**
 * `task_status`: how a background sub-agent (task with `background: true`) is doing, and cancelling it
 * (docs/COMPACTION.md "Background sub-agents"). Only the calling session's own children can be named;
 * the runtime supplies `status` (src/runtime/subagents/subagents.ts), which refuses any other session.
 */

export interface TaskStatus {
  readonly childSessionId: string
  readonly title: string
  readonly running: boolean
  /** the outcome of its latest run, once one ended */
  readonly outcome?: RunOutcome
  /** a cancel was requested by this call or before */
  readonly cancelling: boolean
  /** the text of its latest answer so far */
  readonly text: string
}

export interface TaskStatusDeps {
  status(sessionId: string, taskId: string, cancel: boolean): Promise<TaskStatus>
}

const parameters = z.object({
  task_id: z.string().min(1).max(200).describe('The task_id a background task call returned'),
  cancel: z.boolean().optional().describe('true: stop the sub-agent (its result so far is reported to you)'),
})

export function createTaskStatusTool(deps: TaskStatusDeps): Tool<typeof parameters> {
  return defineTool({
    id: 'task_status',
    permission: 'task',
    description:
      'Show the progress of a background sub-agent you started with task (background: true), or cancel it. ' +
      'You do not need to poll: its result is delivered to you when it finishes.',
    parameters,
    async execute(args, ctx) {
      const s = await deps.status(ctx.sessionId, args.task_id, args.cancel === true)
      const state = s.running ? (s.cancelling ? 'cancelling' : 'running') : `finished: ${s.outcome ?? 'unknown'}`
      return {
        title: s.title,
        output: `task_id: ${s.childSessionId}\nstatus: ${state}\n\n<latest_text>\n${s.text}\n</latest_text>`,
        metadata: { sessionId: s.childSessionId, running: s.running, ...(s.outcome && { outcome: s.outcome }) },
      }
    },
  })
}
