/**
 * The tool calls in flight on one MCP server connection. A server's request
 * to the client (`elicitation/create`) does not say which of our calls it
 * belongs to, so it is routed to the one call in flight; with none, or more
 * than one, there is no honest answer to "whose user is asked", and the
 * caller declines (docs/TOOLS.md "Elicitation").
 */
export interface InFlightCall {
  readonly sessionId: string
  readonly partId: string
  readonly callId: string
  readonly abort: AbortSignal
}

export interface InFlightCalls {
  /** records a call until the returned function is called */
  begin(call: InFlightCall): () => void
  /** the one call in flight, or why there is not exactly one */
  sole(): { readonly call: InFlightCall } | { readonly none: 'no call in flight' | 'several calls in flight' }
}

export function createInFlightCalls(): InFlightCalls {
  const calls = new Set<InFlightCall>()
  return {
    begin(call) {
      const entry = { ...call }
      calls.add(entry)
      return () => calls.delete(entry)
    },
    sole() {
      if (calls.size === 1) return { call: [...calls][0] as InFlightCall }
      return { none: calls.size === 0 ? 'no call in flight' : 'several calls in flight' }
    },
  }
}
