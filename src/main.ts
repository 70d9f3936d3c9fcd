import { existsSync, readFileSync } from 'node:fs'
import { networkInterfaces } from 'node:os'
import { join } from 'node:path'
import type { DestinationStream, Logger } from 'pino'
import { ChronicleError, isChronicleError } from './events/errors.js'
import { createIdSource, type IdSource } from './events/ids.js'
import { checkStoreFile, damagedMessage } from './events/integrity.js'
import { redactUrl } from './events/postgres/url.js'
import type { EventStore } from './events/store.js'
import { openStore } from './projections/open.js'
import { postgresPorts, sqlitePorts, type StorePorts } from './projections/store-ports.js'
import { openPostgresStore } from './projections/postgres/open.js'
import type { PostgresEventLog } from './events/postgres/log.js'
import { Fence } from './events/postgres/fence.js'
import { openPostgresCluster } from './events/postgres/cluster-nodes.js'
import { openPostgresWorkspaceObjects } from './events/postgres/workspace-objects.js'
import { createMembership, nodeId, queryTimeoutMs } from './runtime/cluster/membership.js'
import { recordStranded } from './runtime/cluster/stranded.js'
import type { CacheBounds } from './events/bounded-cache.js'
import { SEARCH_FILE } from './projections/search/sqlite-index.js'
import { createPostgresSearch } from './projections/search/postgres-search.js'
import { createSqliteSearch } from './projections/search/sqlite-search.js'
import type { ModelResolver } from './runtime/model/adapter.js'
import { createModelResolver } from './runtime/model/providers.js'
import { type MemoryBounds, memoryBounds } from './runtime/memory.js'
import { createRuntime, type Runtime } from './runtime/runtime.js'
import { createWorkspaceHistory } from './runtime/workspace/history.js'
import { createShadowStore } from './runtime/workspace/shadow-store.js'
import { shareSnapshots } from './runtime/workspace/shared-objects.js'
import { createBackups } from './runtime/backup/take.js'
import { createWorkspaceForks } from './runtime/workspace/forks.js'
import { createWorkspaceRestorer } from './runtime/workspace/restore.js'
import { createWorkspaceSnapshots } from './runtime/workspace/snapshots.js'
import { createSubagents } from './runtime/subagents/subagents.js'
import { watchOrphanedSubtasks } from './runtime/subagents/orphans.js'
import { createTaskTool } from './tools/builtin/task.js'
import { createTaskStatusTool } from './tools/builtin/task-status.js'
import { createDiagnostics } from './tools/lsp/diagnostics.js'
import { builtinServerPaths, lspServers } from './tools/lsp/servers.js'
import { withDiagnostics } from './tools/lsp/with-diagnostics.js'
import {
  continueRecovered,
  EMPTY_REPORT,
  mergeReports,
  recoverSessions,
  resumeBudgetFrom,
  type RecoveryReport,
} from './runtime/recovery/recovery.js'
import { resolveAgents } from './tools/agents.js'
import { createBuiltinTools } from './tools/builtin/index.js'
import { createSkillTool } from './tools/builtin/skill.js'
import { createSkillSource } from './tools/skills/skills.js'
import { createFileTimes } from './tools/file-times.js'
import type { Connector } from './tools/net/connect.js'
import type { Resolver } from './tools/net/resolve.js'
import { createMcpManager } from './tools/mcp/manager.js'
import { mcpOAuthRedirectUrl } from './tools/mcp/oauth.js'
import { createMcpSignInCallback } from './tools/mcp/oauth-callback.js'
import { createSessionRoots } from './runtime/mcp/roots.js'
import { createMcpStateLog } from './runtime/mcp/state-log.js'
import { createPermissionGate } from './runtime/permissions/gate.js'
import { createElicitationBridge } from './runtime/elicitation/bridge.js'
import { mcpElicitationHandler } from './runtime/elicitation/mcp-handler.js'
import { createRedactor, isSecretName, secretsOf, type Secret } from './tools/redact.js'
import { createToolRegistry } from './runtime/tools/registry.js'
import { credentialPaths } from './tools/credentials/credential-paths.js'
import { detectSandbox, type Sandbox } from './tools/sandbox.js'
import { isLoopback, type ChronicleConfig } from './config.js'
import { secureDataDir } from './data-dir.js'
import { checkFreeSpace } from './free-space.js'
import { keepWorkerHeapsSmall } from './worker-heaps.js'
import { buildApp, type App } from './http/app.js'
import type { AppDeps, RuntimePort } from './http/deps.js'
import { LoginCodes, loginUrl } from './http/login-codes.js'
import { OWNER } from './http/principals.js'
import { createLogger } from './http/logger.js'
import type { TraceFields } from './observability/inbound.js'
import { resolveToken, type TokenInfo } from './http/token.js'
import { DEFAULT_WEB_ROOT } from './http/web-root.js'
import { WEB_SESSIONS_FILE, WebSessions } from './http/web-sessions.js'
import { createMetrics } from './observability/metrics.js'
import { listenMetrics, type MetricsServer } from './observability/metrics-server.js'

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
  /** replaces the configured providers (tests inject a mock or scripted model here) */
  readonly models?: ModelResolver
  /** restarts a run may survive before it ends failed; default CHRONICLE_RESUME_BUDGET or 3 */
  readonly resumeBudget?: number
  /** replaces the detected sandbox (tests) */
  readonly sandbox?: Sandbox
  /** webfetch's DNS and TCP connection (tests map their own host names to their own servers) */
  readonly webfetch?: { readonly resolve?: Resolver; readonly connector?: Connector }
  /** the web login's clock and a login code's lifetime (tests; default Date.now and 10 minutes) */
  readonly web?: { readonly now?: () => number; readonly codeTtlMs?: number }
}

export interface Chronicle {
  readonly config: ChronicleConfig
  /** the store the server runs on, as its ports */
  readonly ports: StorePorts
  /** SQLite's store in the data dir; STORE_UNSUPPORTED on a server that runs on PostgreSQL */
  readonly store: EventStore
  readonly app: App
  readonly logger: Logger
  readonly token: TokenInfo
  /** where bash commands run: bubblewrap, or unconfined (unavailable: every command asks; off: the user's choice) */
  readonly sandbox: Sandbox
  /** recovers unfinished runs (settled before listening, continued after), then listens; resolves with the base URL */
  start(): Promise<string>
  /** what the last start() recovered */
  readonly recovery: RecoveryReport | undefined
  /** stop accepting, bring runs to a safe point, close the database (committing what is queued) */
  stop(): Promise<void>
  /**
   * A fresh one-time link logging a browser in as the owner (docs/API.md "Web page"), once listening:
   * `<url>/login#<code>`. Throws when the web page is off (`web: false`) or the server is not listening.
   */
  loginLink(): { url: string; code: string; expiresAt: string }
  /** the tokenless scrape address (`metrics.listen`, docs/OBSERVABILITY.md), once listening; undefined without one */
  metricsUrl(): string | undefined
}

/** (cluster) the lease's end, for the tools' watchdogs (src/tools/lease-watchdog.ts) */
const LEASE_FILE = 'cluster-lease'

export const VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version

export async function createChronicle(config: ChronicleConfig, options: ChronicleOptions = {}): Promise<Chronicle> {
  if (!isLoopback(config.host) && !config.token) {
    throw new ChronicleError(
      'FORBIDDEN',
      `refusing to listen on ${config.host} (reachable from other machines) without an explicit token: set CHRONICLE_TOKEN`,
    )
  }
  const memory = memoryBounds(config.memory)
  keepWorkerHeapsSmall() // before any worker thread: the search index's, backups', tools'
  // PostgreSQL is reached first: a server that cannot reach it (or finds it too old) has written nothing yet
  // a node of a cluster holds the sessions it owns (docs/CLUSTER.md): every append is fenced by them
  const fence = config.cluster ? new Fence(nodeId(config.cluster.node)) : undefined
  const postgres = config.store.url
    ? await openPostgresStore(config.store.url, { cache: memory.projector, ...(fence && { fence, follow: true }) })
    : undefined
  try {
    return await assemble(config, options, memory, postgres, fence)
  } catch (err) {
    await postgres?.close()
    throw err
  }
}

/** The server around its store: PostgreSQL's log when given, else SQLite's in the data dir. */
async function assemble(
  config: ChronicleConfig,
  options: ChronicleOptions,
  memory: MemoryBounds,
  postgres: PostgresEventLog | undefined,
  fence: Fence | undefined,
): Promise<Chronicle> {
  const dbPath = secureDataDir(config.dataDir, { sqlite: postgres === undefined })
  checkFreeSpace(config.dataDir, config.limits.minFreeBytes)
  const token = resolveToken(
    config.dataDir,
    config.token ? { token: config.token, source: config.tokenSource ?? 'config' } : undefined,
  )
  // with traces on, a line logged about a session carries its open run's trace and span ids, once tracing starts
  const runTrace: { fieldsOf?: (sessionId: string) => TraceFields | undefined } = {}
  const logger = createLogger({
    level: config.logLevel,
    ...(config.traces.endpoint && { traceFieldsOf: (sessionId: string) => runTrace.fieldsOf?.(sessionId) }),
    secrets: [
      token.token,
      config.provider.apiKey,
      config.provider.openaiApiKey,
      config.provider.anthropicApiKey,
      config.provider.googleApiKey,
    ],
    ...(options.logDestination && { destination: options.logDestination }),
    // JSON lines, or pino-pretty where the log goes to a terminal (CHRONICLE_LOG_FORMAT overrides)
    format: config.logFormat,
  })
  const redactor = createRedactor(serverSecrets(config, token.token))
  // Nothing a tool runs may see or touch Chronicle's own state: the data dir and the config file.
  const hidden = [config.dataDir, ...(config.configFile ? [config.configFile] : [])]
  // Nor the user's credentials (~/.ssh, ~/.aws, …): hidden in the sandbox, asked for by the file tools (docs/SECURITY.md)
  const credentials = credentialPaths(config.sandbox)
  const sandbox =
    options.sandbox ??
    (await detectSandbox(config.sandbox.mode, {
      network: config.sandbox.network === true,
      hidden,
      credentials,
      // the language servers run confined too, from Chronicle's own install, wherever that lies
      ...(config.lsp !== false && { expose: builtinServerPaths() }),
    }))
  if (sandbox.kind === 'unavailable') {
    logger.warn(
      { reason: sandbox.reason },
      'no sandbox: every bash command will need approval (install bubblewrap, or set "sandbox": "off" in your config)',
    )
  }
  // The web page and its login: codes in memory, cookie sessions in the data dir (docs/SECURITY.md "The web page"):
  // read before the store opens, so an unsafe sessions file stops the start with nothing left open.
  const web = config.web.enabled
    ? {
        root: config.web.root ?? DEFAULT_WEB_ROOT,
        codes: new LoginCodes({
          ...(options.web?.now && { now: options.web.now }),
          ...(options.web?.codeTtlMs !== undefined && { ttlMs: options.web.codeTtlMs }),
        }),
        sessions: new WebSessions({
          file: join(config.dataDir, WEB_SESSIONS_FILE),
          key: token.token,
          ...(options.web?.now && { now: options.web.now }),
          warn: (message) => logger.warn(message),
        }),
      }
    : undefined
  // The store: PostgreSQL when the config names one (docs/ARCHITECTURE.md "The store port"), else SQLite in the data dir.
  const served = postgres
    ? servePostgres(postgres, config.store.url as string, logger)
    : serveSqlite(dbPath, memory.projector, logger)
  const { ports } = served
  // What only SQLite's file has: its search index, backups of the file, the full disk it saw (docs/ARCHITECTURE.md).
  const store = served.sqlite
  // full-text search (docs/SEARCH.md), built off the append path: SQLite's in its own file by a worker thread,
  // PostgreSQL's in the store's database by an indexer on a connection of its own
  const onSearchError = (err: Error) =>
    logger.error({ err }, 'the search indexer stopped; it starts again at the next search')
  const search = store
    ? createSqliteSearch({ store, source: dbPath, path: join(config.dataDir, SEARCH_FILE), onError: onSearchError })
    : postgres && createPostgresSearch({ log: postgres, url: config.store.url as string, onError: onSearchError })
  // Metrics and traces read the commits (docs/OBSERVABILITY.md): they listen before recovery appends anything.
  const metrics = config.metrics.enabled ? createMetrics(ports) : undefined
  // the OpenTelemetry SDK is loaded only when traces are on: it adds some 150 ms to a start
  const tracing = config.traces.endpoint
    ? (await import('./observability/tracing.js')).startTracing(ports.log, {
        endpoint: config.traces.endpoint,
        content: config.traces.content,
        version: VERSION,
      })
    : undefined
  if (tracing) runTrace.fieldsOf = tracing.fieldsOf
  // Workspace history (docs/TIME-TRAVEL.md): a shadow object store of the session directories, in the data dir.
  const ownShadow = createShadowStore({
    root: join(config.dataDir, 'workspaces'),
    maxFileBytes: config.workspace.maxFileBytes,
    exclude: [config.dataDir, ...(config.configFile ? [config.configFile] : [])],
  })
  // On a cluster its snapshots are shared (docs/CLUSTER.md "Workspaces that move"): any node writes any recorded tree.
  const sharedObjects = config.cluster && config.store.url ? openPostgresWorkspaceObjects(config.store.url) : undefined
  const shadow = sharedObjects
    ? shareSnapshots(ownShadow, sharedObjects, join(config.dataDir, 'workspaces', 'objects.git'))
    : ownShadow
  const ids = options.ids ?? createIdSource()
  const restorer = createWorkspaceRestorer({ ports, shadow, ids, log: logger })
  const forks = createWorkspaceForks({
    ports,
    ids,
    shadow,
    forksDir: join(config.dataDir, 'forks'),
    forbidden: hidden,
    credentials,
    log: logger,
  })
  const directory = options.directory ?? process.cwd()
  // (cluster) the lease's end, rewritten at each heartbeat: the watchdogs of tools and servers read it
  const leaseFile = config.cluster ? join(config.dataDir, LEASE_FILE) : undefined
  // Last match wins: each agent's defaults, the config file's global rules, then the agent's configured rules.
  const agents = resolveAgents(config.agents, config.rules)
  const gate = createPermissionGate({ ports, ids, agents })
  // an MCP server's elicitation/create, asked in the session whose call is in flight (docs/TOOLS.md "Elicitation")
  const elicitations = createElicitationBridge({ ports, ids, log: logger, redactor })
  // MCP servers' state is events in the system stream sys_mcp; roots: the directories sessions work in (docs/TOOLS.md)
  const roots = await createSessionRoots(ports, directory, [directory, join(config.dataDir, 'forks')])
  const mcp = createMcpManager(config.mcp, {
    directory,
    dataDir: config.dataDir,
    sandbox,
    ...(leaseFile && { leaseFile }),
    oauthRedirectUrl: mcpOAuthRedirectUrl(config.port),
    learnSecrets: (secrets) => redactor.learn(secrets),
    onStatus: (status) => logger.info({ mcp: status }, 'mcp server status'),
    onEvent: createMcpStateLog({
      log: ports.log,
      servers: config.mcp,
      redactor,
      warn: (obj, msg) => logger.warn(obj, msg),
    }),
    roots: () => roots.list(),
    onElicitation: mcpElicitationHandler(elicitations, logger),
  })
  roots.onChange(() => void mcp.rootsChanged())
  // skills: the user's, then the session directory's, which are instructions only (docs/SECURITY.md)
  const skills = createSkillSource({ userDir: config.skillsDir, forbidden: hidden, credentials })
  // this server's own port is never reached on this machine, whatever the config allows (docs/SECURITY.md)
  const ownPorts = () => {
    const address = app.server.address()
    return typeof address === 'object' && address ? [address.port] : [config.port]
  }
  // language servers run in the same sandbox as bash, from Chronicle's install or the user's config only
  const diagnostics =
    config.lsp === false
      ? undefined
      : createDiagnostics({
          servers: lspServers(config.lsp.servers),
          sandbox,
          deadlineMs: config.lsp.timeoutMs,
          ...(leaseFile && { leaseFile }),
        })
  const tools = createToolRegistry({
    agents,
    mcp,
    tools: [
      ...createBuiltinTools({
        dataDir: config.dataDir,
        ...(leaseFile && { leaseFile }),
        forbidden: hidden,
        credentials,
        fileTimes: createFileTimes(memory.fileTimes),
        sandbox,
        redactor,
        childEnv: { set: config.sandbox.env, pass: config.sandbox.passEnv },
        // a list of hosts: each command's own proxy, with webfetch's address checks (docs/SECURITY.md)
        ...(Array.isArray(config.sandbox.network) && {
          network: {
            hosts: config.sandbox.network,
            unlisted: config.sandbox.unlistedHosts,
            net: {
              allowHosts: config.webfetch.allowHosts,
              ownPorts,
              ...(options.webfetch?.resolve && { resolve: options.webfetch.resolve }),
            },
            ...(options.webfetch?.connector && { connector: options.webfetch.connector }),
          },
        }),
        webfetch: { settings: config.webfetch, ownPorts, ...options.webfetch },
        ...(config.websearch && { websearch: config.websearch }),
        updateTodos: (sessionId, items) =>
          ports.log
            .enqueue(sessionId, [{ type: 'todo.updated', data: { items } }], { meta: { actor: 'tool' } })
            .then(() => undefined),
      }).map((tool) => (diagnostics ? withDiagnostics(tool, diagnostics) : tool)),
      createTaskTool({
        agents,
        run: (request) => subagents.run(request),
        start: (request) => subagents.start(request),
      }),
      createTaskStatusTool({ status: (sessionId, taskId, cancel) => subagents.status(sessionId, taskId, cancel) }),
      createSkillTool({ skills }),
    ],
  })
  const models = options.models ?? configuredModels(config)
  const workspace = config.workspace.snapshots ? createWorkspaceSnapshots({ ports, shadow, log: logger }) : undefined
  const runtime = createRuntime({
    ports,
    ids,
    models,
    tools,
    permissions: gate,
    agents,
    serverInstructions: () => mcp.instructions(),
    skills,
    log: logger,
    redactor,
    ...(workspace && { workspace }),
    limits: {
      maxInputBytes: config.limits.inputBytes,
      maxFileBytes: config.limits.fileBytes,
      retry: { stallMs: config.limits.modelStallMs },
    },
    forbidden: hidden,
    titles: config.titles,
    compaction: { ...config.compaction, models: config.models },
    continueOnReject: config.continueOnReject,
    memory: { views: memory.views, inputs: memory.inputs },
    ...(fence && { leased: () => fence.leased, holds: (sessionId: string) => fence.epochOf(sessionId) !== undefined }),
  })
  // Sub-agents (task tool) need the runtime, which needs the tools: bound late. Orphans: children of interrupted task calls.
  const subagents = createSubagents({ ports, ids, agents, runtime: (): Runtime => runtime })
  const orphans = watchOrphanedSubtasks({ ports, subagents, runtime: () => runtime, log: logger })
  const budget = options.resumeBudget ?? resumeBudgetFrom(process.env)
  /**
   * Crash recovery (docs/RECOVERY.md) of `among` (every session, or a cluster node's claimed ones): reverts and
   * fork directories a crash cut off finished, unfinished runs settled; continuing them is the caller's.
   */
  const recover = async (among?: ReadonlySet<string>): Promise<RecoveryReport> => {
    // A revert a crash cut off is finished first: a resumed run must find the files the log says.
    await restorer.recover(among)
    await forks.recover(among)
    // Claimed on a cluster: a run the dead node left open resumes on the files its log last recorded.
    if (among && sharedObjects)
      for (const sessionId of among)
        await restorer.handover(sessionId).catch((err: unknown) => {
          logger.warn({ err, sessionId }, 'the claimed session’s directory could not be written from its last snapshot')
        })
    const report = await recoverSessions(ports, { budget, ...(among && { among }) })
    // A run recovery ended is not continued, so nothing else records what its cut-off tools left in the files.
    for (const id of [...report.cancelled, ...report.failed]) {
      const directory = (await ports.readModels.session(id))?.directory
      if (workspace && directory) await workspace.record(id, directory, 'recovery', { actor: 'recovery' })
    }
    return report
  }
  // On a cluster (docs/CLUSTER.md) this node runs the sessions it holds: one it loses stops here at once.
  fence?.onLost((sessionId) => void runtime.release(sessionId))
  let listened: Promise<boolean> = Promise.resolve(false)
  let recovery: RecoveryReport | undefined
  /** in start(), before the recovered runs are handed on: what is claimed meanwhile joins them */
  let starting = true
  const claimedWhileStarting: (() => void)[] = []
  const membership =
    fence && config.cluster
      ? createMembership({
          store: openPostgresCluster(config.store.url as string, queryTimeoutMs(config.cluster), {
            host: config.cluster.host,
            sharedDirectories: config.cluster.sharedDirectories,
          }),
          fence,
          name: config.cluster.node,
          address: config.cluster.address,
          heartbeatMs: config.cluster.heartbeatMs,
          ttlMs: config.cluster.ttlMs,
          ...(leaseFile && { leaseFile }),
          log: logger,
          // a run let go of at a lapsed lease stops before its session is held again (it appends nothing more)
          beforeHold: async (claimed) => {
            await Promise.all(claimed.map((sessionId) => runtime.release(sessionId)))
          },
          // a dead node's sessions no live node may take over: said so in their logs (docs/CLUSTER.md)
          onStranded: async (stranded) => {
            await recordStranded(ports.log, stranded)
          },
          onClaimed: async (claimed) => {
            // a command another node took meanwhile wakes a claimed session once its resumed run is handed on
            const handedOn = runtime.recovering(claimed)
            const among = new Set(claimed)
            let report: RecoveryReport
            try {
              report = await recover(among)
              // children that finished while a claimed parent's task call was cut off, or claimed finished
              await orphans.sweep(among)
            } catch (err) {
              handedOn()
              throw err
            }
            // claimed while starting: continued once listening, with the rest of the start's recovery
            if (starting) {
              recovery = mergeReports(recovery ?? EMPTY_REPORT, report)
              claimedWhileStarting.push(handedOn)
              return
            }
            void continueRecovered(report, runtime, listened)
            handedOn()
          },
        })
      : undefined
  const runtimePort: RuntimePort = {
    wake: (sessionId) => runtime.wake(sessionId),
    idle: (sessionId, input) => runtime.idle(sessionId, input),
    stop: () => runtime.stop(),
  }

  const deps: AppDeps = {
    ...(membership && { cluster: membership }),
    ports,
    ...(store && { storageFull: () => store.storageFull }),
    ids,
    logger,
    ...(metrics && { metrics }),
    ...(tracing && { tracing: tracing.inbound }),
    security: { token: token.token, allowedHosts: allowedHosts(config), allowedOrigins: config.allowedOrigins },
    limits: config.limits,
    defaults: { directory, agent: 'build', model: config.model ?? null },
    version: VERSION,
    agents: new Set(agents.keys()),
    runtime: runtimePort,
    submit: runtime.submitContext,
    timeTravel: ports.timeTravel,
    context: (sessionId, at) => runtime.context(sessionId, at),
    workspace: createWorkspaceHistory(ports, shadow),
    restorer,
    ...(config.workspace.snapshots && { forks }),
    dataDir: config.dataDir,
    ...(web && { web }),
    mcpSignIn: createMcpSignInCallback({
      servers: config.mcp,
      dataDir: config.dataDir,
      redirectUrl: mcpOAuthRedirectUrl(config.port),
      signedIn: (server) => mcp.reconnect(server),
    }),
    ...(store && {
      backups: createBackups({ store, workspaces: join(config.dataDir, 'workspaces'), version: VERSION }),
    }),
    ...(search && { search }),
    mcpSignIns: () =>
      new Map(
        mcp
          .status()
          .flatMap((s) => (s.state === 'needs-auth' && s.authorizationUrl ? [[s.name, s.authorizationUrl]] : [])),
      ),
  }
  const app = await buildApp(deps)

  let stopping: Promise<void> | undefined
  /** where a browser reaches the server, once listening (a wildcard bind: loopback) */
  let browserBase: string | undefined
  let metricsServer: MetricsServer | undefined
  return {
    config,
    ports,
    get store() {
      if (!store)
        throw new ChronicleError('STORE_UNSUPPORTED', 'this server runs on PostgreSQL: read it through `ports`')
      return store
    },
    app,
    logger,
    token,
    sandbox,
    get recovery() {
      return recovery
    },
    async start() {
      void mcp.start() // never rejects: a failing server is a status, and the HTTP side need not wait
      // a default model this server cannot build is said now, not at the first prompt
      const problem = defaultModelProblem(config, models)
      if (problem) {
        logger.warn({ model: config.model, code: problem.code }, `the default model cannot be used: ${problem.message}`)
      }
      // Crash recovery (docs/RECOVERY.md): settle before anyone can connect; continue the runs once listening.
      // A node of a cluster owns nothing yet: it joins, and recovers what it claims (the dead nodes' sessions).
      recovery = membership ? EMPTY_REPORT : await recover()
      if (membership) await membership.start()
      const listening = app.listen({ host: config.host, port: config.port })
      listened = listening.then(
        () => true,
        () => false,
      )
      // The resumed runs are the runtime's before anyone can connect (a cancel or an input that comes first finds
      // them held); they start once the server listens.
      void continueRecovered(recovery, runtime, listened)
      starting = false
      for (const handedOn of claimedWhileStarting.splice(0)) handedOn()
      await listening
      if (metrics && config.metrics.listen) {
        metricsServer = await listenMetrics(metrics, config.metrics.listen.host, config.metrics.listen.port)
        logger.info({ url: `${metricsServer.url}/metrics` }, 'metrics served without a token')
      }
      // children that finished while their parent's task call was cut off (on a cluster: at each claim, above)
      if (!membership) await orphans.sweep()
      const { resumed, cancelled, failed, deliver, ms } = recovery
      if (resumed.length + cancelled.length + failed.length + deliver.length > 0) {
        logger.info(
          { resumed: resumed.length, cancelled: cancelled.length, failed: failed.length, woken: deliver.length, ms },
          'recovered unfinished runs',
        )
      }
      const address = app.server.address()
      const port = typeof address === 'object' && address ? address.port : config.port
      const host = config.host.includes(':') ? `[${config.host}]` : config.host
      const reachable = config.host === '0.0.0.0' ? '127.0.0.1' : config.host === '::' ? '[::1]' : host
      browserBase = `http://${reachable}:${port}`
      if (web && !existsSync(join(web.root, 'index.html')))
        logger.warn({ root: web.root }, 'the web page is not built (no index.html): run `npm run build`')
      return `http://${host}:${port}`
    },
    metricsUrl: () => metricsServer?.url,
    loginLink() {
      if (!web) throw new ChronicleError('NOT_FOUND', 'the web page is off ("web": false in the config)')
      if (!browserBase) throw new ChronicleError('BAD_REQUEST', 'the server is not listening yet: start() first')
      const { code, expiresAt } = web.codes.mint(OWNER.id)
      return { url: loginUrl(browserBase, code), code, expiresAt }
    },
    stop() {
      stopping ??= (async () => {
        const closing = app.close() // stops accepting; sockets get `closing {reason: shutdown}`
        await runtime.stop() // runs reach a safe point (left open for recovery), so waiting requests can finish
        await membership?.stop({ leave: true }) // the other nodes claim its sessions at once and resume them
        await closing
        await metricsServer?.close()
        await tracing?.close()
        metrics?.close()
        await mcp.close()
        roots.close()
        gate.close()
        elicitations.close()
        orphans.close()
        diagnostics?.close() // the language servers
        shadow.close()
        await sharedObjects?.close()
        await search?.close()
        await served.close()
        logger.flush()
      })()
      return stopping
    },
  }
}

/** The providers the configuration names: the default model, base URLs, API keys, per-model settings. */
export function configuredModels(config: ChronicleConfig): ModelResolver {
  return createModelResolver({
    defaultModel: config.model ?? null,
    ...(config.provider.baseURL && { baseURL: config.provider.baseURL }),
    ...(config.provider.apiKey && { apiKey: config.provider.apiKey }),
    ...(config.provider.openaiBaseURL && { openaiBaseURL: config.provider.openaiBaseURL }),
    ...(config.provider.openaiApiKey && { openaiApiKey: config.provider.openaiApiKey }),
    ...(config.provider.anthropicBaseURL && { anthropicBaseURL: config.provider.anthropicBaseURL }),
    ...(config.provider.anthropicApiKey && { anthropicApiKey: config.provider.anthropicApiKey }),
    ...(config.provider.googleBaseURL && { googleBaseURL: config.provider.googleBaseURL }),
    ...(config.provider.googleApiKey && { googleApiKey: config.provider.googleApiKey }),
    models: config.models,
  })
}

/**
 * Why the configured default model cannot be built, if it cannot (e.g. UNKNOWN_MODEL): warned at
 * start, so it is not first met at the first prompt, and reported by `chronicle doctor`.
 */
export function defaultModelProblem(
  config: ChronicleConfig,
  models: ModelResolver,
): { readonly code: string; readonly message: string } | undefined {
  if (!config.model) return undefined
  try {
    models.validate(config.model)
    return undefined
  } catch (err) {
    return {
      code: isChronicleError(err) ? err.code : 'INTERNAL',
      message: err instanceof Error ? err.message : String(err),
    }
  }
}

/** Every secret value the server holds: kept out of the log (src/tools/redact.ts). */
function serverSecrets(config: ChronicleConfig, token: string): Secret[] {
  const named = (name: string, value: string | undefined): Secret[] => (value ? [{ name, value }] : [])
  return [
    ...named('CHRONICLE_TOKEN', token),
    ...secretsOf(process.env), // before the config's keys: a value found in both keeps its variable's name
    ...named('api key', config.provider.apiKey),
    ...named('OpenAI API key', config.provider.openaiApiKey),
    ...named('Anthropic API key', config.provider.anthropicApiKey),
    ...named('Google API key', config.provider.googleApiKey),
    // the search provider's headers (its key): never shown, whatever the provider echoes
    ...(config.websearch?.secrets ?? []),
    ...Object.entries(config.websearch?.headers ?? {}).flatMap(([h, value]) => named(`websearch ${h}`, value)),
    ...config.mcp.flatMap((server) =>
      server.type === 'remote'
        ? [
            ...Object.entries(server.headers).flatMap(([h, value]) =>
              isSecretName(h) ? [{ name: `${server.name} ${h}`, value }] : [],
            ),
            // a configured OAuth client's secret or key (signed-in tokens live only in the data dir's mcp-oauth.json)
            ...(server.oauth ? named(`${server.name} oauth.clientSecret`, server.oauth.clientSecret) : []),
            ...(server.oauth ? named(`${server.name} oauth.privateKey`, server.oauth.privateKey) : []),
          ]
        : secretsOf(server.environment).map((s) => ({ ...s, name: `${server.name} ${s.name}` })),
    ),
  ]
}

/** Host names a request may address: loopback always; a specific bind address; every local address for a wildcard bind. */
function allowedHosts(config: ChronicleConfig): string[] {
  const hosts = new Set(config.allowedHosts.map((h) => h.toLowerCase()))
  const wildcard = config.host === '0.0.0.0' || config.host === '::'
  if (wildcard) {
    for (const list of Object.values(networkInterfaces()))
      for (const i of list ?? []) hosts.add(i.address.toLowerCase())
  } else if (!isLoopback(config.host)) {
    hosts.add(config.host.replace(/^\[|\]$/g, '').toLowerCase())
  }
  return [...hosts]
}

/** The store a server runs on, as its ports; SQLite's own store beside them when that is the engine. */
interface ServedStore {
  readonly ports: StorePorts
  readonly sqlite?: EventStore
  /** commits what is queued, then closes */
  close(): Promise<void>
}

/** SQLite in the data dir. Damaged files are found, not served (docs/BACKUP.md "Damaged files"). */
function serveSqlite(dbPath: string, cache: CacheBounds, logger: Logger): ServedStore {
  const check = checkStoreFile(dbPath)
  if (check.problems.length > 0)
    throw new ChronicleError('STORE_DAMAGED', damagedMessage(dbPath, check.problems), { file: dbPath })
  logger.debug({ ms: Math.round(check.ms) }, 'store checked')
  const store = openStore(dbPath, { cache })
  return { ports: sqlitePorts(store), sqlite: store, close: async () => store.close() }
}

/**
 * PostgreSQL at `url` (CHRONICLE_DATABASE_URL or the config's store.url), opened before anything else: unreachable
 * or older than 15, the start fails naming it, the password hidden (STORE_UNAVAILABLE, STORE_UNSUPPORTED).
 */
function servePostgres(log: PostgresEventLog, url: string, logger: Logger): ServedStore {
  logger.info({ store: redactUrl(url) }, 'serving on PostgreSQL')
  return { ports: postgresPorts(log), close: () => log.close() }
}
