import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import WebSocket from 'ws'
import { benchPostgres, storeOption } from './postgres.js'

/**
 * `npm run bench -- stream [--sizes 25,50,100,200,300,400,600,800] [--deltas 250] [--budget-s 420] [--store postgres]
 * [--nodes 3]`
 *
 * A real server process (bin/chronicle.mjs serve) streams S sessions at once
 * from the scripted model at ~50 text deltas/s each; every session has two
 * WebSocket subscribers, each on its own connection. Per S it reports the
 * delivered events/s, commit → receipt latency (the event's `at` is its
 * commit time), lost and duplicated events against the log, and the
 * server's peak RSS. S steps up until two sizes in a row miss (below) or the
 * time budget is spent.
 *
 * The scripted model keeps its own schedule, as a provider does: chunk j of a
 * reply is due j × 20 ms after the first, whether or not the server has read
 * the one before (a server that falls behind finds the chunks it is late for
 * waiting, as in a socket's buffer). Commit → receipt latency alone would not
 * show a server falling behind, so each delta's lag behind that schedule is
 * measured too: receipt time − (the reply's first delta's commit time + j × 20
 * ms). maxSessionsHeld is the largest S with latencyP99Ms <= 100 and nothing
 * lost or duplicated (the issue's measure); maxSessionsOnSchedule also asks
 * scheduleLagP99Ms <= 100. deltasPerSecPerSession (median over sessions, first
 * to last delta as a subscriber saw them) shows the pace delivered.
 *
 * `--store postgres`: the server runs on PostgreSQL (CHRONICLE_DATABASE_URL's
 * database, or a new one on a throwaway server: bench/postgres.ts), and each
 * round also reports that server's CPU in cores (postgresCores; the two
 * share this machine's cores).
 *
 * `--nodes N` (with `--store postgres`): N server processes as the nodes of
 * one cluster on that database (docs/CLUSTER.md). Session i is made at node
 * i mod N, which runs it; its k-th subscriber connects to node (i + k) mod N,
 * so with two subscribers one watches from the session's node and one from
 * another. The server's CPU and cores are the nodes' together; its RSS the
 * largest node's.
 */

interface Round {
  sessions: number
  subscribers: number
  events: number
  deliveredEventsPerSec: number
  latencyP50Ms: number
  latencyP99Ms: number
  /** a delta's receipt behind the model's schedule (see above) */
  scheduleLagP50Ms: number
  scheduleLagP99Ms: number
  /** step.started's commit → the first delta's receipt (the time to first token, which the model does not add here) */
  firstDeltaP50Ms: number
  firstDeltaP99Ms: number
  lost: number
  duplicated: number
  outOfOrder: number
  serverRssMb: number
  /** server CPU (user + system) over the round divided by the text deltas streamed */
  serverCpuUsPerDelta: number
  /** of which the kernel's (system CPU: socket writes, fsync, the file's pages) */
  serverSystemCpuUsPerDelta: number
  /** CPU of the server and of this benchmark's own clients, in cores (2 on this machine class) */
  serverCores: number
  clientCores: number
  /** --store postgres: PostgreSQL's CPU, in cores, when the bench started it */
  postgresCores?: number
  /** median over sessions of the delta rate a subscriber saw (nominal: 1000 / DELTA_MS) */
  deltasPerSecPerSession: number
  /** text.delta events stored per model chunk: 1 when the server keeps up, lower when it merges (docs/EVENTS.md "Deltas") */
  deltaEventsPerDelta: number
  seconds: number
}

const DELTA_MS = 20 // 50 deltas per second per session
const CHUNK = 8

function option(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`)
  return i >= 0 && args[i + 1] ? (args[i + 1] as string) : fallback
}

export default async function (args: string[]): Promise<object> {
  const sizes = option(args, 'sizes', '25,50,100,200,300,400,600,800').split(',').map(Number)
  const deltas = Number(option(args, 'deltas', '250'))
  const budgetMs = Number(option(args, 'budget-s', '420')) * 1000
  const perSession = Number(option(args, 'subscribers', '2'))
  const store = storeOption(args)
  const nodes = Number(option(args, 'nodes', '1'))
  if (nodes > 1 && store !== 'postgres') throw new Error('--nodes: a cluster runs on PostgreSQL (--store postgres)')
  const postgres = store === 'postgres' ? await benchPostgres() : undefined
  const databaseUrl = await postgres?.database()
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-bench-stream-'))
  const script = join(dir, 'script.json')
  writeFileSync(
    script,
    JSON.stringify({
      chunkSize: CHUNK,
      delayMs: DELTA_MS,
      pace: 'deltas', // the first delta comes with the stream start: the time to first delta is the server's
      steps: [{ when: { afterToolResult: false }, text: 'x'.repeat(CHUNK * deltas) }],
    }),
  )
  const { mkdirSync } = await import('node:fs')
  // CHRONICLE_BENCH_OBSERVABILITY=on: metrics and traces to a receiver in this process (docs/OBSERVABILITY.md
  // "Cost"); off: neither; unset: the server's defaults (metrics on, no traces)
  const observe = process.env.CHRONICLE_BENCH_OBSERVABILITY
  const receiver = observe === 'on' ? await spanSink() : undefined
  // The server runs as `npm start` runs it (its node flags), plus e.g.
  // CHRONICLE_BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to profile it.
  const nodeArgs = [...startFlags(), ...(process.env.CHRONICLE_BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean)]
  // a cluster's nodes share one token; a lone server makes its own
  const sharedToken = nodes > 1 ? `bench-cluster-${Date.now()}-0123456789abcdef` : undefined
  const start = async (n: number) => {
    const data = join(dir, nodes > 1 ? `data-${n}` : 'data')
    mkdirSync(data, { recursive: true })
    writeFileSync(
      join(data, 'chronicle.json'),
      JSON.stringify({
        limits: { maxConnections: 10_000 },
        ...(observe === 'off' && { metrics: false }),
        ...(receiver && { metrics: true, traces: { endpoint: receiver.url } }),
      }),
    )
    const server = spawn(
      process.execPath,
      [...nodeArgs, join(import.meta.dirname, '..', 'bin', 'chronicle.mjs'), 'serve'],
      {
        env: {
          ...process.env,
          CHRONICLE_DATA_DIR: data,
          CHRONICLE_PORT: '0',
          CHRONICLE_MODEL: `scripted:${script}`,
          CHRONICLE_LOG_LEVEL: 'warn',
          ...(databaseUrl && { CHRONICLE_DATABASE_URL: databaseUrl }),
          ...(sharedToken && { CHRONICLE_TOKEN: sharedToken, CHRONICLE_CLUSTER_NODE: `bench-${n}` }),
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    )
    const url = await new Promise<string>((resolve, reject) => {
      let out = ''
      server.stdout.on('data', (d: Buffer) => {
        out += String(d)
        const m = /listening on (http:\/\/\S+)/.exec(out)
        if (m) resolve(m[1] as string)
      })
      server.once('exit', (code) => reject(new Error(`server exited ${code}`)))
    })
    return { server, url, token: sharedToken ?? readFileSync(join(data, 'token'), 'utf8').trim() }
  }
  const servers: Awaited<ReturnType<typeof start>>[] = []
  try {
    for (let n = 0; n < nodes; n++) servers.push(await start(n))
  } catch (err) {
    for (const { server } of servers) server.kill('SIGKILL')
    await postgres?.stop()
    throw err
  }
  const token = (servers[0] as (typeof servers)[number]).token
  const urlOf = (i: number) => (servers[i % nodes] as (typeof servers)[number]).url
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
  /** a request to node `at` (the session's, for its commands) */
  const api = async <T>(method: string, path: string, body?: unknown, at = 0): Promise<T> => {
    const res = await fetch(urlOf(at) + path, {
      method,
      headers,
      ...(body !== undefined && { body: JSON.stringify(body) }),
    })
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`)
    return (await res.json()) as T
  }
  // system CPU of the server processes, in ms (/proc/<pid>/stat field 15, in clock ticks): the kernel's share
  const serverSystemCpuMs = () => servers.reduce((sum, { server }) => sum + (procTicks(server.pid, 12) * 1000) / 100, 0)
  // user + system CPU of the server processes, in ms (fields 14 and 15)
  const serverCpuMs = () =>
    servers.reduce((sum, { server }) => sum + ((procTicks(server.pid, 11) + procTicks(server.pid, 12)) * 1000) / 100, 0)
  const rss = () =>
    Math.max(
      ...servers.map(({ server }) => {
        const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${server.pid}/status`, 'utf8'))
        return m ? Number(m[1]) / 1024 : 0
      }),
    )

  const rounds: Round[] = []
  let unloadedPace = 0
  const started = Date.now()
  try {
    // Warm-up (JIT, lazy modules, first writes); only its pace is reported.
    unloadedPace = (await playRound(5)).deltasPerSecPerSession
    let misses = 0
    for (const S of sizes) {
      if (Date.now() - started > budgetMs) break
      const round = await playRound(S)
      rounds.push(round)
      process.stderr.write(`stream S=${S}: ${JSON.stringify(round)}\n`)
      if (round.lost > 0 || round.duplicated > 0) break
      // Two sizes in a row over budget end the climb (one miss can be noise on a shared machine).
      misses = holds(round) ? 0 : misses + 1 // the climb goes on while the measure holds
      if (misses === 2) break
    }
  } finally {
    await Promise.all(
      servers.map(({ server }) => {
        server.kill('SIGTERM')
        return new Promise((r) => server.once('exit', r))
      }),
    )
    receiver?.close()
    rmSync(dir, { recursive: true, force: true })
    await postgres?.stop()
  }
  const held = rounds.filter(holds).sort((a, b) => a.sessions - b.sessions)
  const onSchedule = held.filter((r) => r.scheduleLagP99Ms <= 100)
  const best = held.at(-1) ?? rounds[0]
  return {
    store,
    nodes,
    deltasPerSecondPerSession: 1000 / DELTA_MS,
    unloadedDeltasPerSecPerSession: unloadedPace,
    deltasPerSession: deltas,
    subscribersPerSession: perSession,
    maxSessionsHeld: held.at(-1)?.sessions ?? 0,
    maxSessionsOnSchedule: onSchedule.at(-1)?.sessions ?? 0,
    ...(best && {
      atMaxSessionsHeld: best,
    }),
    lost: rounds.reduce((n, r) => n + r.lost, 0),
    duplicated: rounds.reduce((n, r) => n + r.duplicated, 0),
    rounds,
  }

  async function waitIdle(id: string, at: number): Promise<void> {
    for (;;) {
      await new Promise((r) => setTimeout(r, 200))
      const { session } = await api<{ session: { status: string; lastRun: unknown } }>(
        'GET',
        `/sessions/${id}`,
        undefined,
        at,
      )
      if (session.status === 'idle' && session.lastRun) return
    }
  }

  async function playRound(S: number): Promise<Round> {
    const ids: string[] = []
    const from = new Map<string, number>() // subscribe after the session's creation: every measured event is live
    for (let i = 0; i < S; i++) {
      const { session } = await api<{ session: { id: string; lastSeq: number } }>(
        'POST',
        '/sessions',
        { title: `bench ${S}/${i}` },
        i, // made at node i mod N, which runs it
      )
      ids.push(session.id)
      from.set(session.id, session.lastSeq)
    }
    const latencies: number[] = []
    const lags: number[] = []
    const deltaTimes = new Map<string, { first: number; last: number; n: number; n0: number; firstAt: number }>() // session → first subscriber's delta receipts
    const stepAt = new Map<string, number>() // session → commit time of its step.started
    const firstDelta: number[] = [] // step.started commit → first delta's receipt
    const received = new Map<string, number[]>() // subscriber → seqs
    const sockets: WebSocket[] = []
    let events = 0
    let deltaEvents = 0
    let peakRss = rss()
    const done: Promise<void>[] = perSession === 0 ? ids.map((id, i) => waitIdle(id, i)) : []
    for (const [i, id] of ids.entries()) {
      for (let k = 0; k < perSession; k++) {
        const key = `${id}#${k}`
        const seqs: number[] = []
        received.set(key, seqs)
        const ws = new WebSocket(`${urlOf(i + k).replace(/^http/, 'ws')}/ws`, {
          headers: { authorization: `Bearer ${token}` },
        })
        sockets.push(ws)
        await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject))
        done.push(
          new Promise<void>((resolve) => {
            ws.on('message', (raw) => {
              const now = Date.now()
              const f = JSON.parse(String(raw)) as {
                type?: string
                seq?: number
                event?: { type: string; at: string; data: { text?: string } }
              }
              if (f.type !== 'event' || !f.event) return
              events++
              seqs.push(f.seq as number)
              if (k === 0 && f.event.type === 'step.started') stepAt.set(id, Date.parse(f.event.at))
              if (k === 0 && f.event.type === 'text.delta') {
                // A loaded server may store several of the model's chunks as one delta:
                // n counts chunks (by text), and an event is on time when its last chunk is.
                const chunks = (f.event.data.text?.length ?? 0) / CHUNK
                deltaEvents++
                const t = deltaTimes.get(id)
                if (t) {
                  t.last = now
                  t.n += chunks
                  lags.push(now - (t.firstAt + (t.n - 1) * DELTA_MS))
                } else {
                  deltaTimes.set(id, { first: now, last: now, n: chunks, n0: chunks, firstAt: Date.parse(f.event.at) })
                  firstDelta.push(now - (stepAt.get(id) ?? now))
                }
              }
              latencies.push(now - Date.parse(f.event.at))
              if (f.event.type === 'run.finished') resolve()
            })
          }),
        )
        ws.send(JSON.stringify({ id: 'sub', method: 'subscribe', params: { sessions: [id], after: from.get(id) } }))
      }
    }
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, rss())), 250)
    const t0 = Date.now()
    const cpu0 = serverCpuMs()
    const systemCpu0 = serverSystemCpuMs()
    const postgresCpu0 = postgres?.cpuMs()
    const clientCpu0 = process.cpuUsage()
    // Sessions start spread over one second, as users would, rather than in one synchronized burst.
    await Promise.all(
      ids.map(async (id, i) => {
        await new Promise((r) => setTimeout(r, (i * 1000) / S))
        await api('POST', `/sessions/${id}/inputs`, { parts: [{ type: 'text', text: 'stream please' }] }, i)
      }),
    )
    await Promise.all(done)
    const seconds = (Date.now() - t0) / 1000
    const cpuMs = serverCpuMs() - cpu0
    const systemCpuMs = serverSystemCpuMs() - systemCpu0
    const postgresCpuMs = postgresCpu0 === undefined ? undefined : (postgres?.cpuMs() ?? postgresCpu0) - postgresCpu0
    const clientCpu = process.cpuUsage(clientCpu0)
    clearInterval(sampler)

    // A session's log goes on past run.finished (its title, the workspace snapshot taken
    // as the run ends): the sockets stay open until they have all the log held when it was
    // read, or 10 s pass. What has not arrived by then is lost.
    const expectedOf = new Map<string, number[]>()
    for (const [i, id] of ids.entries()) {
      const expected: number[] = []
      let after = from.get(id) ?? 0
      for (;;) {
        const page = await api<{ events: { seq: number }[]; next?: number }>(
          'GET',
          `/sessions/${id}/events?after=${after}&limit=5000`,
          undefined,
          i,
        )
        expected.push(...page.events.map((e) => e.seq))
        if (page.next === undefined) break
        after = page.next
      }
      expectedOf.set(id, expected)
    }
    const caughtUp = () =>
      ids.every((id) => {
        const last = expectedOf.get(id)?.at(-1) ?? 0
        return Array.from({ length: perSession }, (_, k) => received.get(`${id}#${k}`)?.at(-1) ?? 0).every(
          (seq) => seq >= last,
        )
      })
    for (const deadline = Date.now() + 10_000; !caughtUp() && Date.now() < deadline; )
      await new Promise((r) => setTimeout(r, 50))
    for (const ws of sockets) ws.terminate()

    let lost = 0
    let duplicated = 0
    let outOfOrder = 0
    for (const id of ids) {
      const expected = expectedOf.get(id) ?? []
      for (let k = 0; k < perSession; k++) {
        const got = received.get(`${id}#${k}`) ?? []
        const unique = new Set(got)
        duplicated += got.length - unique.size
        lost += expected.filter((s) => !unique.has(s)).length
        for (let i = 1; i < got.length; i++) if ((got[i] as number) <= (got[i - 1] as number)) outOfOrder++
      }
    }
    latencies.sort((a, b) => a - b)
    lags.sort((a, b) => a - b)
    firstDelta.sort((a, b) => a - b)
    const pct = (p: number, xs = latencies) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? 0
    return {
      sessions: S,
      subscribers: S * perSession,
      events,
      deliveredEventsPerSec: Math.round(events / seconds),
      latencyP50Ms: pct(50),
      latencyP99Ms: pct(99),
      scheduleLagP50Ms: pct(50, lags),
      scheduleLagP99Ms: pct(99, lags),
      firstDeltaP50Ms: pct(50, firstDelta),
      firstDeltaP99Ms: pct(99, firstDelta),
      deltasPerSecPerSession: medianRate(deltaTimes),
      deltaEventsPerDelta: Math.round((deltaEvents / (S * deltas)) * 100) / 100,
      lost,
      duplicated,
      outOfOrder,
      serverRssMb: Math.round(peakRss),
      serverCpuUsPerDelta: Math.round((cpuMs * 1000) / (S * deltas)),
      serverSystemCpuUsPerDelta: Math.round((systemCpuMs * 1000) / (S * deltas)),
      serverCores: Math.round(cpuMs / seconds / 10) / 100,
      clientCores: Math.round((clientCpu.user + clientCpu.system) / 1000 / seconds / 10) / 100,
      ...(postgresCpuMs !== undefined && { postgresCores: Math.round(postgresCpuMs / seconds / 10) / 100 }),
      seconds: Math.round(seconds * 10) / 10,
    }
  }
}

/** A field of /proc/<pid>/stat after the command's name (11: user ticks, 12: system ticks). */
function procTicks(pid: number | undefined, field: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? []
  return Number(fields[field])
}

/** The node flags of package.json's `start` script (`node <flags> bin/chronicle.mjs serve`). */
function startFlags(): string[] {
  const pkg = JSON.parse(readFileSync(join(import.meta.dirname, '..', 'package.json'), 'utf8')) as {
    scripts: { start: string }
  }
  return pkg.scripts.start.split(/\s+/).filter((word) => word.startsWith('--'))
}

function holds(r: Round): boolean {
  return r.latencyP99Ms <= 100 && r.lost === 0 && r.duplicated === 0
}

function medianRate(times: ReadonlyMap<string, { first: number; last: number; n: number; n0: number }>): number {
  const rates = [...times.values()]
    .filter((t) => t.n > t.n0 && t.last > t.first)
    .map((t) => ((t.n - t.n0) * 1000) / (t.last - t.first))
    .sort((a, b) => a - b)
  return Math.round((rates[Math.floor(rates.length / 2)] ?? 0) * 10) / 10
}

/** An OTLP/HTTP receiver that reads and drops what it is sent (its CPU is this process's, not the server's). */
async function spanSink(): Promise<{ url: string; close(): void }> {
  const { createServer } = await import('node:http')
  const server = createServer((req, res) => {
    req.resume()
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, close: () => server.close() }
}
