import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { spawn } from 'node:child_process'
import { dirname, join } from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { execute } from '../src/commands/execute.js'
import { decideSession } from '../src/commands/session.js'
import { createIdSource } from '../src/events/ids.js'
import { openStore } from '../src/projections/open.js'
import { fixedModelResolver } from '../src/runtime/model/providers.js'
import { createRuntime } from '../src/runtime/runtime.js'
import { createScriptedModel } from '../src/runtime/model/scripted-model.js'
import { resolveAgents } from '../src/tools/agents.js'
import { createBashTool } from '../src/tools/builtin/bash.js'
import { createBuiltinTools } from '../src/tools/builtin/index.js'
import { createPermissionGate } from '../src/runtime/permissions/gate.js'
import { createToolRegistry } from '../src/runtime/tools/registry.js'
import { credentialPaths } from '../src/tools/credentials/credential-paths.js'
import { DEFAULT_HIDDEN_PATHS, defaultHiddenPatterns } from '../src/tools/credentials/defaults.js'
import type { ProxyPolicy } from '../src/tools/net/call-proxy.js'
import { bwrapSandbox, detectSandbox, type Sandbox, unconfined } from '../src/tools/sandbox.js'
import type { ToolContext } from '../src/tools/tool.js'
import { sqlitePorts } from '../src/projections/store-ports.js'

/**
 * `npm run bench -- sandbox [--runs 200] [--sessions 4] [--mb 200]`: what the
 * OS sandbox costs (docs/SECURITY.md).
 *
 * 1. Latency of the bash tool running `true`, unconfined, in bubblewrap
 *    hiding nothing but Chronicle's own files (as before credentials were
 *    hidden), and in bubblewrap hiding the user's credentials too — every
 *    default path present in a fake HOME, the worst case: one mount each,
 *    looked up per command. Alternating so all see the same machine: p50 /
 *    p99 and the median overhead of each against unconfined (target ≤ 15 ms).
 *    A fourth kind runs with a `sandbox.network` list: each call opens its
 *    own proxy and starts the command through the launcher (perl inside the
 *    namespace, src/tools/net/proxy-launcher.ts): its overhead is reported
 *    apart, and against the sandbox alone (`networkListOverSandboxMedianMs`).
 * 2. The network by host (docs/SECURITY.md "The network by host"), against
 *    a server on 127.0.0.1 that a listed name is mapped to by the proxy's
 *    resolver hook: inside the sandbox, node opens `--connections` fresh
 *    connections one after another, each a whole request and answer —
 *    through the proxy (CONNECT, as HTTPS clients do) and directly (a
 *    sandbox that shares the network) — p50 / p99 and the median overhead
 *    per connection (target ≤ 5 ms); then curl downloads `--download-mb` MB
 *    both ways, CONNECT and plain forwarding (target ≥ 80% of direct), from
 *    an origin in a process of its own: a round unmeasured, then five in an
 *    order that rotates, their medians compared.
 * 3. Event-loop delay while `sessions` sessions each run an output-heavy
 *    command (`yes | head -c <mb> MB`) through the real runtime, permission
 *    gate, bash tool, sandbox and event store (a file): p50 / p99 / max of
 *    the delay (target p99 ≤ 50 ms), and the same with no command running as
 *    the baseline.
 */
export default async function (args: string[]): Promise<object> {
  const runs = flag(args, '--runs', 200)
  const sessions = flag(args, '--sessions', 4)
  const mb = flag(args, '--mb', 200)
  const connections = flag(args, '--connections', 300)
  const downloadMb = flag(args, '--download-mb', 100)
  const sandbox = await detectSandbox('auto', {})
  if (sandbox.kind !== 'bwrap') throw new Error(`bubblewrap is needed for this bench: ${sandbox.reason}`)

  const root = realpathSync(mkdtempSync(join(tmpdir(), 'chronicle-bench-sandbox-')))
  try {
    const latency = await trueLatency(root, runs, sandbox)
    const proxy = await proxyCost(root, connections, downloadMb)
    const loop = await eventLoopUnderOutput(root, sessions, mb, sandbox)
    return { runs, ...latency, proxy, sessions, mbPerSession: mb, ...loop }
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
}

async function trueLatency(root: string, runs: number, sandbox: Sandbox) {
  const dataDir = join(root, 'data-latency')
  const home = fakeHome(join(root, 'home'))
  const credentials = credentialPaths({ hide: defaultHiddenPatterns({ home }) })
  const tools = {
    plain: createBashTool({ dataDir, sandbox: unconfined('off') }),
    sandboxed: createBashTool({ dataDir, sandbox }),
    hidingCredentials: createBashTool({ dataDir, sandbox: bwrapSandbox({ hidden: [dataDir], credentials }) }),
    proxied: createBashTool({ dataDir, sandbox, network: benchPolicy(0) }),
  }
  const kinds = Object.keys(tools) as (keyof typeof tools)[]
  const ms: Record<keyof typeof tools, number[]> = { plain: [], sandboxed: [], hidingCredentials: [], proxied: [] }
  const ctx = context(root)
  for (let i = 0; i < 10; i++) for (const tool of Object.values(tools)) await tool.execute({ command: 'true' }, ctx) // warm-up
  for (let i = 0; i < runs; i++) {
    for (const kind of rotate(kinds, i)) {
      const started = performance.now()
      await tools[kind].execute({ command: 'true' }, ctx)
      ms[kind].push(performance.now() - started)
    }
  }
  const plain = summary(ms.plain)
  const sandboxed = summary(ms.sandboxed)
  const hiding = summary(ms.hidingCredentials)
  const proxied = summary(ms.proxied)
  return {
    trueMs: { plain, sandboxed, hidingCredentials: hiding, withNetworkList: proxied },
    overheadMedianMs: round(sandboxed.p50 - plain.p50),
    overheadP99Ms: round(sandboxed.p99 - plain.p99),
    ratioMedian: round(sandboxed.p50 / plain.p50),
    hiddenCredentialPaths: credentials.view(root).mounts.length,
    hidingOverheadMedianMs: round(hiding.p50 - plain.p50),
    hidingOverheadP99Ms: round(hiding.p99 - plain.p99),
    networkListOverheadMedianMs: round(proxied.p50 - plain.p50),
    networkListOverheadP99Ms: round(proxied.p99 - plain.p99),
    networkListOverSandboxMedianMs: round(proxied.p50 - sandboxed.p50),
    networkListOverSandboxP99Ms: round(proxied.p99 - sandboxed.p99),
  }
}

/** A list with one name, bench.test, mapped to this machine by the resolver hook (its address exempt by name). */
function benchPolicy(port: number): ProxyPolicy {
  return {
    hosts: [{ host: 'bench.test', ...(port > 0 && { port }) }],
    unlisted: 'refuse',
    net: { allowHosts: ['bench.test'], resolve: async () => [{ address: '127.0.0.1', family: 4 }] },
  }
}

/** Node, inside the sandbox: `n` fresh connections in turn, each one request and its whole answer; prints their ms. */
const CONNECTIONS_SCRIPT = `
const net = require('node:net')
const [mode, port, n] = process.argv.slice(2)
const proxy = process.env.HTTP_PROXY ? new URL(process.env.HTTP_PROXY) : undefined
const once = () => new Promise((resolve, reject) => {
  const started = performance.now()
  const socket = mode === 'proxy' ? net.connect(Number(proxy.port), '127.0.0.1') : net.connect(Number(port), '127.0.0.1')
  let buffered = ''
  let tunnelled = mode !== 'proxy'
  const request = () => socket.write('GET /small HTTP/1.1\\r\\nhost: bench.test\\r\\nconnection: close\\r\\n\\r\\n')
  socket.on('connect', () => tunnelled ? request() : socket.write('CONNECT bench.test:' + port + ' HTTP/1.1\\r\\nhost: bench.test:' + port + '\\r\\n\\r\\n'))
  socket.on('data', (d) => {
    if (tunnelled) return
    buffered += d
    if (!buffered.includes('\\r\\n\\r\\n')) return
    if (!buffered.startsWith('HTTP/1.1 200')) return reject(new Error(buffered))
    tunnelled = true
    request()
  })
  socket.on('end', () => resolve(performance.now() - started))
  socket.on('error', reject)
})
;(async () => {
  const ms = []
  for (let i = 0; i < 20; i++) await once()
  for (let i = 0; i < Number(n); i++) ms.push(await once())
  process.stdout.write(JSON.stringify(ms) + '\\n')
})()
`

async function proxyCost(root: string, connections: number, downloadMb: number) {
  const dataDir = join(root, 'data-proxy')
  // the origin in a process of its own, as a registry is elsewhere: the proxy's event loop does not serve it too
  const origin = spawn(process.execPath, ['-e', ORIGIN_SCRIPT, String(downloadMb)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const port = await new Promise<number>((resolve, reject) => {
    origin.stdout.once('data', (d: Buffer) => resolve(Number(String(d).trim())))
    origin.once('exit', (code) => reject(new Error(`the origin server exited (${code})`)))
  })
  try {
    const proxied = createBashTool({
      dataDir,
      sandbox: bwrapSandbox({ hidden: [dataDir] }),
      network: benchPolicy(port),
    })
    const direct = createBashTool({ dataDir, sandbox: bwrapSandbox({ hidden: [dataDir], network: true }) })
    const ctx = context(root)
    writeFileSync(join(root, 'connections.js'), CONNECTIONS_SCRIPT)
    const times = async (tool: typeof direct, mode: 'proxy' | 'direct', n: number) => {
      const out = await tool.execute({ command: `node connections.js ${mode} ${port} ${n}` }, ctx)
      const line = out.output.split('\n').find((l) => l.startsWith('['))
      if (!line) throw new Error(`no timings from the ${mode} run: ${out.output}`)
      return JSON.parse(line) as number[]
    }
    // in rounds, alternating, so both see the same machine
    const rounds = 5
    const perRound = Math.ceil(connections / rounds)
    const samples = { proxy: [] as number[], direct: [] as number[] }
    for (let i = 0; i < rounds; i++) {
      samples.proxy.push(...(await times(proxied, 'proxy', perRound)))
      samples.direct.push(...(await times(direct, 'direct', perRound)))
    }
    const viaProxy = summary(samples.proxy)
    const straight = summary(samples.direct)
    const speed = async (tool: typeof direct, flags: string) => {
      const out = await tool.execute(
        { command: `curl -sS ${flags} -o /dev/null -w 'SPEED %{speed_download}\\n' http://bench.test:${port}/big` },
        ctx,
      )
      const m = /SPEED ([\d.]+)/.exec(out.output)
      if (!m) throw new Error(`no speed from curl ${flags}: ${out.output}`)
      return round(Number(m[1]) / 2 ** 20)
    }
    const resolveDirect = `--resolve bench.test:${port}:127.0.0.1 --noproxy '*'`
    const download = { directMBps: [] as number[], connectMBps: [] as number[], forwardMBps: [] as number[] }
    const ways = {
      directMBps: () => speed(direct, resolveDirect),
      connectMBps: () => speed(proxied, '--proxytunnel'),
      forwardMBps: () => speed(proxied, ''),
    }
    const kinds = Object.keys(ways) as (keyof typeof ways)[]
    // one unmeasured round first: the origin's first answer came at a third to a half of the speed of later ones
    for (const kind of kinds) await ways[kind]()
    for (let i = 0; i < DOWNLOAD_ROUNDS; i++)
      for (const kind of rotate(kinds, i)) download[kind].push(await ways[kind]())
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number
    return {
      connections: rounds * perRound,
      connectionMs: { direct: straight, throughProxy: viaProxy },
      overheadPerConnectionMedianMs: round(viaProxy.p50 - straight.p50),
      overheadPerConnectionP99Ms: round(viaProxy.p99 - straight.p99),
      downloadMb,
      download,
      connectThroughputRatio: round(median(download.connectMBps) / median(download.directMBps)),
      forwardThroughputRatio: round(median(download.forwardMBps) / median(download.directMBps)),
    }
  } finally {
    origin.kill()
  }
}

/** Downloads of each kind measured, in rounds whose order rotates (the medians are reported). */
const DOWNLOAD_ROUNDS = 5

/** A server on 127.0.0.1: `/big` answers argv[1] MB, anything else a few bytes; prints its port. */
const ORIGIN_SCRIPT = `
const payload = Buffer.alloc(Number(process.argv[1]) * 1024 * 1024, 'x')
const server = require('node:http').createServer((req, res) => {
  if (req.url !== '/big') return res.end('ok\\n')
  res.writeHead(200, { 'content-length': payload.length })
  res.end(payload)
})
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'))
`

/** A HOME holding every default credential path (a file where the name is a file's, else a directory with one). */
function fakeHome(home: string): string {
  const files = new Set(['.netrc', '.git-credentials', '.npmrc', '.pypirc'])
  for (const { base, path } of DEFAULT_HIDDEN_PATHS) {
    const at = join(
      home,
      base === 'config' ? '.config' : base === 'data' ? '.local/share' : '',
      path.replace('*', '.toml'),
    )
    const file = files.has(path) || path.includes('*') ? at : join(at, 'secret')
    mkdirSync(dirname(file), { recursive: true })
    writeFileSync(file, 'secret\n')
  }
  return home
}

/** The kinds in a different order each run, so none always goes first. */
function rotate<T>(items: readonly T[], i: number): T[] {
  return items.map((_, k) => items[(i + k) % items.length] as T)
}

async function eventLoopUnderOutput(root: string, sessions: number, mb: number, sandbox: Sandbox) {
  const directory = join(root, 'work')
  const dataDir = join(root, 'data')
  mkdirSync(directory, { recursive: true })
  const store = openStore(join(root, 'loop.db'))
  const ids = createIdSource()
  const agents = resolveAgents([], [{ permission: 'bash', pattern: '*', action: 'allow' }])
  const tools = createToolRegistry({
    agents,
    tools: createBuiltinTools({ dataDir, sandbox, updateTodos: () => undefined }),
  })
  const command = `yes chronicle-output-line | head -c ${mb * 1024 * 1024}; echo done`
  const model = createScriptedModel({
    uniqueCallIds: true,
    steps: [
      { when: { afterToolResult: false }, toolCalls: [{ name: 'bash', input: { command, timeout: 600_000 } }] },
      { when: { afterToolResult: true }, text: 'ok' },
    ],
  })
  const runtime = createRuntime({
    ports: sqlitePorts(store),
    ids,
    models: fixedModelResolver(model, 'scripted:bench'),
    tools,
    permissions: createPermissionGate({ ports: sqlitePorts(store), ids, agents }),
    agents,
  })
  const idle = await measure(() => new Promise((r) => setTimeout(r, 2000)))
  const sessionIds: string[] = []
  for (let i = 0; i < sessions; i++) {
    const id = ids.next('ses')
    await execute(
      sqlitePorts(store),
      id,
      (s) => decideSession({ type: 'create', directory, agent: 'build', model: 'scripted:bench' }, s, id),
      { meta: { actor: 'user' } },
    )
    sessionIds.push(id)
  }
  const started = performance.now()
  const busy = await measure(async () => {
    for (const id of sessionIds) await runtime.submit(id, { parts: [{ type: 'text', text: 'go' }] })
    await Promise.all(sessionIds.map((id) => runtime.idle(id)))
  })
  const seconds = (performance.now() - started) / 1000
  const outputs = sessionIds.map((id) => store.readSession(id).filter((e) => e.type === 'tool.completed').length)
  if (outputs.some((n) => n !== 1)) throw new Error('a command did not complete')
  await runtime.stop()
  store.close()
  return {
    // monitorEventLoopDelay at a 10 ms resolution reports the interval between its timer's runs: 10 = no delay at all
    eventLoopDelayMs: { resolutionMs: 10, idle, busy },
    outputMbPerSec: round((sessions * mb) / seconds),
    busySeconds: round(seconds),
  }
}

/** Event-loop delay (ms) while `work` runs. */
async function measure(work: () => Promise<unknown>) {
  const histogram = monitorEventLoopDelay({ resolution: 10 })
  histogram.enable()
  await work()
  histogram.disable()
  return {
    p50: round(histogram.percentile(50) / 1e6),
    p99: round(histogram.percentile(99) / 1e6),
    max: round(histogram.max / 1e6),
  }
}

function context(directory: string): ToolContext {
  return {
    sessionId: 'ses_bench',
    messageId: 'msg_bench',
    callId: 'call_bench',
    partId: 'prt_bench',
    agent: 'build',
    directory,
    abort: new AbortController().signal,
    progress: () => undefined,
    ask: async () => undefined,
    check: () => 'allow',
  }
}

function summary(values: number[]) {
  const sorted = [...values].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number
  return { p50: round(at(0.5)), p99: round(at(0.99)) }
}

function round(n: number): number {
  return Math.round(n * 100) / 100
}

function flag(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name)
  const value = i >= 0 ? Number(args[i + 1]) : fallback
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`)
  return value
}
