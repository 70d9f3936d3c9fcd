import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js'
import {
  type ClientNotification,
  type ClientRequest,
  type ElicitRequest,
  type ElicitResult,
  ErrorCode,
  McpError,
} from '@modelcontextprotocol/sdk/types.js'
import type { InFlightCalls } from './in-flight.js'
import { applyElicitationDefaults, type ElicitationSchema, validateElicitationContent } from './elicitation-content.js'

/** One `elicitation/create` (form mode) a server sent, as Chronicle hands it on. */
export interface McpElicitation {
  readonly server: string
  readonly message: string
  readonly requestedSchema: ElicitationSchema
  /** the tool call in flight on that server, which the question belongs to, or why there is not exactly one */
  readonly route?: ReturnType<InFlightCalls['sole']>
}

/**
 * Answers a server's question: accept (with content), decline or cancel.
 * `signal` aborts when the server cancels the request or the connection ends.
 */
export type McpElicitationHandler = (request: McpElicitation, signal: AbortSignal) => Promise<ElicitResult>

/**
 * The SDK request handler around Chronicle's: URL mode is refused (only form
 * is declared), an accepted answer gets the schema's defaults applied and is
 * checked against the schema before it goes back to the server.
 */
export function elicitationRequestHandler(server: string, handler: McpElicitationHandler) {
  return async (
    request: ElicitRequest,
    extra: RequestHandlerExtra<ClientRequest, ClientNotification>,
  ): Promise<ElicitResult> => {
    const params = request.params
    if (params.mode === 'url') throw new McpError(ErrorCode.InvalidParams, 'this client takes form elicitations only')
    const schema = params.requestedSchema
    const answer = await handler({ server, message: params.message, requestedSchema: schema }, extra.signal)
    if (answer.action !== 'accept') return { action: answer.action }
    const content = applyElicitationDefaults(schema, answer.content ?? {})
    const checked = validateElicitationContent(schema, content)
    if (!checked.ok) throw new McpError(ErrorCode.InvalidParams, `${checked.error.code}: ${checked.error.message}`)
    return { action: 'accept', content: checked.content }
  }
}
