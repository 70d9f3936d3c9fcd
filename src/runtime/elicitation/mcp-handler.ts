import type { McpElicitationHandler } from '../../tools/mcp/elicitation.js'
import type { ElicitationBridge } from './bridge.js'

/**
 * What the MCP client does with a server's `elicitation/create`: ask in the
 * session of the tool call in flight on that server. With no call in flight,
 * or several, nobody can honestly be said to be asked: declined, and logged.
 */
export function mcpElicitationHandler(
  bridge: ElicitationBridge,
  log?: { warn(obj: object, msg?: string): void },
): McpElicitationHandler {
  return async (request, signal) => {
    const route = request.route
    if (!route || 'none' in route) {
      const reason = route?.none ?? 'no call in flight'
      log?.warn({ server: request.server, reason }, 'mcp elicitation declined: it belongs to no single tool call')
      return { action: 'decline' }
    }
    const { server, message, requestedSchema } = request
    return bridge.elicit(route.call, { server, message, requestedSchema }, signal)
  }
}
