import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js'
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import { CallToolResultSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import type { Sandbox } from '../sandbox.js'
import type { Tool } from '../tool.js'
import type { McpServerConfig } from './config.js'
import { createMcpTool, type McpToolDefinition } from './mcp-tool.js'
import type { McpCallResult } from './normalize.js'

export type McpServerState = 'connecting' | 'connected' | 'failed' | 'closed'

/** What the server (HTTP status routes, logs) can show about one MCP server. */
export interface McpServerStatus {
  readonly name: string
  readonly state: McpServerState
  readonly transport?: 'stdio' | 'streamable-http' | 'sse'
  readonly tools: number
  readonly error?: string
  /** the child process of a stdio server */
  readonly pid?: number
  /** when the state last changed */
  readonly at: string
}

export interface McpServerHandle {
  readonly name: string
  status(): McpServerStatus
  tools(): readonly Tool[]
  instructions(): string | undefined
  close(): Promise<void>
}

export interface McpServerOptions {
  /** working directory of stdio servers */
  readonly directory?: string
  readonly dataDir?: string
  /** connect + initial tool listing (default: the server's `timeout`, else 30 s) */
  readonly connectTimeoutMs?: number
  /** each tool call (default 120 s; progress notifications reset it) */
  readonly callTimeoutMs?: number
  readonly onStatus?: (status: McpServerStatus) => void
  /** the sandbox a server that opts in (`sandbox: true`) runs in, confined to `directory` */
  readonly sandbox?: Sandbox
}

const STDERR_TAIL = 2000

/**
 * One MCP server connection. Never throws: a server that fails to start,
 * times out or later crashes ends in state `failed` with its error (and
 * stderr tail), its tools disappear, and everything else goes on.
 */
export async function connectMcpServer(config: McpServerConfig, opts: McpServerOptions = {}): Promise<McpServerHandle> {
  const connectTimeout = opts.connectTimeoutMs ?? config.timeout ?? 30_000
  const callTimeoutMs = opts.callTimeoutMs ?? 120_000
  let state: McpServerState = 'connecting'
  let error: string | undefined
  let transportKind: McpServerStatus['transport']
  let tools: Tool[] = []
  let client: Client | undefined
  let stdio: StdioClientTransport | undefined
  let stderr = ''
  let closing = false
  let changedAt = new Date().toISOString()

  const status = (): McpServerStatus => ({
    name: config.name,
    state,
    tools: tools.length,
    at: changedAt,
    ...(transportKind && { transport: transportKind }),
    ...(error && { error }),
    ...(stdio?.pid != null && { pid: stdio.pid }),
  })
  const set = (next: McpServerState, err?: string) => {
    state = next
    error = err
    changedAt = new Date().toISOString()
    if (next !== 'connected') tools = []
    opts.onStatus?.(status())
  }
  const withStderr = (message: string) => (stderr.trim() ? `${message}; stderr: ${stderr.trim().slice(-500)}` : message)

  const call = async (
    name: string,
    args: Record<string, unknown>,
    o: Parameters<Parameters<typeof createMcpTool>[2]>[2],
  ) => {
    if (!client || state !== 'connected') throw new Error(`server is ${state}${error ? `: ${error}` : ''}`)
    return (await client.callTool({ name, arguments: args }, CallToolResultSchema, {
      signal: o.signal,
      timeout: o.timeout,
      resetTimeoutOnProgress: true,
      onprogress: o.onprogress,
    })) as McpCallResult
  }

  const listAll = async (c: Client): Promise<Tool[]> => {
    const defs: McpToolDefinition[] = []
    let cursor: string | undefined
    do {
      const page = await c.listTools(cursor ? { cursor } : {}, { timeout: connectTimeout })
      defs.push(...(page.tools as McpToolDefinition[]))
      cursor = page.nextCursor
    } while (cursor)
    return defs.map((d) =>
      createMcpTool(config.name, d, call, { callTimeoutMs, ...(opts.dataDir && { dataDir: opts.dataDir }) }),
    )
  }

  const attempt = async (transport: Transport, kind: NonNullable<McpServerStatus['transport']>): Promise<Client> => {
    const c = new Client({ name: 'chronicle', version: '0.1.0' })
    transportKind = kind
    await withTimeout(c.connect(transport), connectTimeout, `connecting timed out after ${connectTimeout} ms`, () => {
      // a server that never finished the handshake gets no graceful close (the SDK's waits 2 s, then SIGTERM):
      // killed now, so a hung process is never left behind, even when this process exits first
      const pid = transport instanceof StdioClientTransport ? transport.pid : null
      if (pid)
        try {
          process.kill(pid, 'SIGKILL')
        } catch {
          // already gone
        }
      void transport.close()
    })
    return c
  }

  try {
    if (config.type === 'local') {
      const [command, ...args] = confined(config, opts)
      stdio = new StdioClientTransport({
        command: command as string,
        args,
        env: { ...getDefaultEnvironment(), ...config.environment },
        ...(opts.directory && { cwd: opts.directory }),
        stderr: 'pipe',
      })
      stdio.stderr?.on('data', (chunk: Buffer) => {
        stderr = (stderr + chunk.toString('utf8')).slice(-STDERR_TAIL)
      })
      client = await attempt(stdio, 'stdio')
    } else {
      const url = new URL(config.url)
      const requestInit = { headers: { ...config.headers } }
      try {
        client = await attempt(new StreamableHTTPClientTransport(url, { requestInit }), 'streamable-http')
      } catch {
        client = await attempt(new SSEClientTransport(url, { requestInit }), 'sse') // legacy HTTP+SSE servers
      }
    }
    const connected = client
    connected.onclose = () => {
      if (!closing) set('failed', withStderr('the server closed the connection (it exited or crashed)'))
    }
    connected.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      try {
        tools = await listAll(connected)
        opts.onStatus?.(status())
      } catch (err) {
        opts.onStatus?.({ ...status(), error: `re-listing tools failed: ${(err as Error).message}` })
      }
    })
    tools = await withTimeout(listAll(connected), connectTimeout, `listing tools timed out after ${connectTimeout} ms`)
    set('connected')
  } catch (err) {
    set('failed', withStderr((err as Error).message))
    closing = true
    await Promise.resolve(client?.close()).catch(() => {})
    await stdio?.close().catch(() => {})
  }

  return {
    name: config.name,
    status,
    tools: () => (state === 'connected' ? tools : []),
    instructions: () => (state === 'connected' ? client?.getInstructions() : undefined),
    async close() {
      if (state === 'closed') return
      closing = true
      await client?.close().catch(() => {})
      await stdio?.close().catch(() => {})
      set('closed')
    },
  }
}

/** The server's command line, inside the sandbox when it opted in: failing closed if there is none to run in. */
function confined(config: Extract<McpServerConfig, { type: 'local' }>, opts: McpServerOptions): string[] {
  if (!config.sandbox) return [...config.command]
  if (opts.sandbox?.kind !== 'bwrap' || !opts.directory) {
    throw new Error(
      `it asks for the sandbox, which cannot run here${opts.sandbox?.reason ? ` (${opts.sandbox.reason})` : ''}`,
    )
  }
  const { file, args } = opts.sandbox.wrap(config.command, { workspace: opts.directory, cwd: opts.directory })
  return [file, ...args]
}

function withTimeout<T>(work: Promise<T>, ms: number, message: string, onTimeout?: () => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      onTimeout?.()
      reject(new Error(message))
    }, ms)
    work.then(
      (v) => {
        clearTimeout(timer)
        resolve(v)
      },
      (e: unknown) => {
        clearTimeout(timer)
        reject(e)
      },
    )
  })
}
