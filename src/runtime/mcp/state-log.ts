import type { EventLog } from '../../events/log.js'
import { MCP_STREAM } from '../../projections/queries/mcp-servers.js'
import type { Redactor } from '../../tools/redact.js'
import type { McpServerConfig } from '../../tools/mcp/config.js'
import { configuredSecrets, scrubMcpError } from '../../tools/mcp/scrub.js'
import type { McpServerEvent } from '../../tools/mcp/server-events.js'

/**
 * MCP server state into the log: each event the manager reports, appended
 * to the system stream `sys_mcp` — with error text scrubbed, and only when
 * it says something new about its server (the same event twice in a row,
 * e.g. an unchanged tool list re-listed, is left out). Appended one after
 * another, in the order the manager reported them; the promise a report
 * returns settles when it is recorded (never rejects).
 */
export function createMcpStateLog(deps: {
  readonly log: EventLog
  readonly servers: readonly McpServerConfig[]
  readonly redactor: Redactor
  readonly warn?: (obj: object, msg: string) => void
}): (event: McpServerEvent) => Promise<void> {
  const secrets = new Map(deps.servers.map((s) => [s.name, configuredSecrets(s)]))
  const last = new Map<string, string>()
  let appending = Promise.resolve()
  return (event) => {
    const scrubbed = scrub(event, secrets.get(event.data.server) ?? [], deps.redactor)
    const key = JSON.stringify(scrubbed)
    const server = event.data.server
    if (last.get(server) === key) return appending
    last.set(server, key)
    appending = appending.then(async () => {
      try {
        await deps.log.append(MCP_STREAM, [scrubbed], { meta: { actor: 'system' } })
      } catch (err) {
        // the log refusing is a bug or a closing store; the server's state goes on regardless
        if (last.get(server) === key) last.delete(server)
        deps.warn?.({ err, event: event.type, server }, 'could not record MCP server state')
      }
    })
    return appending
  }
}

function scrub(event: McpServerEvent, secrets: readonly string[], redactor: Redactor): McpServerEvent {
  const clean = (text: string) => scrubMcpError(text, secrets, redactor)
  switch (event.type) {
    case 'mcp.server.failed':
      return { type: event.type, data: { ...event.data, error: clean(event.data.error) } }
    case 'mcp.server.auth_required':
      return event.data.error === undefined
        ? event
        : { type: event.type, data: { ...event.data, error: clean(event.data.error) } }
    default:
      return event
  }
}
