import { createHash } from 'node:crypto'
import { z } from 'zod'
import { defineTool, type Tool, ToolFailure } from '../tool.js'
import { truncateOutput } from '../truncate.js'
import { mcpToolName } from './config.js'
import type { InFlightCalls } from './in-flight.js'
import { type McpCallResult, normalizeResult } from './normalize.js'

/** A tool as an MCP server lists it. */
export interface McpToolDefinition {
  readonly name: string
  readonly description?: string
  readonly inputSchema: Record<string, unknown>
}

export interface McpCallOptions {
  readonly signal: AbortSignal
  readonly timeout: number
  readonly onprogress: (p: { progress: number; total?: number; message?: string }) => void
}

export type McpCall = (name: string, args: Record<string, unknown>, options: McpCallOptions) => Promise<McpCallResult>

/**
 * An MCP tool as a Chronicle tool: named `<server>_<tool>`, governed by the
 * permission of that same name (asked before every call), its JSON Schema
 * turned into zod so the runtime validates arguments like any built-in.
 *
 * The ask's pattern pins the tool's definition (`definition:<digest>` of its
 * description and schema): an "always" approval covers that definition only,
 * so a server that changes the tool afterwards (a "rug pull") is asked again.
 * Configured rules with pattern `*` still match any definition.
 */
export function createMcpTool(
  server: string,
  def: McpToolDefinition,
  call: McpCall,
  opts: {
    callTimeoutMs: number
    dataDir?: string
    /** the server's calls in flight, so its elicitations reach the call's session */
    inFlight?: InFlightCalls
  },
): Tool {
  const id = mcpToolName(server, def.name)
  const pin = `definition:${definitionDigest(def)}`
  return defineTool({
    id,
    permission: id,
    writes: true,
    description: def.description?.trim() || `The ${def.name} tool of the ${server} MCP server.`,
    parameters: parametersOf(def.inputSchema),
    // progress notifications keep resetting the call's own timeout: this bounds it however chatty the server is
    budgetMs: () => Math.max(MCP_BUDGET_MS, opts.callTimeoutMs),
    async execute(args, ctx) {
      await ctx.ask({ permission: id, patterns: [pin], always: [pin], metadata: { server, tool: def.name } })
      let result: McpCallResult
      const { sessionId, partId, callId } = ctx
      // a question the server asked during the call is closed when the call ends, however it ends (a timeout too)
      const ended = new AbortController()
      const abort = AbortSignal.any([ctx.abort, ended.signal])
      const done = opts.inFlight?.begin({ sessionId, partId, callId, abort })
      try {
        result = await call(def.name, (args ?? {}) as Record<string, unknown>, {
          signal: ctx.abort,
          timeout: opts.callTimeoutMs,
          onprogress: (p) =>
            ctx.progress({
              progress: p.progress,
              ...(p.total !== undefined && { total: p.total }),
              ...(p.message && { message: p.message }),
            }),
        })
      } catch (err) {
        if (ctx.abort.aborted) throw new ToolFailure('aborted', `The ${id} call was cancelled.`)
        throw new ToolFailure(
          'failed',
          `The MCP server "${server}" failed during ${def.name}: ${(err as Error).message}`,
        )
      } finally {
        done?.()
        ended.abort()
      }
      const normalized = normalizeResult(result)
      if (!opts.dataDir) return normalized
      const truncated = truncateOutput(normalized.output, {
        dataDir: opts.dataDir,
        sessionId: ctx.sessionId,
        name: `mcp_${ctx.partId}`,
      })
      return {
        ...normalized,
        output: truncated.output,
        ...(truncated.truncated && { metadata: { truncated: true, outputPath: truncated.outputPath } }),
      }
    },
  })
}

export const MCP_BUDGET_MS = 30 * 60_000

export function definitionDigest(def: McpToolDefinition): string {
  return createHash('sha256')
    .update(JSON.stringify([def.name, def.description ?? '', def.inputSchema]))
    .digest('hex')
    .slice(0, 16)
}

/** The server's JSON Schema as zod (objects only); a schema zod cannot read accepts any object. */
function parametersOf(inputSchema: Record<string, unknown>): z.ZodType {
  const { $schema: _ignored, ...schema } = inputSchema
  try {
    return z.fromJSONSchema({ ...schema, type: 'object' } as Parameters<typeof z.fromJSONSchema>[0])
  } catch {
    return z.looseObject({})
  }
}
