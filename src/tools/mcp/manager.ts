import { ChronicleError } from '../../events/errors.js'
import type { Tool } from '../tool.js'
import type { McpServerConfig } from './config.js'
import { backoffDelay, type McpReconnectOptions, reconnectPolicy } from './reconnect.js'
import { type McpServerEvent, readyEvent } from './server-events.js'
import {
  connectMcpServer,
  type McpOffer,
  type McpServerHandle,
  type McpServerOptions,
  type McpServerStatus,
} from './server.js'

export interface McpManager {
  /** connects every configured server in parallel; never rejects (failures are statuses) */
  start(): Promise<void>
  /** the tools of every connected server, now (a crashed server's tools are gone) */
  tools(): readonly Tool[]
  status(): McpServerStatus[]
  /** server instructions for the system prompt */
  instructions(): { server: string; text: string }[]
  /** tells every connected server that the roots changed */
  rootsChanged(): Promise<void>
  /** connects one server again now, its backoff reset (after a sign-in, or by hand); NOT_FOUND for an unknown name */
  reconnect(name: string): Promise<void>
  /** stops reconnecting and closes every server */
  close(): Promise<void>
}

export interface McpManagerOptions extends McpServerOptions {
  /** reconnect after a failure (default: 1 s doubling to 60 s, with jitter); false: never */
  readonly reconnect?: McpReconnectOptions | false
  /** each change of a server's state, as the event the log records (src/runtime/mcp/state-log.ts) */
  /** hears each change; a promise it returns (the change being recorded) is awaited by close */
  readonly onEvent?: (event: McpServerEvent) => void | Promise<void>
}

/** One configured server: its current connection, and where its reconnecting stands. */
interface Slot {
  readonly config: McpServerConfig
  handle?: McpServerHandle
  status?: McpServerStatus
  /** connections made so far (the `attempt` of `mcp.server.connecting`) */
  attempt: number
  /** failures since the last stable connection: the backoff's exponent */
  failures: number
  /** which connection's statuses count: a replaced one's are ignored */
  generation: number
  connecting?: Promise<void>
  retry?: NodeJS.Timeout
  stable?: NodeJS.Timeout
}

/**
 * The configured MCP servers as one tool source for the registry. A server
 * that fails — it could not be reached, or it crashed later — is connected
 * again after a backoff, until the manager closes; one that needs a sign-in
 * or cannot run with this configuration is not. Each change is an event
 * (`onEvent`), so the log can say which servers and tools existed when.
 */
export function createMcpManager(servers: readonly McpServerConfig[], opts: McpManagerOptions = {}): McpManager {
  const slots: Slot[] = servers.map((config) => ({ config, attempt: 0, failures: 0, generation: 0 }))
  const policy = opts.reconnect === false ? undefined : reconnectPolicy(opts.reconnect)
  let closed = false
  /** the last change's recording (onEvent records in order): close waits for it */
  let recorded: Promise<void> | undefined
  const emit = (event: McpServerEvent) => {
    recorded = opts.onEvent?.(event) ?? recorded
  }

  const onStatus = (slot: Slot, generation: number, status: McpServerStatus, offer?: McpOffer) => {
    if (generation !== slot.generation) return
    slot.status = status
    opts.onStatus?.(status, offer)
    const server = slot.config.name
    if (status.state === 'connected') {
      // a connected status without an offer is a failed re-listing: the tools it had stay
      if (!offer || !status.transport) return
      emit(readyEvent(server, status.transport, offer))
      if (policy && !slot.stable) {
        slot.stable = setTimeout(() => {
          slot.failures = 0
        }, policy.stableMs)
        slot.stable.unref()
      }
      return
    }
    clearTimeout(slot.stable)
    slot.stable = undefined
    if (status.state === 'closed') {
      emit({ type: 'mcp.server.disconnected', data: { server } })
    } else if (status.state === 'needs-auth') {
      // waits for a sign-in: no retry can help
      emit({ type: 'mcp.server.auth_required', data: { server, ...(status.error && { error: status.error }) } })
    } else if (status.state === 'failed') {
      const error = status.error ?? 'failed'
      if (closed || !policy || cannotRun(slot.config, opts)) {
        emit({ type: 'mcp.server.failed', data: { server, error } })
        return
      }
      const retryInMs = backoffDelay(policy, slot.failures++)
      emit({ type: 'mcp.server.failed', data: { server, error, retryInMs } })
      slot.retry = setTimeout(() => {
        slot.retry = undefined
        void connect(slot)
      }, retryInMs)
      slot.retry.unref()
    }
  }

  const connect = (slot: Slot): Promise<void> => {
    if (closed) return Promise.resolve()
    const generation = ++slot.generation
    const previous = slot.handle
    slot.attempt++
    emit({ type: 'mcp.server.connecting', data: { server: slot.config.name, attempt: slot.attempt } })
    const work = (async () => {
      await previous?.close().catch(() => {}) // a failed connection's leftovers; its statuses no longer count
      const handle = await connectMcpServer(slot.config, {
        ...opts,
        onStatus: (status, offer) => onStatus(slot, generation, status, offer),
      })
      if (generation === slot.generation) slot.handle = handle
      if (closed) await handle.close()
    })()
    slot.connecting = work
    return work
  }

  return {
    async start() {
      await Promise.all(slots.map((slot) => connect(slot)))
    },
    tools: () => slots.flatMap((s) => s.handle?.tools() ?? []),
    status: () =>
      slots.map(
        (s) => s.status ?? { name: s.config.name, state: 'connecting', tools: 0, at: new Date().toISOString() },
      ),
    instructions: () =>
      slots.flatMap((s) => {
        const text = s.handle?.instructions()
        return text ? [{ server: s.config.name, text }] : []
      }),
    async rootsChanged() {
      await Promise.all(slots.map((s) => s.handle?.rootsChanged()))
    },
    async reconnect(name) {
      const slot = slots.find((s) => s.config.name === name)
      if (!slot) throw new ChronicleError('NOT_FOUND', `no MCP server is configured as "${name}"`)
      clearTimeout(slot.retry)
      slot.retry = undefined
      slot.failures = 0
      await slot.connecting?.catch(() => {})
      await connect(slot)
    },
    async close() {
      closed = true
      for (const slot of slots) {
        clearTimeout(slot.retry)
        clearTimeout(slot.stable)
      }
      await Promise.all(slots.map((s) => s.connecting?.catch(() => {})))
      await Promise.all(slots.map((s) => s.handle?.close()))
      await recorded?.catch(() => {}) // what the servers' ends said is in the log when close resolves
    },
  }
}

/**
 * A server whose configuration cannot run here — it asks for the sandbox and there is none (the check
 * connectMcpServer makes) — fails the same way on every attempt: it is not retried.
 */
function cannotRun(config: McpServerConfig, opts: McpServerOptions): boolean {
  return config.type === 'local' && config.sandbox === true && (opts.sandbox?.kind !== 'bwrap' || !opts.directory)
}
