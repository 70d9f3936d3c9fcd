import type { StoredEvent } from '../../events/envelope.js'
import { ChronicleError } from '../../events/errors.js'
import type { EventLog } from '../../events/log.js'

/**
 * Which MCP servers and tools existed at a seq (docs/TOOLS.md "Server state
 * in the log"): the system stream `sys_mcp` folded up to that seq. Time
 * travel for the tool servers, as stateAt is for a session — the same pure
 * fold, stopped at a seq. The stream is small (a few events per server
 * connection), so it is folded from the start each time, without snapshots.
 */

export const MCP_STREAM = 'sys_mcp'

export type McpServerPhase = 'connecting' | 'ready' | 'failed' | 'auth_required' | 'disconnected'

export interface McpServerAt {
  readonly name: string
  readonly state: McpServerPhase
  /** the attempt of the latest `mcp.server.connecting` (1 at start, then each reconnect) */
  readonly attempt: number
  /** the seq of the event that put the server in this state */
  readonly since: number
  readonly at: string
  /** while ready: how it is connected, its tools (the names the model sees) and digests */
  readonly transport?: 'stdio' | 'streamable-http' | 'sse'
  readonly tools: readonly string[]
  readonly toolCount?: number
  readonly toolsDigest?: string
  readonly instructionsDigest?: string
  /** while failed or auth_required: what went wrong (scrubbed) */
  readonly error?: string
  /** while failed: when the next attempt starts */
  readonly retryInMs?: number
}

export interface McpServersAt {
  /** the seq the answer is right after */
  readonly seq: number
  /** by name */
  readonly servers: readonly McpServerAt[]
}

export type McpServersState = ReadonlyMap<string, McpServerAt>

export const initialMcpServers = (): McpServersState => new Map()

/** One `sys_mcp` event folded in. Pure: a new map, the old one untouched. */
export function evolveMcpServers(state: McpServersState, event: StoredEvent): McpServersState {
  // the server's name, attempt and when, then what the event says of it (Object.assign: src/events/copy.ts)
  const server = (name: string, fields: Partial<McpServerAt> & Pick<McpServerAt, 'state'>): McpServerAt => {
    const prior = state.get(name)
    const base = { name, attempt: prior?.attempt ?? 0, since: event.seq, at: event.at, tools: [] as readonly string[] }
    return Object.assign(base, fields)
  }
  const next = new Map(state)
  switch (event.type) {
    case 'mcp.server.connecting': {
      const d = event.data
      next.set(d.server, server(d.server, { state: 'connecting', attempt: d.attempt }))
      return next
    }
    case 'mcp.server.ready': {
      const d = event.data
      next.set(
        d.server,
        server(d.server, {
          state: 'ready',
          transport: d.transport,
          tools: d.tools,
          toolCount: d.toolCount,
          toolsDigest: d.toolsDigest,
          ...(d.instructionsDigest && { instructionsDigest: d.instructionsDigest }),
        }),
      )
      return next
    }
    case 'mcp.server.failed': {
      const d = event.data
      next.set(
        d.server,
        server(d.server, {
          state: 'failed',
          error: d.error,
          ...(d.retryInMs !== undefined && { retryInMs: d.retryInMs }),
        }),
      )
      return next
    }
    case 'mcp.server.auth_required': {
      const d = event.data
      next.set(d.server, server(d.server, { state: 'auth_required', ...(d.error && { error: d.error }) }))
      return next
    }
    case 'mcp.server.disconnected':
      next.set(event.data.server, server(event.data.server, { state: 'disconnected' }))
      return next
    default:
      // the stream holds only the types above (the store checks); anything else is not this fold's
      return state
  }
}

/**
 * The MCP servers right after `seq` (default: now). Any seq of the log will do (the answer is the
 * state the stream had reached by then); a seq past the log's head is SEQ_OUT_OF_RANGE. Read through the
 * log port, so either engine answers.
 */
export async function mcpServersAt(
  log: Pick<EventLog, 'version' | 'head' | 'readSession'>,
  seq?: number,
): Promise<McpServersAt> {
  await log.version(MCP_STREAM) // read-your-writes: the stream's queued appends are committed, so under the head
  const head = await log.head()
  if (seq !== undefined && seq > head)
    throw new ChronicleError('SEQ_OUT_OF_RANGE', `seq ${seq} is past the end of the log (${head})`)
  const upTo = seq ?? head
  let state = initialMcpServers()
  for (const e of await log.readSession(MCP_STREAM, { upTo })) state = evolveMcpServers(state, e)
  return { seq: upTo, servers: [...state.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) }
}
