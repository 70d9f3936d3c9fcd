import { mkdirSync, readFileSync } from 'node:fs'
import { networkInterfaces } from 'node:os'
import { join } from 'node:path'
import type { DestinationStream, Logger } from 'pino'
import { ChronicleError } from './events/errors.js'
import { createIdSource, type IdSource } from './events/ids.js'
import type { EventStore } from './events/store.js'
import { execute } from './commands/execute.js'
import { decidePermission } from './commands/permission.js'
import { openStore } from './projections/open.js'
import { resolveAgents } from './tools/agents.js'
import { isLoopback, type ChronicleConfig } from './config.js'
import { buildApp, type App } from './http/app.js'
import type { AppDeps, PermissionPort, RuntimePort } from './http/deps.js'
import { createLogger } from './http/logger.js'
import { resolveToken, type TokenInfo } from './http/token.js'

/**
 * The composition root: opens the store in the data directory and builds
 * ids, agents, tools, permissions, the runtime and the app from the
 * configuration. `start()` listens; `stop()` shuts down gracefully.
 */

export interface ChronicleOptions {
  /** where logs go (tests capture them); default stdout */
  readonly logDestination?: DestinationStream
  readonly ids?: IdSource
  /** default directory for new sessions; default the process's cwd */
  readonly directory?: string
}

export interface Chronicle {
  readonly config: ChronicleConfig
  readonly store: EventStore
  readonly app: App
  readonly logger: Logger
  readonly token: TokenInfo
  /** listens; resolves with the base URL */
  start(): Promise<string>
  /** stop accepting, bring runs to a safe point, flush the appender, close the database */
  stop(): Promise<void>
}

export const VERSION: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version

export async function createChronicle(config: ChronicleConfig, options: ChronicleOptions = {}): Promise<Chronicle> {
  if (!isLoopback(config.host) && !config.token) {
    throw new ChronicleError(
      'FORBIDDEN',
      `refusing to listen on ${config.host} (reachable from other machines) without an explicit token: set CHRONICLE_TOKEN`,
    )
  }
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 })
  const token = resolveToken(config.dataDir, config.token)
  const logger = createLogger({
    level: config.logLevel,
    secrets: [token.token, config.provider.apiKey, config.provider.openaiApiKey],
    ...(options.logDestination && { destination: options.logDestination }),
  })
  const store = openStore(join(config.dataDir, 'chronicle.db'))
  const ids = options.ids ?? createIdSource()
  const agents = resolveAgents(config.agents)

  const permissions: PermissionPort = {
    reply(sessionId, requestId, reply, message) {
      execute(store, sessionId, (s) => decidePermission({ type: 'reply', requestId, reply, ...(message !== undefined && { message }) }, s, sessionId, ids), {
        meta: { actor: 'user', request: requestId },
        durability: 'full',
      })
    },
    revoke(sessionId, ruleId) {
      execute(store, sessionId, (s) => decidePermission({ type: 'revoke', ruleId }, s, sessionId, ids), { meta: { actor: 'user' }, durability: 'full' })
    },
  }
  const runtime = undefined as RuntimePort | undefined

  const deps: AppDeps = {
    store,
    ids,
    logger,
    security: { token: token.token, allowedHosts: allowedHosts(config), allowedOrigins: config.allowedOrigins },
    limits: config.limits,
    defaults: { directory: options.directory ?? process.cwd(), agent: 'build', model: config.model ?? null },
    version: VERSION,
    agents: new Set(agents.keys()),
    permissions,
    ...(runtime && { runtime }),
  }
  const app = await buildApp(deps)

  let stopping: Promise<void> | undefined
  return {
    config,
    store,
    app,
    logger,
    token,
    async start() {
      await app.listen({ host: config.host, port: config.port })
      const address = app.server.address()
      const port = typeof address === 'object' && address ? address.port : config.port
      const host = config.host.includes(':') ? `[${config.host}]` : config.host
      return `http://${host}:${port}`
    },
    stop() {
      stopping ??= (async () => {
        const closing = app.close() // stops accepting; sockets get `closing {reason: shutdown}`
        await deps.runtime?.stop() // runs reach a safe point, so waiting requests can finish
        await closing
        store.flush()
        store.close()
        logger.flush()
      })()
      return stopping
    },
  }
}

/** Host names a request may address: loopback always; a specific bind address; every local address for a wildcard bind. */
function allowedHosts(config: ChronicleConfig): string[] {
  const hosts = new Set(config.allowedHosts.map((h) => h.toLowerCase()))
  const wildcard = config.host === '0.0.0.0' || config.host === '::'
  if (wildcard) {
    for (const list of Object.values(networkInterfaces())) for (const i of list ?? []) hosts.add(i.address.toLowerCase())
  } else if (!isLoopback(config.host)) {
    hosts.add(config.host.replace(/^\[|\]$/g, '').toLowerCase())
  }
  return [...hosts]
}
