import { z } from 'zod'
import { defineTool, type Tool } from './tool.js'

/**
 * `lookup`: answers a query from a resolver the caller supplies — the
 * conversation benchmark's tool (bench/CONVERSATION.md), and a side-effect-free
 * tool for runtime tests.
 */
export interface LookupOptions {
  readonly resolve: (query: string, callId: string) => string | Promise<string>
}

const parameters = z.object({ query: z.string().min(1).describe('what to look up') })

export function createLookupTool(options: LookupOptions): Tool<typeof parameters> {
  return defineTool({
    id: 'lookup',
    description: 'Look up a fact by query and return what is known about it.',
    parameters,
    async execute(args, ctx) {
      const output = await options.resolve(args.query, ctx.callId)
      return { output, title: args.query.slice(0, 60) }
    },
  })
}
