import { z } from 'zod'
import { defineTool } from '../tool.js'

export const TodoItem = z.object({
  content: z.string().min(1).describe('What to do, in one short imperative sentence'),
  status: z
    .enum(['pending', 'in_progress', 'completed', 'cancelled'])
    .describe('Where the item stands; keep at most one in_progress'),
  priority: z.enum(['high', 'medium', 'low']).describe('How important the item is'),
})
export type TodoItem = z.infer<typeof TodoItem>

const parameters = z.object({
  todos: z.array(TodoItem).describe('The complete, updated todo list (it replaces the previous one)'),
})

/**
 * todowrite: replaces the session's todo list. Tools never append events
 * themselves: `updateTodos` (injected by the runtime) records `todo.updated`.
 */
export function createTodoWriteTool(deps: {
  updateTodos: (sessionId: string, items: TodoItem[]) => Promise<void> | void
}) {
  return defineTool({
    id: 'todowrite',
    permission: 'todowrite',
    description:
      'Replaces the session todo list, to plan and track multi-step work. Send the whole list each time; mark items in_progress when starting and completed as soon as they are done.',
    parameters,
    async execute(args, ctx) {
      // Allowed by every default agent; a rule can still make it ask or deny.
      await ctx.ask({ permission: 'todowrite', patterns: ['*'], metadata: { count: args.todos.length } })
      await deps.updateTodos(ctx.sessionId, args.todos)
      const open = args.todos.filter((t) => t.status !== 'completed' && t.status !== 'cancelled').length
      return {
        output: JSON.stringify(args.todos, null, 2),
        title: `${open} todos`,
        metadata: { todos: args.todos },
      }
    },
  })
}
