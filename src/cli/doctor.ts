import type { ClusterNode } from '../events/cluster.js'
import { execFile } from 'node:child_process'
import { existsSync, lstatSync, readFileSync, type Stats, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { type ChronicleConfig, loadConfig } from '../config.js'
import { DB_FILE } from '../data-dir.js'
import { freeBytes, mib } from '../free-space.js'
import { readClientToken, TOKEN_FILE } from '../http/token.js'
import { configuredModels, defaultModelProblem } from '../main.js'
import { credentialPaths } from '../tools/credentials/credential-paths.js'
import { detectSandbox } from '../tools/sandbox.js'
import { DEFAULT_BUDGET_MS } from '../runtime/loop/tool-exec.js'
import { type Args, flag, UsageError } from './args.js'

/**
 * `chronicle doctor [--config file] [--stuck-after seconds]`: is this machine ready to serve? One line
 * per check — `ok|warn|fail  <check>: <detail>` — for the configuration, the
 * default model (built as the server builds it, then asked for its model list
 * over the network when there is a key), the sandbox (the server's own
 * bubblewrap probe), git, the data directory's and token's private modes, and
 * a server at CHRONICLE_URL (`/health`, then `/whoami` with the token), and its
 * sessions that look stuck (checkSessions). Exit 0
 * when nothing failed (warnings allowed), 1 otherwise. No secret is ever
 * printed: every line is scrubbed of the token, the API keys and credential
 * variables.
 */

type Status = 'ok' | 'warn' | 'fail'
type Say = (status: Status, check: string, detail: string) => void

/** How long a network check waits. */
const TIMEOUT_MS = 5_000

export async function doctor(
  args: Args,
  out: (line: string) => void,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const secrets = new Set(credentialsOf(env))
  let failed = false
  const say: Say = (status, check, detail) => {
    failed ||= status === 'fail'
    out(scrub(`${status}  ${check}: ${detail}`, secrets))
  }

  const configPath = flag(args, 'config')
  let config: ChronicleConfig
  try {
    config = loadConfig({ env, ...(configPath && { configPath }) })
  } catch (err) {
    say('fail', 'config', messageOf(err))
    return 1
  }
  const { apiKey, openaiApiKey, anthropicApiKey, googleApiKey } = config.provider
  for (const value of [config.token, apiKey, openaiApiKey, anthropicApiKey, googleApiKey]) if (value) secrets.add(value)
  const token = config.token ?? readClientToken(config.dataDir, env)
  if (token) secrets.add(token)
  say('ok', 'config', config.configFile ? `${config.configFile} is valid` : 'no config file: the environment only')

  await checkModel(config, say)
  await checkSandbox(config, say)
  await checkGit(config, say)
  checkDataDir(config.dataDir, say)
  checkDisk(config.dataDir, config.limits.minFreeBytes, say)
  await checkStore(config.store.url, say)
  checkToken(config, say)
  const url = serverUrl(config, env)
  if ((await checkServer(url, token, say)) && token) {
    const after = flag(args, 'stuck-after')
    const stuckAfterMs =
      after === undefined
        ? Math.max(config.limits.modelStallMs, DEFAULT_BUDGET_MS) + STUCK_MARGIN_MS
        : Number(after) * 1000
    if (!(stuckAfterMs >= 0)) throw new UsageError('--stuck-after takes seconds')
    await checkSessions(url, token, stuckAfterMs, say)
    if (config.cluster) await checkCluster(url, token, config.cluster.ttlMs, say)
  }
  return failed ? 1 : 0
}

/** Past the model's stall bound and a tool's budget, by this much: a run silent longer has nothing ending it. */
const STUCK_MARGIN_MS = 60_000

/**
 * Sessions that look stuck (docs/RECOVERY.md "Stuck sessions"): busy or retrying, with nothing recorded
 * for longer than anything a live run may stay silent — the model's stall bound, a tool's budget. A
 * session waiting for a person (a permission, a question) is not stuck.
 */
async function checkSessions(url: string, token: string, stuckAfterMs: number, say: Say): Promise<void> {
  const stuck: { id: string; status: string; silentMs: number }[] = []
  let cursor: string | undefined
  let seen = 0
  try {
    do {
      const page = new URL(`${url}/sessions`)
      page.searchParams.set('limit', '500')
      if (cursor) page.searchParams.set('cursor', cursor)
      const res = await fetch(page, {
        headers: { authorization: `Bearer ${token}` },
        signal: AbortSignal.timeout(TIMEOUT_MS),
      })
      if (!res.ok) return say('warn', 'sessions', `the session list answered HTTP ${res.status}`)
      const body = (await res.json()) as {
        sessions: { id: string; status: string; updatedAt: string }[]
        cursor?: string
      }
      for (const s of body.sessions) {
        const silentMs = Date.now() - Date.parse(s.updatedAt)
        if ((s.status === 'busy' || s.status === 'retrying') && silentMs > stuckAfterMs)
          stuck.push({ id: s.id, status: s.status, silentMs })
      }
      seen += body.sessions.length
      cursor = body.cursor
    } while (cursor && seen < MAX_SESSIONS_LISTED)
  } catch (err) {
    return say('warn', 'sessions', `the session list failed: ${networkReason(err)}`)
  }
  const bound = duration(stuckAfterMs)
  if (stuck.length === 0) return say('ok', 'sessions', `${seen} sessions, none busy with nothing recorded for ${bound}`)
  const which = stuck
    .slice(0, 20)
    .map((s) => `${s.id} (${s.status}, nothing recorded for ${duration(s.silentMs)})`)
    .join(', ')
  say(
    'warn',
    'sessions',
    `${stuck.length} look stuck — ${which}: a run silent past the model's stall bound and a tool's budget; \`POST /sessions/<id>/cancel\` brings one back to idle`,
  )
}

const MAX_SESSIONS_LISTED = 100_000

/**
 * The cluster this server is a node of (docs/CLUSTER.md): its nodes, their heartbeats and sessions. A dead node
 * that still owns sessions past a few TTLs means no node claims them — every node down, or claims failing.
 */
async function checkCluster(url: string, token: string, ttlMs: number, say: Say): Promise<void> {
  let body: { node: string; nodes: ClusterNode[] }
  try {
    const res = await fetch(`${url}/cluster`, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(TIMEOUT_MS),
    })
    if (!res.ok) return say('warn', 'cluster', `GET /cluster answered HTTP ${res.status}`)
    body = (await res.json()) as typeof body
  } catch (err) {
    return say('warn', 'cluster', `GET /cluster failed: ${networkReason(err)}`)
  }
  const alive = body.nodes.filter((n) => n.alive)
  const listed = body.nodes
    .slice(0, 20)
    .map((n) => {
      const state = n.alive ? 'alive' : n.stopped ? 'stopped' : 'dead'
      return `${n.id} (${state}, ${n.sessions} sessions, heartbeat ${duration(n.heartbeatAgeMs)} ago)`
    })
    .join(', ')
  const unclaimed = body.nodes.filter((n) => !n.alive && n.sessions > 0 && n.heartbeatAgeMs > 3 * ttlMs)
  if (unclaimed.length > 0)
    return say(
      'warn',
      'cluster',
      `${unclaimed.map((n) => n.id).join(', ')} died over ${duration(3 * ttlMs)} ago and still own sessions: no live node claims them — ${listed}`,
    )
  say('ok', 'cluster', `node ${body.node}; ${alive.length} of ${body.nodes.length} nodes alive — ${listed}`)
}

function duration(ms: number): string {
  return ms < 120_000 ? `${Math.round(ms / 100) / 10} s` : `${Math.round(ms / 60_000)} min`
}

async function checkModel(config: ChronicleConfig, say: Say): Promise<void> {
  const spec = config.model
  if (!spec) {
    say(
      'warn',
      'model',
      'no default model (set CHRONICLE_MODEL, e.g. openai:<id> or compatible:<id>): sessions must name one',
    )
    return
  }
  const problem = defaultModelProblem(config, configuredModels(config))
  if (problem) {
    say('fail', 'model', `${spec} cannot be used: ${problem.code}: ${problem.message}`)
    return
  }
  say('ok', 'model', `${spec} can be built`)
  const endpoint = endpointOf(config, spec)
  if (!endpoint) {
    say('ok', 'provider', 'a scripted model: it plays a local script, no network')
    return
  }
  await checkProvider(endpoint, spec.slice(spec.indexOf(':') + 1), say)
}

/** Where a provider lists its models, and how it takes its key. */
interface Endpoint {
  readonly base: string
  readonly key: string | undefined
  /** where the key is set */
  readonly keyName: string
  readonly headers: (key: string) => Record<string, string>
  /** the names it lists the model under */
  readonly listed: (id: string) => readonly string[]
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

function endpointOf(config: ChronicleConfig, spec: string): Endpoint | undefined {
  const p = config.provider
  const same = (id: string) => [id]
  switch (spec.slice(0, spec.indexOf(':'))) {
    case 'openai':
      return {
        base: p.openaiBaseURL ?? p.baseURL ?? 'https://api.openai.com/v1',
        key: p.openaiApiKey ?? p.apiKey,
        keyName: 'OPENAI_API_KEY',
        headers: bearer,
        listed: same,
      }
    case 'compatible':
      return { base: p.baseURL ?? '', key: p.apiKey, keyName: 'CHRONICLE_API_KEY', headers: bearer, listed: same }
    case 'anthropic':
      return {
        base: p.anthropicBaseURL ?? 'https://api.anthropic.com/v1',
        key: p.anthropicApiKey,
        keyName: 'ANTHROPIC_API_KEY',
        headers: (key) => ({ 'x-api-key': key, 'anthropic-version': '2023-06-01' }),
        listed: same,
      }
    case 'google':
      return {
        base: p.googleBaseURL ?? 'https://generativelanguage.googleapis.com/v1beta',
        key: p.googleApiKey,
        keyName: 'GOOGLE_GENERATIVE_AI_API_KEY',
        headers: (key) => ({ 'x-goog-api-key': key }),
        listed: (id) => [id, `models/${id}`],
      }
    default:
      return undefined
  }
}

/** One cheap authenticated request: GET <base>/models, which every supported provider answers. */
async function checkProvider(endpoint: Endpoint, id: string, say: Say): Promise<void> {
  const where = displayUrl(endpoint.base)
  if (!endpoint.key) {
    say('warn', 'provider', `no API key (set ${endpoint.keyName}): ${where} was not contacted`)
    return
  }
  let res: Response
  try {
    res = await fetch(`${endpoint.base.replace(/\/+$/, '')}/models`, {
      headers: endpoint.headers(endpoint.key),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    })
  } catch (err) {
    say('fail', 'provider', `${where} is unreachable: ${networkReason(err)}`)
    return
  }
  if (res.status === 401 || res.status === 403) {
    say('fail', 'provider', `${where} refuses the API key (${endpoint.keyName}): HTTP ${res.status}`)
    return
  }
  if (res.status === 404 || res.status === 405) {
    say('warn', 'provider', `${where} answers, but lists no models (HTTP ${res.status}): ${id} not checked`)
    return
  }
  if (!res.ok) {
    say('fail', 'provider', `${where} answered HTTP ${res.status} to GET /models`)
    return
  }
  const names = modelNames(await res.json().catch(() => undefined))
  if (names.length === 0) say('ok', 'provider', `${where} answers with the key`)
  else if (endpoint.listed(id).some((n) => names.includes(n)))
    say('ok', 'provider', `${where} answers with the key and lists ${id}`)
  else
    say('warn', 'provider', `${where} answers with the key, but ${id} is not among the ${names.length} models it lists`)
}

/** The ids in a model list: OpenAI's and Anthropic's `data[].id`, Google's `models[].name`. */
function modelNames(body: unknown): string[] {
  const b = body as { data?: { id?: unknown }[]; models?: { name?: unknown }[] } | undefined
  const items = [...(b?.data ?? []).map((m) => m?.id), ...(b?.models ?? []).map((m) => m?.name)]
  return items.filter((n): n is string => typeof n === 'string')
}

async function checkSandbox(config: ChronicleConfig, say: Say): Promise<void> {
  if (config.sandbox.mode === 'off') {
    say('warn', 'sandbox', '"sandbox": "off" in the config: bash commands run unconfined')
    return
  }
  const hidden = [config.dataDir, ...(config.configFile ? [config.configFile] : [])]
  const credentials = credentialPaths(config.sandbox)
  const sandbox = await detectSandbox('auto', { network: config.sandbox.network === true, hidden, credentials })
  if (sandbox.kind === 'bwrap') say('ok', 'sandbox', 'bubblewrap runs a trivial command: bash commands run confined')
  else
    say(
      'warn',
      'sandbox',
      `${sandbox.reason ?? 'bubblewrap cannot run here'}: every bash command will need approval (install bubblewrap, or set "sandbox": "off")`,
    )
}

async function checkGit(config: ChronicleConfig, say: Say): Promise<void> {
  const version = await new Promise<string | undefined>((resolve) =>
    execFile('git', ['--version'], { timeout: TIMEOUT_MS }, (err, stdout) => resolve(err ? undefined : stdout.trim())),
  )
  if (version) say('ok', 'git', version)
  else if (!config.workspace.snapshots) say('warn', 'git', 'not found on the PATH (workspace snapshots are off)')
  else
    say(
      'fail',
      'git',
      'not found on the PATH: workspace snapshots need it (install git, or set "workspace": {"snapshots": false})',
    )
}

/**
 * The event store: SQLite in the data directory, or the PostgreSQL database the configuration names —
 * reachable, and 15 or later (what `chronicle serve` checks at its start).
 */
async function checkStore(url: string | undefined, say: Say): Promise<void> {
  if (!url) {
    say('ok', 'store', 'SQLite in the data directory')
    return
  }
  // pg loads only when a database is named
  const { probePostgres } = await import('../events/postgres/log.js')
  const { redactUrl } = await import('../events/postgres/url.js')
  try {
    const { version } = await probePostgres(url, TIMEOUT_MS)
    // search and backups are files beside SQLite's store: a server on PostgreSQL answers them NOT_IMPLEMENTED
    say('ok', 'store', `PostgreSQL ${version} at ${redactUrl(url)} (search and backups are off on PostgreSQL)`)
  } catch (err) {
    say('fail', 'store', `${(err as { code?: string }).code ?? 'ERROR'}: ${messageOf(err)}`)
  }
}

/** The data directory 0700 and its files 0600, this user's, no symlinks (src/data-dir.ts). */
function checkDataDir(dir: string, say: Say): void {
  if (!existsSync(dir)) {
    say('warn', 'data dir', `${dir} does not exist yet: the server creates it (0700) at its first start`)
    return
  }
  const stat = statSync(dir)
  if (!stat.isDirectory()) {
    say('fail', 'data dir', `${dir} is not a directory`)
    return
  }
  const problems = [privacyProblem(dir, stat, 0o700)]
  const files = [DB_FILE, `${DB_FILE}-wal`, `${DB_FILE}-shm`, 'chronicle.json'].filter((f) => existsSync(join(dir, f)))
  for (const f of files) problems.push(fileProblem(join(dir, f)))
  const found = problems.filter((p): p is string => p !== undefined)
  for (const p of found) say('fail', 'data dir', p)
  if (found.length === 0)
    say('ok', 'data dir', `${dir} is private (0700${files.length > 0 ? `; ${files.join(', ')} 0600` : ''})`)
}

/** The free space where the data directory is (or will be): the server refuses to start below the bound. */
function checkDisk(dir: string, minBytes: number, say: Say): void {
  let at = dir
  while (!existsSync(at) && dirname(at) !== at) at = dirname(at)
  const free = freeBytes(at)
  if (free < minBytes)
    say(
      'fail',
      'disk',
      `only ${mib(free)} free at ${dir}, below limits.minFreeBytes (${mib(minBytes)}): the server will not start`,
    )
  else say('ok', 'disk', `${mib(free)} free at ${dir}`)
}

function checkToken(config: ChronicleConfig, say: Say): void {
  const file = join(config.dataDir, TOKEN_FILE)
  const given =
    config.tokenSource === 'environment'
      ? 'given by CHRONICLE_TOKEN'
      : config.tokenSource === 'config'
        ? `given by ${config.configFile ?? 'the config file'}`
        : undefined
  if (!existsSync(file)) {
    if (given) say('ok', 'token', given)
    else say('warn', 'token', `${file} does not exist yet: the server generates it (0600) at its first start`)
    return
  }
  const problem = fileProblem(file)
  if (problem) say('fail', 'token', `${problem}: the server refuses a token file others can read`)
  else if (readFileSync(file, 'utf8').trim().length < 16)
    say('warn', 'token', `${file} holds no usable token: the server replaces it at its next start`)
  else say('ok', 'token', given ? `${given} (${file} is private too)` : `${file} is private (0600)`)
}

/** What is wrong with a file that must be this user's private regular file, if anything. */
function fileProblem(path: string): string | undefined {
  const stat = lstatSync(path)
  if (!stat.isFile()) return `${path} is not a regular file (a symlink or device is refused)`
  return privacyProblem(path, stat, 0o600)
}

function privacyProblem(path: string, stat: Stats, want: number): string | undefined {
  const uid = process.getuid?.()
  if (uid !== undefined && stat.uid !== uid) return `${path} belongs to user ${stat.uid}, not to you (${uid})`
  const mode = stat.mode & 0o777
  if ((mode & 0o077) === 0) return undefined
  return `${path} is mode ${mode.toString(8)}, not ${want.toString(8)}: other users can read it (chmod ${want.toString(8)} ${path})`
}

/** Where client commands look for the server: CHRONICLE_URL, else the configured port on this machine. */
function serverUrl(config: ChronicleConfig, env: NodeJS.ProcessEnv): string {
  if (env.CHRONICLE_URL) return env.CHRONICLE_URL.replace(/\/+$/, '')
  const wildcard = config.host === '0.0.0.0' || config.host === '::'
  const host = wildcard ? '127.0.0.1' : config.host.includes(':') ? `[${config.host}]` : config.host
  return `http://${host}:${config.port || 4780}`
}

/** Whether the server answers and takes the token. */
async function checkServer(url: string, token: string | undefined, say: Say): Promise<boolean> {
  const where = displayUrl(url)
  let health: Response
  try {
    health = await fetch(`${url}/health`, { signal: AbortSignal.timeout(TIMEOUT_MS) })
  } catch (err) {
    say('warn', 'server', `none answers at ${where} (${networkReason(err)}): start one with \`chronicle serve\``)
    return false
  }
  const body = (await health.json().catch(() => undefined)) as
    | { status?: unknown; version?: unknown; reason?: unknown }
    | undefined
  if (health.ok && body?.status === 'degraded') {
    say('fail', 'server', `${where} is up but degraded: ${String(body.reason)}`)
    return false
  }
  if (!health.ok || body?.status !== 'ok') {
    say(
      'fail',
      'server',
      `${where}/health answered HTTP ${health.status}${body?.status ? '' : ', not as Chronicle does'}`,
    )
    return false
  }
  const chronicle = `Chronicle${typeof body.version === 'string' ? ` ${body.version}` : ''} answers at ${where}`
  if (!token) {
    say('warn', 'server', `${chronicle}, but there is no token to present (CHRONICLE_TOKEN, or the token file)`)
    return false
  }
  let who: Response
  try {
    who = await fetch(`${url}/whoami`, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(TIMEOUT_MS),
    })
  } catch (err) {
    say('fail', 'server', `${chronicle}, but /whoami failed: ${networkReason(err)}`)
    return false
  }
  if (!who.ok) {
    const problem = (await who.json().catch(() => undefined)) as { code?: unknown } | undefined
    const code = typeof problem?.code === 'string' ? ` ${problem.code}` : ''
    say('fail', 'server', `${chronicle}, but refuses the token: HTTP ${who.status}${code}`)
    return false
  }
  const me = (await who.json().catch(() => ({}))) as { name?: unknown; role?: unknown }
  say('ok', 'server', `${chronicle}; the token speaks for ${String(me.name)} (${String(me.role)})`)
  return true
}

/** A URL without credentials or query: what may be printed of it. */
function displayUrl(url: string): string {
  try {
    const u = new URL(url)
    return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, '')}`
  } catch {
    return '(an invalid URL)'
  }
}

function networkReason(err: unknown): string {
  const e = err as { name?: string; cause?: { code?: string; message?: string }; message?: string }
  if (e?.name === 'TimeoutError') return `no answer in ${TIMEOUT_MS / 1000} s`
  return e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(err)
}

/** Values of credential variables (keys, tokens, passwords) in the environment. */
function credentialsOf(env: NodeJS.ProcessEnv): string[] {
  return Object.entries(env).flatMap(([name, value]) =>
    value && /(KEY|SECRET|TOKEN|PASSW|CREDENTIAL)/i.test(name) ? [value] : [],
  )
}

function scrub(line: string, secrets: ReadonlySet<string>): string {
  let out = line
  for (const s of secrets) if (s.length >= 8 && out.includes(s)) out = out.split(s).join('[REDACTED]')
  return out
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
