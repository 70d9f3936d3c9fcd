import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import {
  CallToolResultSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  type Root,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js'
import type { Secret } from '../redact.js'
import type { Sandbox } from '../sandbox.js'
import { watchLease } from '../lease-watchdog.js'
import type { Tool } from '../tool.js'
import type { McpServerConfig } from './config.js'
import { elicitationRequestHandler, type McpElicitationHandler } from './elicitation.js'
import { createInFlightCalls } from './in-flight.js'
import { createMcpTool, type McpToolDefinition } from './mcp-tool.js'
import type { McpCallResult } from './normalize.js'
import {
  describeRemoteError,
  fallsBackToSse,
  type RemoteTransports,
  remoteTransports,
  signInUrl,
} from './remote-transport.js'

/** `needs-auth`: a remote server wants a browser sign-in; its status carries the URL to open */
export type McpServerState = 'connecting' | 'connected' | 'needs-auth' | 'failed' | 'closed'

/** What the server (HTTP status routes, logs) can show about one MCP server. */
export interface McpServerStatus {
  readonly name: string
  readonly state: McpServerState
  readonly transport?: 'stdio' | 'streamable-http' | 'sse'
  readonly tools: number
  readonly error?: string
  /** in `needs-auth`: the authorization URL the user opens to sign in */
  readonly authorizationUrl?: string
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
  /** tells the server the roots changed (`notifications/roots/list_changed`); nothing when not connected */
  rootsChanged(): Promise<void>
  close(): Promise<void>
}

/** What a connected server offers: its tool definitions as listed, and its instructions (for the log's digests). */
export interface McpOffer {
  readonly definitions: readonly McpToolDefinition[]
  readonly instructions?: string
}

export interface McpServerOptions {
  /** working directory of stdio servers */
  readonly directory?: string
  readonly dataDir?: string
  /** connect + initial tool listing (default: the server's `timeout`, else 30 s) */
  readonly connectTimeoutMs?: number
  /** each tool call (default 120 s; progress notifications reset it) */
  readonly callTimeoutMs?: number
  /** each change of status; `offer` is there while connected */
  readonly onStatus?: (status: McpServerStatus, offer?: McpOffer) => void
  /** the directories the server may work in, answered to `roots/list` (the client declares `roots` only with this) */
  readonly roots?: () => readonly Root[]
  /** (cluster) the node's lease file: a stdio server is killed by a watchdog once the lease is over (src/tools/lease-watchdog.ts) */
  readonly leaseFile?: string
  /** the sandbox a server that opts in (`sandbox: true`) runs in, confined to `directory` */
  readonly sandbox?: Sandbox
  /** where a browser sign-in returns: Chronicle's loopback callback (default: the default port's) */
  readonly oauthRedirectUrl?: string
  /** answers a server's `elicitation/create` (the client declares `elicitation` only with this) */
  readonly onElicitation?: McpElicitationHandler
  /** credentials a sign-in brings (OAuth tokens): the server's redactor learns them (src/tools/mcp/oauth-secrets.ts) */
  readonly learnSecrets?: (secrets: readonly Secret[]) => void
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
  let definitions: McpToolDefinition[] = []
  let client: Client | undefined
  let stdio: StdioClientTransport | undefined
  let stderr = ''
  let closing = false
  let remote: RemoteTransports | undefined
  let authorizationUrl: string | undefined
  let changedAt = new Date().toISOString()

  const status = (): McpServerStatus => ({
    name: config.name,
    state,
    tools: tools.length,
    at: changedAt,
    ...(transportKind && { transport: transportKind }),
    ...(error && { error }),
    ...(state === 'needs-auth' && authorizationUrl && { authorizationUrl }),
    ...(stdio?.pid != null && { pid: stdio.pid }),
  })
  const offer = (): McpOffer | undefined => {
    if (state !== 'connected') return undefined
    const text = client?.getInstructions()
    return { definitions, ...(text !== undefined && { instructions: text }) }
  }
  const set = (next: McpServerState, err?: string) => {
    state = next
    error = err
    changedAt = new Date().toISOString()
    if (next !== 'connected') tools = []
    opts.onStatus?.(status(), offer())
  }
  const withStderr = (message: string) => (stderr.trim() ? `${message}; stderr: ${stderr.trim().slice(-500)}` : message)
  /** a refusal that a browser sign-in can cure: state `needs-auth` with the URL, not `failed` */
  const needsSignIn = (err: unknown): boolean => {
    const url = signInUrl(remote?.authProvider, err)
    if (!url) return false
    authorizationUrl = url
    set(
      'needs-auth',
      `the server needs a sign-in: open the authorization URL (or run chronicle mcp login ${config.name})`,
    )
    return true
  }

  const call = async (
    name: string,
    args: Record<string, unknown>,
    o: Parameters<Parameters<typeof createMcpTool>[2]>[2],
  ) => {
    if (!client || state !== 'connected') throw new Error(`server is ${state}${error ? `: ${error}` : ''}`)
    try {
      return (await client.callTool({ name, arguments: args }, CallToolResultSchema, {
        signal: o.signal,
        timeout: o.timeout,
        resetTimeoutOnProgress: true,
        onprogress: o.onprogress,
      })) as McpCallResult
    } catch (err) {
      // a step-up to more scopes that needs the user: the server waits for the sign-in
      if (needsSignIn(err)) throw new Error(`server is needs-auth: ${error}`)
      throw err
    }
  }

  // which call a server's elicitation belongs to: the one in flight on this connection (src/tools/mcp/in-flight.ts)
  const inFlight = createInFlightCalls()

  const listAll = async (c: Client): Promise<Tool[]> => {
    const defs: McpToolDefinition[] = []
    let cursor: string | undefined
    do {
      const page = await c.listTools(cursor ? { cursor } : {}, { timeout: connectTimeout })
      defs.push(...(page.tools as McpToolDefinition[]))
      cursor = page.nextCursor
    } while (cursor)
    definitions = defs
    return defs.map((d) =>
      createMcpTool(config.name, d, call, { callTimeoutMs, inFlight, ...(opts.dataDir && { dataDir: opts.dataDir }) }),
    )
  }

  const attempt = async (transport: Transport, kind: NonNullable<McpServerStatus['transport']>): Promise<Client> => {
    const c = new Client(
      { name: 'chronicle', version: '0.1.0' },
      {
        capabilities: {
          ...(opts.roots && { roots: { listChanged: true } }),
          ...(opts.onElicitation && { elicitation: { form: {} } }),
        },
      },
    )
    const roots = opts.roots
    if (roots) c.setRequestHandler(ListRootsRequestSchema, () => ({ roots: [...roots()] }))
    const elicit = opts.onElicitation
    if (elicit)
      c.setRequestHandler(
        ElicitRequestSchema,
        elicitationRequestHandler(config.name, (request, signal) =>
          elicit({ ...request, route: inFlight.sole() }, signal),
        ),
      )
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
      // a node frozen past its lease cannot stop a call in flight there: its watchdog stops the server
      if (opts.leaseFile && stdio.pid != null) watchLease(stdio.pid, opts.leaseFile, 'process')
    } else {
      remote = remoteTransports(config, opts)
      try {
        client = await attempt(remote.streamable(), 'streamable-http')
      } catch (err) {
        if (!fallsBackToSse(err)) throw err
        client = await attempt(remote.sse(), 'sse') // legacy HTTP+SSE servers
      }
    }
    const connected = client
    connected.onclose = () => {
      if (!closing) set('failed', withStderr('the server closed the connection (it exited or crashed)'))
    }
    connected.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      try {
        tools = await listAll(connected)
        opts.onStatus?.(status(), offer())
      } catch (err) {
        opts.onStatus?.({ ...status(), error: `re-listing tools failed: ${(err as Error).message}` })
      }
    })
    tools = await withTimeout(listAll(connected), connectTimeout, `listing tools timed out after ${connectTimeout} ms`)
    set('connected')
  } catch (err) {
    if (!needsSignIn(err)) set('failed', withStderr(describeRemoteError(err)))
    closing = true
    await Promise.resolve(client?.close()).catch(() => {})
    await stdio?.close().catch(() => {})
  }

  return {
    name: config.name,
    status,
    tools: () => (state === 'connected' ? tools : []),
    instructions: () => (state === 'connected' ? client?.getInstructions() : undefined),
    async rootsChanged() {
      if (state === 'connected' && opts.roots) await client?.sendRootsListChanged().catch(() => {})
    },
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
