import { z } from 'zod'
import type { Api } from '../api.js'
import type { App } from '../app.js'
import { callerOf } from '../caller.js'
import { Answers, ok, problems } from '../openapi.js'

/** MCP server state over HTTP (docs/API.md "MCP servers"): the log's system stream `sys_mcp`, at any seq. */
export function mcpRoutes(app: App, api: Api): void {
  app.get(
    '/mcp/servers',
    {
      schema: {
        operationId: 'getMcpServers',
        summary: 'mcp.servers',
        description:
          'The MCP servers and their tools right after event `at` (default: now), folded from the log: state, attempt, tool names and digests, scrubbed errors.',
        tags: ['time travel'],
        querystring: z.object({ at: z.coerce.number().int().nonnegative().optional() }),
        response: {
          200: ok('the MCP servers at the seq', Answers.mcpServers),
          ...problems({
            400: 'BAD_REQUEST: the query does not match its schema',
            404: 'SEQ_OUT_OF_RANGE: a seq past the end of the log',
          }),
        },
      },
    },
    async (req) => api['mcp.servers'](req.query, callerOf(req)),
  )
}
