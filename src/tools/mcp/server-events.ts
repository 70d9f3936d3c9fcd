import { createHash } from 'node:crypto'
import type { ChronicleEvent, EventOf } from '../../events/catalogue.js'
import { mcpToolName } from './config.js'
import type { McpToolDefinition } from './mcp-tool.js'
import type { McpOffer, McpServerStatus } from './server.js'

/** The events of the system stream `sys_mcp` (docs/TOOLS.md "Server state in the log"). */
export type McpServerEvent = Extract<ChronicleEvent, { type: `mcp.server.${string}` }>

/** How many tool names a ready event carries at most; the digest and `toolCount` cover them all. */
export const MAX_LOGGED_TOOLS = 1000
const MAX_NAME = 200

/**
 * `mcp.server.ready` for what a server offers: the names the model sees, and
 * digests in place of the definitions (a schema can be large, and the
 * digest is enough to tell whether two moments offered the same tools).
 */
export function readyEvent(
  server: string,
  transport: NonNullable<McpServerStatus['transport']>,
  offer: McpOffer,
): EventOf<'mcp.server.ready'> {
  const names = offer.definitions.map((d) => mcpToolName(server, d.name).slice(0, MAX_NAME)).filter(Boolean)
  return {
    type: 'mcp.server.ready',
    data: {
      server,
      transport,
      tools: names.slice(0, MAX_LOGGED_TOOLS),
      toolCount: offer.definitions.length,
      toolsDigest: toolsDigest(offer.definitions),
      ...(offer.instructions !== undefined && { instructionsDigest: sha256(offer.instructions) }),
    },
  }
}

/** sha256 of the tool list as listed: each tool's name, description and input schema, in order. */
export function toolsDigest(definitions: readonly McpToolDefinition[]): string {
  return sha256(JSON.stringify(definitions.map((d) => [d.name, d.description ?? '', d.inputSchema])))
}

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}
