import { type ContentCheck, elicitationCommand } from '../../commands/elicitation.js'
import type { DataOf, ElicitationValue } from '../../events/catalogue.js'
import type { IdSource } from '../../events/ids.js'
import type { CommandPorts } from '../../commands/execute.js'
import { NO_SECRETS, type Redactor } from '../../tools/redact.js'
import { SHUTDOWN } from '../abort-reasons.js'

/**
 * The elicitation bridge (docs/TOOLS.md "Elicitation"): an MCP server's
 * `elicitation/create`, asked during one of the session's tool calls, becomes
 * `elicitation.requested` in that session (a sub-agent's: in the top session
 * of its chain, with `from`, like a permission request); the call waits until an
 * `elicitation.answered` for it is committed (a client's answer through the
 * command path, already checked against the form), and the answer goes back
 * to the server.
 *
 * The server's question is hostile input: one over the bounds below is
 * declined without being appended, and the reason is logged. Waiting is fed
 * by the store's commit stream, like the permission gate; a call that ends
 * first (a cancelled run, a shutdown, a timeout) or a server that withdraws
 * its request closes the elicitation `cancel` (meta.actor runtime).
 */

/** The tool call an elicitation belongs to (the one in flight on the server that asks). */
export interface ElicitationCall {
  readonly sessionId: string
  readonly partId: string
  readonly callId: string
  readonly abort: AbortSignal
}

/** A form-mode `elicitation/create`, as the MCP SDK parsed it. */
export interface ElicitationAsk {
  readonly server: string
  readonly message: string
  readonly requestedSchema: Record<string, unknown>
}

export type ElicitationReply =
  | { readonly action: 'accept'; readonly content: Record<string, ElicitationValue> }
  | { readonly action: 'decline' | 'cancel' }

export interface ElicitationBridge {
  /** appends the request and resolves with the answer; never rejects (a failure is a decline or a cancel) */
  elicit(call: ElicitationCall, ask: ElicitationAsk, withdrawn?: AbortSignal): Promise<ElicitationReply>
  /** stops listening; pending elicitations resolve `cancel` (the log keeps them pending: recovery settles them) */
  close(): void
}

export interface ElicitationBridgeDeps {
  /** where the chain of sessions is read and the elicitation commands append */
  readonly ports: CommandPorts
  readonly ids: IdSource
  /** the server's secrets kept out of the log: a hostile server may echo one in its question */
  readonly redactor?: Redactor
  readonly log?: { warn(obj: object, msg?: string): void }
}

/** Bounds on what a server may ask: the message a person reads, and the form's size. */
export const ELICITATION_LIMITS = { messageChars: 4_000, schemaBytes: 32_768, fields: 50, fieldNameChars: 100 }

export const ABORTED_REASON = 'the tool call ended (cancelled, timed out or failed) before the answer'
export const WITHDRAWN_REASON = 'the MCP server withdrew the request'
export const SHUTDOWN_REASON = 'the server stopped while the call waited for the answer'

export function createElicitationBridge(deps: ElicitationBridgeDeps): ElicitationBridge {
  const { ports, ids, log } = deps
  const redactor = deps.redactor ?? NO_SECRETS
  const waiters = new Map<string, (answer: DataOf<'elicitation.answered'>) => void>()
  const key = (sessionId: string, elicitationId: string) => `${sessionId}\u0000${elicitationId}`

  const unsubscribe = ports.log.onCommit((events) => {
    for (const e of events) {
      if (e.type !== 'elicitation.answered') continue
      const k = key(e.sessionId, e.data.elicitationId)
      const settle = waiters.get(k)
      waiters.delete(k)
      settle?.(e.data)
    }
  })

  /** Closes the request `cancel` unless it was answered in between (then the answer stands). */
  async function abandon(sessionId: string, elicitationId: string, reason: string): Promise<void> {
    try {
      await elicitationCommand(
        ports,
        sessionId,
        { type: 'abandon', elicitationId, reason },
        { actor: 'runtime', request: elicitationId },
        NO_CONTENT,
      )
    } catch (err) {
      log?.warn({ sessionId, elicitationId, err: (err as Error).message }, 'elicitation could not be closed')
    }
  }

  /** The top session of a sub-agent chain (the session itself when it has no parent). */
  async function topOf(sessionId: string): Promise<string> {
    let top = sessionId
    for (let depth = 0; depth < MAX_CHAIN; depth++) {
      const parent = (await ports.readModels.session(top))?.parent?.sessionId
      if (!parent || parent === sessionId) break
      top = parent
    }
    return top
  }

  async function elicit(
    call: ElicitationCall,
    ask: ElicitationAsk,
    withdrawn?: AbortSignal,
  ): Promise<ElicitationReply> {
    const refused = outOfBounds(ask)
    if (refused) {
      log?.warn({ server: ask.server, sessionId: call.sessionId, reason: refused }, 'mcp elicitation declined')
      return { action: 'decline' }
    }
    if (call.abort.aborted || withdrawn?.aborted) return { action: 'cancel' }
    const elicitationId = ids.next('eli')
    // asked where the user watches: a sub-agent's call is named by `from`, not as a part of the top session
    const top = await topOf(call.sessionId)
    const self = { partId: call.partId, callId: call.callId }
    const where = top === call.sessionId ? self : { from: { sessionId: call.sessionId, ...self } }
    const k = key(top, elicitationId)
    const answered = new Promise<DataOf<'elicitation.answered'>>((resolve) => waiters.set(k, resolve))
    try {
      await elicitationCommand(
        ports,
        top,
        {
          type: 'request',
          request: {
            elicitationId,
            server: ask.server,
            message: redactor.text(ask.message),
            requestedSchema: redactor.value(ask.requestedSchema),
            ...where,
          },
        },
        { actor: 'tool', call: call.callId, request: elicitationId },
        NO_CONTENT,
      )
    } catch (err) {
      waiters.delete(k)
      log?.warn(
        { server: ask.server, sessionId: call.sessionId, err: (err as Error).message },
        'mcp elicitation declined',
      )
      return { action: 'decline' }
    }
    const stop = new AbortController()
    const onAbort = (reason: string) => () => {
      stop.abort()
      void abandon(top, elicitationId, reason) // commits the cancel, which settles the wait
    }
    const aborted = () => onAbort(call.abort.reason === SHUTDOWN ? SHUTDOWN_REASON : ABORTED_REASON)()
    const pulled = onAbort(WITHDRAWN_REASON)
    call.abort.addEventListener('abort', aborted, { once: true })
    withdrawn?.addEventListener('abort', pulled, { once: true })
    try {
      const answer = await Promise.race([answered, closedOr(stop.signal)])
      if (answer.action === 'accept') return { action: 'accept', content: answer.content ?? {} }
      return { action: answer.action }
    } finally {
      waiters.delete(k)
      call.abort.removeEventListener('abort', aborted)
      withdrawn?.removeEventListener('abort', pulled)
    }
  }

  const closing = new AbortController()
  /** A cancel when the bridge closes or the wait was aborted and its cancel could not be appended. */
  function closedOr(signal: AbortSignal): Promise<DataOf<'elicitation.answered'>> {
    return new Promise((resolve) => {
      const cancel = () => setImmediate(() => resolve({ elicitationId: '', action: 'cancel' }))
      if (closing.signal.aborted) return cancel()
      closing.signal.addEventListener('abort', cancel, { once: true })
      signal.addEventListener('abort', cancel, { once: true })
    })
  }

  return {
    elicit,
    close() {
      unsubscribe()
      closing.abort()
      waiters.clear()
    },
  }
}

/** Why a server's question is refused before it reaches the log, or undefined when it is within bounds. */
export function outOfBounds(ask: ElicitationAsk): string | undefined {
  const limits = ELICITATION_LIMITS
  if (ask.message.length > limits.messageChars)
    return `its message is ${ask.message.length} characters (limit ${limits.messageChars})`
  const bytes = Buffer.byteLength(JSON.stringify(ask.requestedSchema))
  if (bytes > limits.schemaBytes) return `its schema is ${bytes} bytes as JSON (limit ${limits.schemaBytes})`
  const properties = ask.requestedSchema['properties']
  const names = properties && typeof properties === 'object' ? Object.keys(properties) : []
  if (names.length > limits.fields) return `its form has ${names.length} fields (limit ${limits.fields})`
  const long = names.find((n) => n.length > limits.fieldNameChars || n.length === 0)
  if (long !== undefined) return `a field name is empty or over ${limits.fieldNameChars} characters`
  return undefined
}

/** A bound on the walk up a sub-agent chain (the configured nesting limit is far lower). */
const MAX_CHAIN = 16

/** Requests and abandons carry no content: nothing to check. */
const NO_CONTENT: ContentCheck = () => ({ ok: false, problems: ['no content is expected here'] })
