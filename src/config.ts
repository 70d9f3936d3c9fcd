import { existsSync, readFileSync } from 'node:fs'
import { homedir, hostname } from 'node:os'
import { delimiter, dirname, isAbsolute, join, resolve } from 'node:path'
import { z } from 'zod'
import { PermissionRule } from './events/catalogue.js'
import { ChronicleError } from './events/errors.js'
import { DEFAULT_WEBFETCH, type WebFetchSettings } from './tools/builtin/webfetch.js'
import { SEARXNG_FIELDS, type WebSearchSettings } from './tools/builtin/websearch.js'
import { DEFAULT_DIAGNOSTICS_DEADLINE_MS } from './tools/lsp/diagnostics.js'
import type { ConfiguredServer } from './tools/lsp/servers.js'
import { defaultHiddenPatterns } from './tools/credentials/defaults.js'
import { entryProblem, expandEntry, patternMayReach } from './tools/credentials/entry.js'
import { McpConfigFile, parseMcpConfig, type McpServerConfig } from './tools/mcp/config.js'
import { type HostPattern, parseHostPattern } from './tools/net/host-list.js'

export type { McpServerConfig }

/**
 * Configuration (docs/SECURITY.md, README): environment variables, optionally
 * overridden by the user's config file — `--config <file>`, else
 * `$XDG_CONFIG_HOME/chronicle/chronicle.json`, else `chronicle.json` in the
 * data directory. Both are the user's own: the data directory defaults to
 * `$XDG_DATA_HOME/chronicle` (else `~/.local/share/chronicle`), never a
 * directory under the current one, so nothing a repository ships can set the
 * token, host, origins, MCP servers, providers or rules. Everything is
 * validated with zod; a bad file is a clear error naming the offending paths,
 * never a crash deep inside the server.
 */

const ModelInfo = z.object({
  contextWindow: z.number().int().positive().optional(),
  maxOutput: z.number().int().positive().optional(),
  /** USD per million tokens: a step's cost, and the session's total (cached input: default the input price) */
  inputPrice: z.number().nonnegative().optional(),
  outputPrice: z.number().nonnegative().optional(),
  cachedInputPrice: z.number().nonnegative().optional(),
  /** sampling settings applied to every call of the model (maxOutput as its max output tokens) */
  temperature: z.number().min(0).max(2).optional(),
  topP: z.number().gt(0).max(1).optional(),
  /** tokens kept free below the window before compaction (default min(20k, 15% of the window)) */
  reserved: z.number().int().nonnegative().optional(),
  /** what the model takes besides text (default: images and PDFs, none for compatible:) */
  accepts: z.array(z.enum(['image', 'pdf'])).optional(),
})

/** Context compaction (docs/COMPACTION.md). `auto: false` turns off automatic and overflow compaction; manual still works. */
const CompactionSettings = z.object({
  auto: z.boolean().optional(),
  reserved: z.number().int().nonnegative().optional(),
  tail: z.number().int().positive().optional(),
  maxShrinks: z.number().int().nonnegative().max(10).optional(),
  defaultContextWindow: z.number().int().positive().optional(),
  /** pruning old tool outputs before compaction is needed (docs/COMPACTION.md "Pruning") */
  prune: z
    .object({
      enabled: z.boolean().optional(),
      protect: z.number().int().nonnegative().optional(),
      minimum: z.number().int().nonnegative().optional(),
    })
    .strict()
    .optional(),
})

/**
 * `permission`: the rules added after every agent's own (last match wins), as a list; or, to set
 * more than the rules, `{rules, continueOnReject}`. `continueOnReject: true` keeps a run going
 * when a person rejects a permission request without a message (the call fails `denied` and the
 * model goes on); by default such a reject ends the run `rejected` (docs/TOOLS.md).
 */
const PermissionSettings = z.union([
  z.array(PermissionRule),
  z
    .object({
      rules: z.array(PermissionRule).optional(),
      continueOnReject: z.boolean().optional(),
    })
    .strict(),
])

const AgentConfig = z.object({
  description: z.string().optional(),
  mode: z.enum(['primary', 'subagent', 'all']).optional(),
  prompt: z.string().optional(),
  maxSteps: z.number().int().positive().optional(),
  rules: z.array(PermissionRule).optional(),
})

/** A `sandbox.hide` / `sandbox.reveal` entry: `/abs/path` or `~/path`, `*` and `?` within a segment. */
const HiddenEntry = z.string().superRefine((entry, ctx) => {
  const problem = entryProblem(entry)
  if (problem) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(entry)} ${problem}` })
})

/** A `sandbox.network` entry: `host`, `*.domain`, an IP, each with an optional `:port` (src/tools/net/host-list.ts). */
const HostEntry = z.string().superRefine((entry, ctx) => {
  const parsed = parseHostPattern(entry)
  if (typeof parsed === 'string') ctx.addIssue({ code: 'custom', message: `${JSON.stringify(entry)} ${parsed}` })
})

/**
 * The OS sandbox bash runs in (docs/SECURITY.md): `auto` (default) uses
 * bubblewrap when it can run — otherwise every bash call asks —, `off` runs
 * commands unconfined. `network`: `false` (default) gives sandboxed commands
 * no network, `true` all of it, a list of hosts only those, through a proxy
 * of the server's (docs/SECURITY.md "The network by host"), where
 * `unlistedHosts: "ask"` asks the `network` permission for any other host
 * instead of refusing it;
 * `env` adds variables to the allow-listed environment, `passEnv` names
 * server variables to pass through. `hide` adds paths to the user's
 * credentials hidden from every tool (`~/.ssh`, … by default), `reveal` takes
 * paths back (docs/SECURITY.md "What the sandbox hides"); only the user's own
 * config file is ever read, never a workspace's.
 */
const SandboxSettings = z.union([
  z.enum(['auto', 'off']),
  z
    .object({
      mode: z.enum(['auto', 'off']).optional(),
      network: z.union([z.boolean(), z.array(HostEntry)]).optional(),
      unlistedHosts: z.enum(['refuse', 'ask']).optional(),
      env: z.record(z.string(), z.string()).optional(),
      passEnv: z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name')).optional(),
      hide: z.array(HiddenEntry).optional(),
      reveal: z.array(HiddenEntry).optional(),
    })
    .strict(),
])

export interface SandboxConfig {
  readonly mode: 'auto' | 'off'
  /** all or nothing, or the hosts a command may reach through the sandbox's proxy */
  readonly network: boolean | readonly HostPattern[]
  /** a host off the `network` list: refused, or asked for (`network`, pattern = the host) */
  readonly unlistedHosts: 'refuse' | 'ask'
  readonly env: Readonly<Record<string, string>>
  readonly passEnv: readonly string[]
  /** absolute patterns: the default credential paths for this HOME, then `sandbox.hide` */
  readonly hide: readonly string[]
  /** absolute patterns: `sandbox.reveal` */
  readonly reveal: readonly string[]
}

/**
 * The web page (docs/API.md "Web page"): `false` (or `enabled: false`) serves
 * no page and accepts no login or session cookie; `root` is the directory of
 * the built page (`index.html`, `assets/`), default the package's `dist/web`
 * (a relative root is taken from the config file's directory).
 */
const WebSettings = z.union([
  z.boolean(),
  z.object({ enabled: z.boolean().optional(), root: z.string().min(1).optional() }).strict(),
])

/**
 * Metrics (docs/OBSERVABILITY.md): on by default at `GET /metrics` for an
 * admin token; `listen` ("host:port", or a port on 127.0.0.1) opens a second
 * address that serves only `/metrics`, without a token, for a scraper.
 */
const ListenAddress = z
  .string()
  .regex(/^(\[[0-9a-fA-F:.]+\]|[^:\s[\]]+):\d{1,5}$/, 'expected "host:port"')
  .refine((s) => Number(s.slice(s.lastIndexOf(':') + 1)) <= 65535, 'the port must be at most 65535')
const MetricsSettings = z.union([
  z.boolean(),
  z
    .object({
      enabled: z.boolean().optional(),
      listen: z.union([z.number().int().min(0).max(65535), ListenAddress]).optional(),
    })
    .strict(),
])

export interface MetricsConfig {
  readonly enabled: boolean
  /** where the tokenless scrape address listens, if the user's config names one */
  readonly listen: { readonly host: string; readonly port: number } | undefined
}

export interface WebConfig {
  readonly enabled: boolean
  /** the built page's directory; undefined: the package's own `dist/web` (src/http/web-root.ts) */
  readonly root: string | undefined
}

/**
 * The per-session state held in memory (docs/ARCHITECTURE.md "Memory"): views of sessions, their
 * transcripts, the projection's cached entities, input indexes. A session unused for `idleSeconds`
 * is dropped from them and rebuilt from the store when next used; past `cacheSessions` sessions or
 * about `cacheMb` megabytes, the least recently used go first.
 */
const MemorySettings = z
  .object({
    idleSeconds: z.number().int().positive().optional(),
    cacheMb: z.number().positive().optional(),
    cacheSessions: z.number().int().positive().optional(),
  })
  .strict()

export interface MemoryConfig {
  readonly idleMs: number
  readonly cacheBytes: number
  readonly cacheSessions: number
}

export const DEFAULT_MEMORY: MemoryConfig = { idleMs: 120_000, cacheBytes: 48 * 2 ** 20, cacheSessions: 512 }

/**
 * webfetch (docs/TOOLS.md "webfetch", docs/SECURITY.md "Server-side request forgery"): `allowHosts`
 * names hosts (exactly, or `*.example.com` for the names below it) whose addresses are not
 * checked, e.g. an intranet server on a private address; the server's own port stays refused.
 * `maxBytes` caps a body after decompression, `timeoutSeconds` is the default wait for a page
 * (`maxTimeoutSeconds` the most a call may ask for), `maxRedirects` the hops followed.
 */
/**
 * Language-server diagnostics after edits (docs/TOOLS.md "Diagnostics"): `false` turns them off;
 * `timeoutSeconds` is how long an edit waits for them (default 3); `servers` adds servers by name
 * (`{extensions, command}`), which win over the built-in ones for their extensions.
 */
const LspConfig = z.union([
  z.literal(false),
  z
    .object({
      timeoutSeconds: z.number().positive().max(60).optional(),
      servers: z
        .record(
          z.string().min(1),
          z
            .object({ extensions: z.array(z.string().min(1)).min(1), command: z.array(z.string().min(1)).min(1) })
            .strict(),
        )
        .optional(),
    })
    .strict(),
])

const WebFetchConfig = z
  .object({
    allowHosts: z.array(z.string().min(1)).optional(),
    maxBytes: z.number().int().positive().optional(),
    timeoutSeconds: z.number().positive().optional(),
    maxTimeoutSeconds: z.number().positive().optional(),
    maxRedirects: z.number().int().nonnegative().max(20).optional(),
  })
  .strict()

/**
 * websearch (docs/TOOLS.md "websearch"): off unless `url` names a provider. `url` takes `{query}`
 * and `{limit}`; `headers` go to the provider's origin only, and `{env:NAME}` in a header's value
 * is that variable of the server's environment (a key kept out of the file); `fields` says where a
 * JSON answer holds its results (default SearXNG's: `results`, `title`, `url`, `content`).
 */
const WebSearchConfig = z
  .object({
    url: z.url({ protocol: /^https?$/ }),
    headers: z.record(z.string().min(1), z.string()).optional(),
    fields: z
      .object({
        results: z.string().optional(),
        title: z.string().optional(),
        url: z.string().optional(),
        snippet: z.string().optional(),
      })
      .strict()
      .optional(),
    maxResults: z.number().int().positive().max(50).optional(),
  })
  .strict()

const Limits = z.object({
  /** HTTP body limit, bytes */
  bodyBytes: z.number().int().positive().optional(),
  /** WebSocket frame limit, bytes (bigger frames close the socket with 1009) */
  frameBytes: z.number().int().positive().optional(),
  /** one input's text, bytes */
  inputBytes: z.number().int().positive().optional(),
  /** one file attached by path, bytes (read at submit) */
  fileBytes: z.number().int().positive().optional(),
  maxConnections: z.number().int().positive().optional(),
  /** a subscription pauses while the socket holds more than this many unsent bytes */
  socketHighWaterBytes: z.number().int().positive().optional(),
  /** a socket that does not drain at all for this long is closed with its resume cursor */
  slowConsumerMs: z.number().int().positive().optional(),
  heartbeatMs: z.number().int().positive().optional(),
  /** a model stream silent this long is stalled: retried before its first output, else the step fails */
  modelStallMs: z.number().int().positive().optional(),
  /** the free space the data directory's filesystem must have for the server to start */
  minFreeBytes: z.number().int().nonnegative().optional(),
})

/**
 * A token is sent as a header, a query parameter and a WebSocket subprotocol
 * (`chronicle.token.<token>`), where `/`, `=` or a space cannot appear: URL-safe
 * characters only, as the generated one (base64url).
 */
const TokenText = (name: string) =>
  z
    .string()
    .min(16, `${name} must be at least 16 characters`)
    .regex(
      /^[A-Za-z0-9._~-]+$/,
      `${name} may hold only letters, digits and - . _ ~ (it travels in a WebSocket subprotocol); e.g. openssl rand -hex 32`,
    )

export const FileConfig = z
  .object({
    $schema: z.string().optional(),
    host: z.string().min(1).optional(),
    port: z.number().int().min(0).max(65535).optional(),
    token: TokenText('token').optional(),
    model: z.string().min(1).optional(),
    provider: z
      .object({
        baseURL: z.url().optional(),
        apiKey: z.string().optional(),
        openai: z.object({ apiKey: z.string().optional(), baseURL: z.url().optional() }).optional(),
        anthropic: z.object({ apiKey: z.string().optional(), baseURL: z.url().optional() }).optional(),
        google: z.object({ apiKey: z.string().optional(), baseURL: z.url().optional() }).optional(),
      })
      .optional(),
    models: z.record(z.string(), ModelInfo).optional(),
    /** OpenCode's shape and the Claude Desktop / Cursor shape, as the tools' MCP module reads them */
    mcp: McpConfigFile.shape.mcp,
    mcpServers: McpConfigFile.shape.mcpServers,
    agents: z.record(z.string(), AgentConfig).optional(),
    /** permission rules added after every agent's own (last match wins), or `{rules, continueOnReject}` */
    permission: PermissionSettings.optional(),
    limits: Limits.optional(),
    memory: MemorySettings.optional(),
    compaction: CompactionSettings.optional(),
    allowedOrigins: z.array(z.string()).optional(),
    allowedHosts: z.array(z.string()).optional(),
    sandbox: SandboxSettings.optional(),
    /** workspace history (docs/TIME-TRAVEL.md): `snapshots: false` records none; files over `maxFileBytes` are listed, not stored */
    /** a generated title after each session's first exchange (default true) */
    titles: z.boolean().optional(),
    workspace: z
      .object({ snapshots: z.boolean().optional(), maxFileBytes: z.number().int().positive().optional() })
      .strict()
      .optional(),
    /** the web page: `false` turns it off; `{root}` serves another build */
    web: WebSettings.optional(),
    store: z.object({ url: z.string().optional() }).strict().optional(),
    /** nodes sharing one PostgreSQL (docs/CLUSTER.md): joined when set, or when CHRONICLE_CLUSTER_NODE names this node */
    cluster: z
      .object({
        node: z
          .string()
          .regex(/^[A-Za-z0-9._-]{1,64}$/)
          .optional(),
        address: z.string().max(200).optional(),
        heartbeatMs: z.number().int().min(100).max(60_000).optional(),
        ttlMs: z.number().int().min(300).max(600_000).optional(),
        /** the machine's name, for claims (docs/CLUSTER.md "Workspaces that move"); default: the host name */
        host: z.string().min(1).max(253).optional(),
        /** absolute paths every node mounts alike: sessions working there move to any node */
        sharedDirectories: z.array(z.string().min(1).max(4096)).max(100).optional(),
      })
      .strict()
      .optional(),
    webfetch: WebFetchConfig.optional(),
    websearch: WebSearchConfig.optional(),
    /** Prometheus metrics (docs/OBSERVABILITY.md): `false` serves none; `{listen}` also serves them without a token there */
    metrics: MetricsSettings.optional(),
    /** OpenTelemetry traces over OTLP/HTTP (docs/OBSERVABILITY.md): off unless an endpoint is named */
    traces: z.object({ endpoint: z.url().optional(), content: z.boolean().optional() }).strict().optional(),
    lsp: LspConfig.optional(),
  })
  .strict()
export type FileConfig = z.infer<typeof FileConfig>

export interface ResolvedLimits {
  readonly bodyBytes: number
  readonly frameBytes: number
  readonly inputBytes: number
  readonly fileBytes: number
  readonly maxConnections: number
  readonly socketHighWaterBytes: number
  readonly slowConsumerMs: number
  readonly heartbeatMs: number
  readonly modelStallMs: number
  readonly minFreeBytes: number
}

export interface ChronicleConfig {
  readonly dataDir: string
  readonly host: string
  readonly port: number
  /** a token given explicitly (env or file); otherwise one is generated and stored in the data dir */
  readonly token: string | undefined
  /** where an explicit token came from */
  readonly tokenSource: 'config' | 'environment' | undefined
  readonly model: string | undefined
  readonly provider: {
    readonly baseURL?: string
    readonly apiKey?: string
    readonly openaiApiKey?: string
    readonly openaiBaseURL?: string
    readonly anthropicApiKey?: string
    readonly anthropicBaseURL?: string
    readonly googleApiKey?: string
    readonly googleBaseURL?: string
  }
  readonly models: Record<string, z.infer<typeof ModelInfo>>
  readonly compaction: z.infer<typeof CompactionSettings>
  readonly mcp: readonly McpServerConfig[]
  readonly agents: readonly ({ name: string } & z.infer<typeof AgentConfig>)[]
  readonly rules: readonly PermissionRule[]
  /** `permission.continueOnReject`: a person's reject does not end the run (default false: it ends it `rejected`) */
  readonly continueOnReject: boolean
  readonly limits: ResolvedLimits
  readonly memory: MemoryConfig
  readonly allowedOrigins: readonly string[]
  readonly allowedHosts: readonly string[]
  readonly sandbox: SandboxConfig
  readonly workspace: { readonly snapshots: boolean; readonly maxFileBytes: number }
  readonly titles: boolean
  /** the web page at `/` and its login (docs/API.md "Web page") */
  readonly web: WebConfig
  readonly logLevel: string
  /** Prometheus metrics (docs/OBSERVABILITY.md) */
  readonly metrics: MetricsConfig
  /**
   * OpenTelemetry traces: the OTLP/HTTP endpoint (`traces.endpoint`, else OTEL_EXPORTER_OTLP_ENDPOINT; none: off), and
   * whether spans carry the prompt, output and tool text (`traces.content`, else
   * OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true; default no: that text is in the log already)
   */
  readonly traces: { readonly endpoint: string | undefined; readonly content: boolean }
  /** `CHRONICLE_LOG_FORMAT`: JSON lines or pino-pretty; unset: pretty when the log goes to a terminal (src/http/logger.ts) */
  readonly logFormat: 'json' | 'pretty' | undefined
  /** the config file that was read, if any */
  readonly configFile: string | undefined
  /** the user's skills, `<config dir>/chronicle/skills/<name>/SKILL.md` (docs/TOOLS.md "skill") */
  readonly skillsDir: string
  /**
   * The event store: SQLite in the data directory unless `url` names a PostgreSQL database
   * (`CHRONICLE_DATABASE_URL`, or `store.url` in the user's config file; never from a workspace).
   */
  readonly store: { readonly url: string | undefined }
  /** this node of a cluster on the store's PostgreSQL (docs/CLUSTER.md), or undefined: a server of its own */
  readonly cluster: ClusterSettings | undefined
  /** webfetch's limits and the hosts allowed to resolve to private addresses (src/tools/builtin/webfetch.ts) */
  readonly webfetch: WebFetchSettings
  /** websearch's provider, or undefined: the tool is not offered (src/tools/builtin/websearch.ts) */
  readonly websearch: WebSearchSettings | undefined
  /** language-server diagnostics after edits, or false (src/tools/lsp/) */
  readonly lsp: false | { readonly timeoutMs: number; readonly servers: Readonly<Record<string, ConfiguredServer>> }
}

/** A file larger than this is listed in a workspace snapshot, not stored. */
export const DEFAULT_MAX_SNAPSHOT_FILE_BYTES = 10 * 1024 * 1024

export const DEFAULT_LIMITS: ResolvedLimits = {
  bodyBytes: 1024 * 1024,
  frameBytes: 1024 * 1024,
  inputBytes: 256 * 1024,
  fileBytes: 5 * 1024 * 1024,
  maxConnections: 256,
  socketHighWaterBytes: 1024 * 1024,
  slowConsumerMs: 30_000,
  heartbeatMs: 15_000,
  modelStallMs: 300_000,
  minFreeBytes: 64 * 2 ** 20,
}

const Env = z.object({
  CHRONICLE_DATA_DIR: z.string().min(1).optional(),
  CHRONICLE_HOST: z.string().min(1).optional(),
  CHRONICLE_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  CHRONICLE_TOKEN: TokenText('CHRONICLE_TOKEN').optional(),
  CHRONICLE_MODEL: z.string().min(1).optional(),
  CHRONICLE_BASE_URL: z.url().optional(),
  CHRONICLE_API_KEY: z.string().optional(),
  OPENAI_API_KEY: z.string().optional(),
  OPENAI_BASE_URL: z.url().optional(),
  ANTHROPIC_API_KEY: z.string().optional(),
  ANTHROPIC_BASE_URL: z.url().optional(),
  GOOGLE_GENERATIVE_AI_API_KEY: z.string().optional(),
  GOOGLE_BASE_URL: z.url().optional(),
  CHRONICLE_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).optional(),
  CHRONICLE_LOG_FORMAT: z.enum(['json', 'pretty']).optional(),
  CHRONICLE_DATABASE_URL: z.string().optional(),
  CHRONICLE_CLUSTER_NODE: z.string().min(1).optional(),
  /** directories every node mounts alike, separated by the platform's path delimiter (':') */
  CHRONICLE_CLUSTER_SHARED: z.string().min(1).optional(),
  CHRONICLE_CLUSTER_TTL_MS: z.coerce.number().int().min(300).max(600_000).optional(),
  CHRONICLE_CLUSTER_HEARTBEAT_MS: z.coerce.number().int().min(100).max(60_000).optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url().optional(),
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: z.string().optional(),
})

export interface LoadOptions {
  readonly env?: NodeJS.ProcessEnv
  /** `--config <file>`; else the XDG config file, else `chronicle.json` in the data dir, when they exist; `false`: none */
  readonly configPath?: string | false
  readonly cwd?: string
}

/** Reads env and the optional config file into one validated configuration. */
export function loadConfig(options: LoadOptions = {}): ChronicleConfig {
  const cwd = options.cwd ?? process.cwd()
  const rawEnv = options.env ?? process.env
  // Empty variables count as unset: `FOO= chronicle serve` should not fail validation.
  const present = Object.fromEntries(Object.entries(rawEnv).filter(([, v]) => v !== ''))
  const env = parse(Env, present, 'environment')
  const dataDir = env.CHRONICLE_DATA_DIR ? resolve(cwd, env.CHRONICLE_DATA_DIR) : defaultDataDir(present)
  const configFile =
    options.configPath === false
      ? undefined
      : options.configPath
        ? resolve(cwd, options.configPath)
        : [join(configHome(present), 'chronicle', 'chronicle.json'), join(dataDir, 'chronicle.json')].find((f) =>
            existsSync(f),
          )
  const file = configFile ? readConfigFile(configFile) : {}
  return {
    dataDir,
    // What the user's file sets overrides the environment.
    host: file.host ?? env.CHRONICLE_HOST ?? '127.0.0.1',
    port: file.port ?? env.CHRONICLE_PORT ?? 4780,
    token: file.token ?? env.CHRONICLE_TOKEN,
    tokenSource: file.token ? 'config' : env.CHRONICLE_TOKEN ? 'environment' : undefined,
    model: file.model ?? env.CHRONICLE_MODEL,
    provider: compact({
      baseURL: file.provider?.baseURL ?? env.CHRONICLE_BASE_URL,
      apiKey: file.provider?.apiKey ?? env.CHRONICLE_API_KEY,
      openaiApiKey: file.provider?.openai?.apiKey ?? env.OPENAI_API_KEY,
      openaiBaseURL: file.provider?.openai?.baseURL ?? env.OPENAI_BASE_URL,
      anthropicApiKey: file.provider?.anthropic?.apiKey ?? env.ANTHROPIC_API_KEY,
      anthropicBaseURL: file.provider?.anthropic?.baseURL ?? env.ANTHROPIC_BASE_URL,
      googleApiKey: file.provider?.google?.apiKey ?? env.GOOGLE_GENERATIVE_AI_API_KEY,
      googleBaseURL: file.provider?.google?.baseURL ?? env.GOOGLE_BASE_URL,
    }),
    models: file.models ?? {},
    compaction: file.compaction ?? {},
    mcp: normalizeMcp(file),
    agents: Object.entries(file.agents ?? {}).map(([name, a]) => ({ name, ...a })),
    rules: (Array.isArray(file.permission) ? file.permission : file.permission?.rules) ?? [],
    continueOnReject: (!Array.isArray(file.permission) && file.permission?.continueOnReject) || false,
    limits: { ...DEFAULT_LIMITS, ...compact(file.limits ?? {}) },
    memory: {
      idleMs: file.memory?.idleSeconds === undefined ? DEFAULT_MEMORY.idleMs : file.memory.idleSeconds * 1000,
      cacheBytes:
        file.memory?.cacheMb === undefined ? DEFAULT_MEMORY.cacheBytes : Math.round(file.memory.cacheMb * 2 ** 20),
      cacheSessions: file.memory?.cacheSessions ?? DEFAULT_MEMORY.cacheSessions,
    },
    allowedOrigins: file.allowedOrigins ?? [],
    allowedHosts: file.allowedHosts ?? [],
    sandbox: sandboxOf(file.sandbox, present, [dataDir, ...(configFile ? [configFile] : [])], configFile),
    workspace: {
      snapshots: file.workspace?.snapshots ?? true,
      maxFileBytes: file.workspace?.maxFileBytes ?? DEFAULT_MAX_SNAPSHOT_FILE_BYTES,
    },
    titles: file.titles ?? true,
    web: webOf(file.web, configFile),
    logLevel: env.CHRONICLE_LOG_LEVEL ?? 'info',
    logFormat: env.CHRONICLE_LOG_FORMAT,
    configFile,
    skillsDir: join(configHome(present), 'chronicle', 'skills'),
    store: { url: storeUrl(file.store?.url ?? env.CHRONICLE_DATABASE_URL) },
    cluster: clusterOf(file.cluster, env, file.store?.url ?? env.CHRONICLE_DATABASE_URL),
    webfetch: webfetchOf(file.webfetch),
    websearch: websearchOf(file.websearch, present),
    metrics: metricsOf(file.metrics),
    traces: {
      endpoint: file.traces?.endpoint ?? env.OTEL_EXPORTER_OTLP_ENDPOINT,
      content: file.traces?.content ?? env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT === 'true',
    },
    lsp:
      file.lsp === false
        ? false
        : {
            timeoutMs: Math.round((file.lsp?.timeoutSeconds ?? DEFAULT_DIAGNOSTICS_DEADLINE_MS / 1000) * 1000),
            servers: file.lsp?.servers ?? {},
          },
  }
}

function metricsOf(settings: z.infer<typeof MetricsSettings> | undefined): MetricsConfig {
  const s = typeof settings === 'boolean' ? { enabled: settings } : (settings ?? {})
  const listen = s.listen
  if (listen === undefined) return { enabled: s.enabled ?? true, listen: undefined }
  if (typeof listen === 'number') return { enabled: s.enabled ?? true, listen: { host: '127.0.0.1', port: listen } }
  const colon = listen.lastIndexOf(':')
  const host = listen.slice(0, colon).replace(/^\[|\]$/g, '')
  return { enabled: s.enabled ?? true, listen: { host, port: Number(listen.slice(colon + 1)) } }
}

function webfetchOf(settings: z.infer<typeof WebFetchConfig> | undefined): WebFetchSettings {
  const s = settings ?? {}
  const maxTimeoutSeconds = s.maxTimeoutSeconds ?? DEFAULT_WEBFETCH.maxTimeoutSeconds
  return {
    allowHosts: s.allowHosts ?? DEFAULT_WEBFETCH.allowHosts,
    maxBytes: s.maxBytes ?? DEFAULT_WEBFETCH.maxBytes,
    defaultTimeoutSeconds: Math.min(s.timeoutSeconds ?? DEFAULT_WEBFETCH.defaultTimeoutSeconds, maxTimeoutSeconds),
    maxTimeoutSeconds,
    maxRedirects: s.maxRedirects ?? DEFAULT_WEBFETCH.maxRedirects,
  }
}

function websearchOf(
  settings: z.infer<typeof WebSearchConfig> | undefined,
  env: NodeJS.ProcessEnv,
): WebSearchSettings | undefined {
  if (!settings) return undefined
  const secrets: { name: string; value: string }[] = []
  const headers = Object.fromEntries(
    Object.entries(settings.headers ?? {}).map(([name, value]) => [
      name,
      value.replace(/\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, variable: string) => {
        const found = env[variable]
        if (found === undefined)
          throw new ChronicleError('BAD_REQUEST', `websearch.headers.${name} names ${variable}, which is not set`)
        secrets.push({ name: variable, value: found })
        return found
      }),
    ]),
  )
  return {
    url: settings.url,
    headers,
    secrets,
    fields: { ...SEARXNG_FIELDS, ...settings.fields },
    maxResults: settings.maxResults ?? 10,
  }
}

export interface ClusterSettings {
  /** the node's name (the host's name unless configured): its id is the name and a suffix new at every start */
  readonly node: string
  /** where clients reach this node, shown by `GET /cluster` */
  readonly address: string | undefined
  readonly heartbeatMs: number
  /** a node whose heartbeat is older is dead: its sessions are claimed */
  readonly ttlMs: number
  /** the machine this node runs on: a dead node's session whose directory is not shared is claimed on it only */
  readonly host: string
  /** absolute paths every node mounts alike (each without a trailing '/') */
  readonly sharedDirectories: readonly string[]
}

export const DEFAULT_HEARTBEAT_MS = 1_000
export const DEFAULT_TTL_MS = 5_000

/**
 * The cluster settings: `cluster` in the config file, else CHRONICLE_CLUSTER_NODE (with
 * CHRONICLE_CLUSTER_TTL_MS, CHRONICLE_CLUSTER_HEARTBEAT_MS); only with a PostgreSQL store.
 */
function clusterOf(
  file: z.infer<typeof FileConfig>['cluster'],
  env: z.infer<typeof Env>,
  url: string | undefined,
): ClusterSettings | undefined {
  const named = env.CHRONICLE_CLUSTER_NODE
  if (!file && !named) return undefined
  if (!url)
    throw new ChronicleError(
      'BAD_REQUEST',
      'a cluster runs on PostgreSQL: set CHRONICLE_DATABASE_URL (or store.url) as well as the cluster settings',
    )
  const node = file?.node ?? named ?? hostname()
  const heartbeatMs = file?.heartbeatMs ?? env.CHRONICLE_CLUSTER_HEARTBEAT_MS ?? DEFAULT_HEARTBEAT_MS
  const ttlMs = file?.ttlMs ?? env.CHRONICLE_CLUSTER_TTL_MS ?? DEFAULT_TTL_MS
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(node))
    throw new ChronicleError('BAD_REQUEST', 'cluster node name: 1 to 64 letters, digits, dots, dashes or underscores')
  if (ttlMs < 3 * heartbeatMs)
    throw new ChronicleError(
      'BAD_REQUEST',
      `cluster.ttlMs (${ttlMs}) must be at least three heartbeats (${3 * heartbeatMs}): a node must miss several before it is dead`,
    )
  const shared = file?.sharedDirectories ?? env.CHRONICLE_CLUSTER_SHARED?.split(delimiter).filter(Boolean) ?? []
  for (const directory of shared)
    if (!isAbsolute(directory))
      throw new ChronicleError('BAD_REQUEST', `cluster.sharedDirectories: ${directory} is not an absolute path`)
  const sharedDirectories = shared.map((d) => (d.length > 1 ? d.replace(/\/+$/, '') : d))
  return { node, address: file?.address, heartbeatMs, ttlMs, host: file?.host ?? hostname(), sharedDirectories }
}

/** A PostgreSQL URL (`postgres://` or `postgresql://`); anything else is BAD_REQUEST, without echoing it (it may hold a password). */
function storeUrl(url: string | undefined): string | undefined {
  if (url === undefined) return undefined
  let scheme: string | undefined
  try {
    scheme = new URL(url).protocol
  } catch {
    // reported below
  }
  if (scheme === 'postgres:' || scheme === 'postgresql:') return url
  throw new ChronicleError(
    'BAD_REQUEST',
    'invalid store url (CHRONICLE_DATABASE_URL or store.url): it must be a postgres:// or postgresql:// URL (the default store, SQLite in the data directory, needs none)',
  )
}

/** `$XDG_DATA_HOME/chronicle`, else `~/.local/share/chronicle`: per user, never inside a workspace. */
export function defaultDataDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(xdg(env, 'XDG_DATA_HOME', join('.local', 'share')), 'chronicle')
}

function configHome(env: NodeJS.ProcessEnv): string {
  return xdg(env, 'XDG_CONFIG_HOME', '.config')
}

/** An XDG base directory: the variable when it holds an absolute path (the spec ignores relative ones), else under home. */
function xdg(env: NodeJS.ProcessEnv, name: string, fallback: string): string {
  const value = env[name]
  return value && isAbsolute(value) ? value : join(homeOf(env), fallback)
}

/** `$HOME` when absolute, else the account's home directory: where `~` and the credential paths are. */
function homeOf(env: NodeJS.ProcessEnv): string {
  return env.HOME && isAbsolute(env.HOME) ? env.HOME : homedir()
}

function webOf(settings: z.infer<typeof WebSettings> | undefined, configFile: string | undefined): WebConfig {
  const s = typeof settings === 'boolean' ? { enabled: settings } : (settings ?? {})
  const root = s.root === undefined ? undefined : configFile ? resolve(dirname(configFile), s.root) : resolve(s.root)
  return { enabled: s.enabled ?? true, root }
}

function sandboxOf(
  settings: z.infer<typeof SandboxSettings> | undefined,
  env: NodeJS.ProcessEnv,
  own: readonly string[],
  configFile: string | undefined,
): SandboxConfig {
  const s = typeof settings === 'string' ? { mode: settings } : (settings ?? {})
  const home = homeOf(env)
  const reveal = (s.reveal ?? []).map((entry) => expandEntry(entry, home))
  // Chronicle's own data dir and config file stay hidden whatever the user reveals
  const issues: { path: string; message: string }[] = reveal.flatMap((pattern, i) =>
    own.some((path) => patternMayReach(pattern, path))
      ? [
          {
            path: `sandbox.reveal.${i}`,
            message: `${JSON.stringify(s.reveal?.[i])} would reveal Chronicle's own data directory or config file, which stay hidden`,
          },
        ]
      : [],
  )
  if (s.unlistedHosts !== undefined && !Array.isArray(s.network))
    issues.push({
      path: 'sandbox.unlistedHosts',
      message: 'applies to a list of hosts only: set sandbox.network to a list (it may be empty: ask for every host)',
    })
  if (issues.length > 0)
    throw new ChronicleError(
      'BAD_REQUEST',
      `invalid config file ${configFile}:\n${issues.map((i) => `  - ${i.path}: ${i.message}`).join('\n')}`,
      { issues },
    )
  const xdgHome = (name: string) => (env[name] && isAbsolute(env[name]) ? env[name] : undefined)
  return {
    mode: s.mode ?? 'auto',
    network: Array.isArray(s.network)
      ? s.network.map((entry) => parseHostPattern(entry) as HostPattern)
      : (s.network ?? false),
    unlistedHosts: s.unlistedHosts ?? 'refuse',
    env: s.env ?? {},
    passEnv: s.passEnv ?? [],
    hide: [
      ...defaultHiddenPatterns({ home, configHome: xdgHome('XDG_CONFIG_HOME'), dataHome: xdgHome('XDG_DATA_HOME') }),
      ...(s.hide ?? []).map((entry) => expandEntry(entry, home)),
    ],
    reveal,
  }
}

function readConfigFile(path: string): FileConfig {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    throw new ChronicleError('BAD_REQUEST', `cannot read config file ${path}: ${(err as Error).message}`)
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (err) {
    throw new ChronicleError('BAD_REQUEST', `config file ${path} is not valid JSON: ${(err as Error).message}`)
  }
  return parse(FileConfig, json, `config file ${path}`)
}

function parse<S extends z.ZodType>(schema: S, value: unknown, where: string): z.infer<S> {
  const result = schema.safeParse(value)
  if (result.success) return result.data
  const issues = result.error.issues.map((i) => ({ path: i.path.join('.') || '(root)', message: i.message }))
  throw new ChronicleError(
    'BAD_REQUEST',
    `invalid ${where}:\n${issues.map((i) => `  - ${i.path}: ${i.message}`).join('\n')}`,
    { issues },
  )
}

/** Both MCP shapes become one list the tools' MCP module consumes. */
function normalizeMcp(file: FileConfig): McpServerConfig[] {
  try {
    return parseMcpConfig({ mcp: file.mcp, mcpServers: file.mcpServers })
  } catch (err) {
    throw new ChronicleError('BAD_REQUEST', (err as Error).message)
  }
}

function compact<T extends Record<string, unknown>>(o: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as {
    [K in keyof T]?: Exclude<T[K], undefined>
  }
}

/** True for addresses only this machine can reach. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase()
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h) || h === '::ffff:127.0.0.1'
}
