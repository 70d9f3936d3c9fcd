import { type ChildProcess, spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Inspector } from './inspector.js'

/**
 * The soak (issue #33): a server that runs for weeks must hold its pace and
 * its memory under a steady load.
 *
 *   npm run test:soak -- --seconds 600 --clients 12 --heap 192 [--warmup 60] [--interval 15] [--turns 10] [--snapshots dir]
 *
 * Two real server processes (`bin/chronicle.mjs serve`, dist/ as `npm start`
 * runs it, each heap capped at --heap MB) serve the scripted model. A client
 * creates a session and runs --turns turns in it (a `read` of a file, then
 * ~600 characters of streamed text), each one
 * `POST /sessions/:id/inputs?wait=true`, then starts over with a new session.
 *
 * 1. The soaked server gets --clients clients for --warmup seconds (the
 *    caches fill, the code compiles; not measured), then --seconds more,
 *    printing a JSON line every --interval seconds: turns, turn latency
 *    percentiles, the heap used right after a forced full collection (through
 *    its V8 inspector), RSS and CPU per turn.
 * 2. The comparison with a reference server, started now. The machine's
 *    pace moves in phases of 100 s and more on these VMs (a turn's CPU
 *    10.6–18.2 ms by 15 s interval with nothing in the server changing), so
 *    thirds of one run measure the host as much as the server. Two servers
 *    under load at the same time share the host's moments: they differ by
 *    what the soaked one has served and the reference has not. Each gets half
 *    the clients. First both run until the reference has had --warmup
 *    seconds and served as many sessions as the soaked one had when step 1
 *    began measuring (its bounded caches as full), then six intervals of
 *    --interval seconds are measured; each figure is the median of the
 *    intervals' ratios. Both get the forced full collection step 1 gave the
 *    soaked server every interval: V8's collector costs more for a while
 *    after one (alone, a turn 8–30% dearer on the server that had them).
 *
 * The last line is the summary. The exit code is non-zero when
 *   - the last third of step 2 runs under 90% of the first third's turns a
 *     second, and the comparison does not show the reference as slow (the
 *     soaked server runs under 90% of its turns a second, or a turn costs it
 *     over 10% more CPU): a fall both share is the host's, a warning;
 *   - in the comparison, a turn costs the soaked server over 15% more CPU
 *     than the reference, or it runs under 90% of the reference's turns a
 *     second while a turn costs it over 5% more CPU;
 *   - the soaked server's heap used after GC grows more than 10% over the
 *     second half of step 2 (the mean of the last three samples against the
 *     three around the middle);
 *   - any request fails.
 */

export interface SoakOptions {
  readonly seconds: number
  readonly clients: number
  /** --max-old-space-size of the servers, MB (0: uncapped) */
  readonly heapMb: number
  readonly intervalS: number
  /** seconds of load each server gets before anything is measured (default 60) */
  readonly warmupS: number
  readonly turnsPerSession: number
  /** write heap snapshots of the soaked server here at a third and at the end (for heap-diff.py) */
  readonly snapshots?: string
  readonly log?: (line: string) => void
}

export interface SoakInterval {
  readonly t: number
  readonly turns: number
  readonly turnsPerSec: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly heapAfterGcMb: number
  readonly rssMb: number
  /** the server's CPU time (user + system) over the interval's turns */
  readonly cpuMsPerTurn: number
  readonly sessions: number
  readonly errors: number
}

/** One interval of the comparison: the turns each server ran, and its CPU time per turn. */
export interface SoakPhase {
  readonly soaked: { readonly turns: number; readonly cpuMsPerTurn: number }
  readonly reference: { readonly turns: number; readonly cpuMsPerTurn: number }
}

export interface SoakComparison {
  /** sessions each server had served when the comparison began */
  readonly soakedSessions: number
  readonly referenceSessions: number
  /** each server's heap used after a forced full collection, before the intervals */
  readonly soakedHeapMb: number
  readonly referenceHeapMb: number
  readonly soakedCpuMsPerTurn: number
  readonly referenceCpuMsPerTurn: number
  /** soaked over reference: the median of the intervals' ratios */
  readonly cpuRatio: number
  readonly throughputRatio: number
  readonly phases: readonly SoakPhase[]
}

export interface SoakResult {
  readonly seconds: number
  readonly clients: number
  readonly heapMb: number
  readonly warmupS: number
  /** turns completed in the measured --seconds */
  readonly turns: number
  readonly sessions: number
  readonly errors: number
  readonly firstErrors: readonly string[]
  readonly turnsPerSec: number
  readonly comparison: SoakComparison
  /** the thirds of step 2 (the measure), judged beside the comparison (see above) */
  readonly firstThirdTurnsPerSec: number
  readonly lastThirdTurnsPerSec: number
  readonly throughputRatio: number
  readonly firstThirdCpuMsPerTurn: number
  readonly lastThirdCpuMsPerTurn: number
  readonly cpuRatio: number
  readonly latency: { readonly p50Ms: number; readonly p90Ms: number; readonly p99Ms: number; readonly maxMs: number }
  readonly heapMidMb: number
  readonly heapEndMb: number
  readonly heapGrowth: number
  readonly rssStartMb: number
  readonly rssEndMb: number
  readonly intervals: readonly SoakInterval[]
  readonly violations: readonly string[]
  readonly warnings: readonly string[]
}

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const ANSWER =
  'The notes say the log is the truth: every fact is an event, appended once and never changed. ' +
  'Projections fold it into sessions, messages and parts; a client resumes from any seq without a gap; ' +
  'a crash is replayed, its interrupted calls marked, and the run resumed. Time travel reads the state ' +
  'at any event, and a fork starts a new session there. Memory should follow what is live, not what ' +
  'was ever served, and a turn should cost the same at the thousandth as at the first. That is what this ' +
  'soak checks, turn after turn, session after session, for as long as it is asked to run.'
/** intervals the comparison measures */
const COMPARED = 6

export async function runSoak(options: SoakOptions): Promise<SoakResult> {
  const log = options.log ?? (() => {})
  const root = mkdtempSync(join(tmpdir(), 'chronicle-soak-'))
  const script = join(root, 'script.json')
  writeFileSync(
    script,
    JSON.stringify({
      chunkSize: 16,
      delayMs: 0,
      uniqueCallIds: true,
      steps: [
        {
          when: { afterToolResult: false },
          toolCalls: [{ name: 'read', input: { filePath: 'notes.md' } }],
          usage: { input: 120, output: 20 },
        },
        { when: { afterToolResult: true }, text: ANSWER, usage: { input: 400, output: 150 } },
      ],
    }),
  )
  warnIfStale(log)
  const servers: Server[] = []
  const errors: { at: number; message: string }[] = []
  try {
    const soaked = await startServer({ root: join(root, 'soaked'), script, heapMb: options.heapMb })
    servers.push(soaked)
    const inspector = await Inspector.connect(soaked.inspectorUrl)

    const main = new Load(soaked, options, errors)
    if (options.warmupS > 0) {
      // Until the bounded caches fill and the code is compiled, a turn costs less than it will for weeks
      // after (measured: CPU per turn rises ~10% over the first ~90 s, then holds). Not measured.
      log(`soak: warming up for ${options.warmupS} s`)
      await sleep(options.warmupS * 1000)
    }

    const warmedSessions = soaked.sessions
    const intervals: SoakInterval[] = []
    const started = Date.now()
    const end = started + options.seconds * 1000
    let from = main.turns.length
    let errorsFrom = errors.length
    let last = started
    let cpuFrom = soaked.cpuMs()
    let snapshotTaken = false
    try {
      while (Date.now() < end) {
        const next = Math.min(end, started + (intervals.length + 1) * options.intervalS * 1000)
        await sleep(Math.max(0, next - Date.now()))
        const until = Date.now()
        const window = main.turns.slice(from)
        from = main.turns.length
        const heap = await inspector.heapUsedAfterGc()
        const ms = window.map((t) => t.ms)
        const cpu = soaked.cpuMs()
        const interval: SoakInterval = {
          t: Math.round((until - started) / 1000),
          turns: window.length,
          turnsPerSec: round(window.length / ((until - last) / 1000), 1),
          p50Ms: round(percentile(ms, 50)),
          p99Ms: round(percentile(ms, 99)),
          heapAfterGcMb: round(heap / 2 ** 20, 1),
          rssMb: round(soaked.rss() / 2 ** 20, 1),
          cpuMsPerTurn: round(window.length > 0 ? (cpu - cpuFrom) / window.length : 0),
          sessions: soaked.sessions,
          errors: errors.length - errorsFrom,
        }
        errorsFrom = errors.length
        cpuFrom = cpu
        last = until
        intervals.push(interval)
        log(JSON.stringify(interval))
        if (options.snapshots && !snapshotTaken && until - started >= (options.seconds * 1000) / 3) {
          snapshotTaken = true
          mkdirSync(options.snapshots, { recursive: true })
          await inspector.snapshot(join(options.snapshots, 'third.heapsnapshot'))
        }
      }
    } finally {
      await main.stop()
    }
    if (options.snapshots) await inspector.snapshot(join(options.snapshots, 'end.heapsnapshot')).catch(() => {})

    const reference = await startServer({ root: join(root, 'reference'), script, heapMb: options.heapMb })
    servers.push(reference)
    const referenceInspector = await Inspector.connect(reference.inspectorUrl)
    const comparison = await compare(
      { soaked, reference },
      { soaked: inspector, reference: referenceInspector },
      { options, errors, warmedSessions, log },
    )
    inspector.close()
    referenceInspector.close()
    return judge(options, { started, turns: main.turns, intervals, comparison, sessions: soaked.sessions, errors })
  } finally {
    await Promise.all(servers.map((s) => s.stop()))
    rmSync(root, { recursive: true, force: true })
  }
}

/** Step 2: both servers under load at once (see the file's comment). */
async function compare(
  servers: { soaked: Server; reference: Server },
  inspectors: { soaked: Inspector; reference: Inspector },
  o: {
    options: SoakOptions
    errors: { at: number; message: string }[]
    warmedSessions: number
    log: (line: string) => void
  },
): Promise<SoakComparison> {
  const { options, log } = o
  const clients = Math.max(1, Math.ceil(options.clients / 2))
  const loads = {
    soaked: new Load(servers.soaked, { ...options, clients }, o.errors),
    reference: new Load(servers.reference, { ...options, clients }, o.errors),
  }
  const gc = async () => ({
    soaked: await inspectors.soaked.heapUsedAfterGc(),
    reference: await inspectors.reference.heapUsedAfterGc(),
  })
  const intervalMs = options.intervalS * 1000
  try {
    log(`soak: warming up a reference server beside the soaked one, to ${o.warmedSessions} sessions`)
    const warming = performance.now()
    while (
      (performance.now() - warming < options.warmupS * 1000 || servers.reference.sessions < o.warmedSessions) &&
      performance.now() - warming < options.warmupS * 8_000
    ) {
      await sleep(intervalMs)
      await gc()
    }
    const heap = await gc()
    const soakedHeapMb = round(heap.soaked / 2 ** 20, 1)
    const referenceHeapMb = round(heap.reference / 2 ** 20, 1)
    const soakedSessions = servers.soaked.sessions
    const referenceSessions = servers.reference.sessions
    log(
      `soak: comparing (${soakedSessions} sessions served against ${referenceSessions}; heap after GC ${soakedHeapMb} MB against ${referenceHeapMb})`,
    )
    const phases: SoakPhase[] = []
    for (let k = 0; k < COMPARED; k++) {
      const from = { soaked: loads.soaked.turns.length, reference: loads.reference.turns.length }
      const cpu = { soaked: servers.soaked.cpuMs(), reference: servers.reference.cpuMs() }
      await sleep(intervalMs)
      const of = (name: 'soaked' | 'reference') => {
        const turns = loads[name].turns.length - from[name]
        return { turns, cpuMsPerTurn: round(turns > 0 ? (servers[name].cpuMs() - cpu[name]) / turns : 0) }
      }
      const phase = { soaked: of('soaked'), reference: of('reference') }
      phases.push(phase)
      log(JSON.stringify(phase))
      await gc()
    }
    const ratios = phases.map((p) => ({
      cpu: p.soaked.cpuMsPerTurn / p.reference.cpuMsPerTurn,
      throughput: p.soaked.turns / p.reference.turns,
    }))
    const mean = (name: 'soaked' | 'reference') => {
      const turns = phases.reduce((a, p) => a + p[name].turns, 0)
      return turns > 0 ? phases.reduce((a, p) => a + p[name].cpuMsPerTurn * p[name].turns, 0) / turns : 0
    }
    return {
      soakedSessions,
      referenceSessions,
      soakedHeapMb,
      referenceHeapMb,
      soakedCpuMsPerTurn: round(mean('soaked')),
      referenceCpuMsPerTurn: round(mean('reference')),
      cpuRatio: round(median(ratios.map((r) => r.cpu)), 3),
      throughputRatio: round(median(ratios.map((r) => r.throughput)), 3),
      phases,
    }
  } finally {
    await Promise.all([loads.soaked.stop(), loads.reference.stop()])
  }
}

/** The figures and the verdict. */
function judge(
  options: SoakOptions,
  run: {
    started: number
    turns: readonly { at: number; ms: number }[]
    intervals: readonly SoakInterval[]
    comparison: SoakComparison
    sessions: number
    errors: readonly { at: number; message: string }[]
  },
): SoakResult {
  const { started, intervals, comparison, errors } = run
  const measured = run.turns.filter((t) => t.at >= started)
  // Throughput by thirds of the time, from completions within the run.
  const third = (options.seconds * 1000) / 3
  const inThird = (k: number) => measured.filter((t) => t.at - started >= k * third && t.at - started < (k + 1) * third)
  const firstThirdTurnsPerSec = inThird(0).length / (third / 1000)
  const lastThirdTurnsPerSec = inThird(2).length / (third / 1000)
  const throughputRatio = firstThirdTurnsPerSec > 0 ? lastThirdTurnsPerSec / firstThirdTurnsPerSec : 0
  // The server's CPU time per turn over the intervals within the first and the last third.
  const cpuPerTurn = (within: (i: SoakInterval) => boolean) => {
    const xs = intervals.filter(within)
    const n = xs.reduce((a, i) => a + i.turns, 0)
    return n === 0 ? 0 : xs.reduce((a, i) => a + i.cpuMsPerTurn * i.turns, 0) / n
  }
  const firstThirdCpuMsPerTurn = cpuPerTurn((i) => i.t <= options.seconds / 3 + 1)
  const lastThirdCpuMsPerTurn = cpuPerTurn((i) => i.t - options.intervalS >= (options.seconds * 2) / 3 - 1)
  const cpuRatio = firstThirdCpuMsPerTurn > 0 ? lastThirdCpuMsPerTurn / firstThirdCpuMsPerTurn : 0
  // Heap after GC over the second half: the three samples around the middle against the last three.
  const heaps = intervals.map((i) => i.heapAfterGcMb)
  const mid = Math.floor((heaps.length - 1) / 2)
  const heapMidMb = mean(heaps.slice(Math.max(0, mid - 1), mid + 2))
  const heapEndMb = mean(heaps.slice(-3))
  const heapGrowth = heapMidMb > 0 ? heapEndMb / heapMidMb - 1 : 0
  const all = measured.map((t) => t.ms)
  const violations: string[] = []
  const warnings: string[] = []
  const served = `served ${comparison.soakedSessions} sessions against the reference's ${comparison.referenceSessions}`
  const more = (ratio: number) => `${round(ratio * 100 - 100, 1)}%`
  if (comparison.throughputRatio < 0.9) {
    const slower = `the soaked server (${served}) ran ${round(comparison.throughputRatio * 100, 1)}% of the reference's turns a second`
    // A turn that costs the server more is the server's doing; one that costs the same waited on something else.
    if (comparison.cpuRatio > 1.05) violations.push(`${slower}, each costing it ${more(comparison.cpuRatio)} more CPU`)
    else warnings.push(`${slower}, each costing it the same CPU (${comparison.cpuRatio}×)`)
  }
  // A cost that grows with what the server has served (a scan over every session served: +17% in 120 s).
  if (comparison.cpuRatio > 1.15)
    violations.push(
      `a turn costs the soaked server (${served}) ${more(comparison.cpuRatio)} more CPU than the reference`,
    )
  // The measure, the thirds of step 2, moves with the host as much as with the server: a fall
  // the reference shares (it served only a warm-up, and ran beside the soaked server just now)
  // is the machine's, one it does not share is the server's.
  const thirds = `the last third ran ${round(throughputRatio * 100, 1)}% of the first's turns, each costing ${round(cpuRatio, 3)}× the CPU`
  const unshared = comparison.throughputRatio < 0.9 || comparison.cpuRatio > 1.1
  if (throughputRatio < 0.9 && unshared)
    violations.push(`${thirds}, and the soaked server runs slower than the reference`)
  else if (throughputRatio < 0.9)
    warnings.push(`${thirds}, and the reference ran as fast as the soaked server: the host`)
  else if (cpuRatio > 1.15) warnings.push(`a turn cost ${more(cpuRatio)} more CPU in the last third than in the first`)
  if (heapGrowth > 0.1)
    violations.push(
      `heap after GC grew ${round(heapGrowth * 100, 1)}% over the second half (${round(heapMidMb, 1)} → ${round(heapEndMb, 1)} MB)`,
    )
  if (errors.length > 0) violations.push(`${errors.length} requests failed`)
  if (measured.length === 0) violations.push('no turn completed')
  return {
    seconds: options.seconds,
    clients: options.clients,
    heapMb: options.heapMb,
    turns: measured.length,
    warmupS: options.warmupS,
    sessions: run.sessions,
    errors: errors.length,
    firstErrors: errors.slice(0, 5).map((e) => e.message),
    turnsPerSec: round(measured.length / options.seconds, 1),
    comparison,
    firstThirdTurnsPerSec: round(firstThirdTurnsPerSec, 1),
    lastThirdTurnsPerSec: round(lastThirdTurnsPerSec, 1),
    throughputRatio: round(throughputRatio, 3),
    firstThirdCpuMsPerTurn: round(firstThirdCpuMsPerTurn),
    lastThirdCpuMsPerTurn: round(lastThirdCpuMsPerTurn),
    cpuRatio: round(cpuRatio, 3),
    latency: {
      p50Ms: round(percentile(all, 50)),
      p90Ms: round(percentile(all, 90)),
      p99Ms: round(percentile(all, 99)),
      maxMs: round(Math.max(0, ...all)),
    },
    heapMidMb: round(heapMidMb, 1),
    heapEndMb: round(heapEndMb, 1),
    heapGrowth: round(heapGrowth, 3),
    rssStartMb: intervals[0]?.rssMb ?? 0,
    rssEndMb: intervals.at(-1)?.rssMb ?? 0,
    intervals,
    violations,
    warnings,
  }
}

/**
 * --clients clients on one server, each creating a session and running
 * --turns turns in it, again and again, until stopped; every turn it
 * completed, with when and how long.
 */
class Load {
  readonly turns: { at: number; ms: number }[] = []
  private stopped = false
  private readonly running: Promise<void>[]

  constructor(
    private readonly server: Server,
    private readonly options: SoakOptions,
    private readonly errors: { at: number; message: string }[],
  ) {
    this.running = Array.from({ length: options.clients }, (_, c) => this.client(c))
  }

  async stop(): Promise<void> {
    this.stopped = true
    await Promise.all(this.running)
  }

  private async client(c: number): Promise<void> {
    const { server, errors } = this
    while (!this.stopped) {
      let id: string
      try {
        id = (await server.api<{ session: { id: string } }>('POST', '/sessions', { title: `soak ${c}` })).session.id
        server.sessions++
      } catch (err) {
        errors.push({ at: Date.now(), message: String(err) })
        await sleep(200)
        continue
      }
      for (let k = 0; k < this.options.turnsPerSession && !this.stopped; k++) {
        const t0 = performance.now()
        try {
          const answer = await server.api<{ outcome?: string; text?: string; error?: unknown }>(
            'POST',
            `/sessions/${id}/inputs?wait=true`,
            { inputId: `in_${c}_${k}`, parts: [{ type: 'text', text: `turn ${k}: what do the notes say?` }] },
          )
          if (answer.outcome !== 'idle' || answer.text !== ANSWER)
            throw new Error(`turn ${k} of ${id} ended ${answer.outcome}: ${JSON.stringify(answer.error)}`)
          this.turns.push({ at: Date.now(), ms: performance.now() - t0 })
        } catch (err) {
          errors.push({ at: Date.now(), message: String(err) })
          break
        }
      }
    }
  }
}

interface Server {
  readonly url: string
  readonly inspectorUrl: string
  /** sessions the soak has created on it */
  sessions: number
  api<T>(method: string, path: string, body?: unknown): Promise<T>
  rss(): number
  /** CPU time the server process has used, ms */
  cpuMs(): number
  stop(): Promise<void>
}

/**
 * The server as `npm start` runs it (its node flags), in a directory of its
 * own (data/, and work/ with the notes its sessions read), with the heap
 * capped and the inspector on loopback.
 */
async function startServer(o: { root: string; script: string; heapMb: number }): Promise<Server> {
  const data = join(o.root, 'data')
  const work = join(o.root, 'work')
  mkdirSync(data, { recursive: true })
  mkdirSync(work, { recursive: true })
  writeFileSync(join(work, 'notes.md'), `# Notes\n\n${ANSWER}\n`.repeat(4))
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }
  const flags = pkg.scripts.start.split(/\s+/).filter((w) => w.startsWith('--'))
  const child: ChildProcess = spawn(
    process.execPath,
    [
      ...flags,
      ...(o.heapMb > 0 ? [`--max-old-space-size=${o.heapMb}`] : []),
      // CHRONICLE_BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the server.
      ...(process.env.CHRONICLE_BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean),
      '--inspect=127.0.0.1:0',
      join(ROOT, 'bin', 'chronicle.mjs'),
      'serve',
    ],
    {
      cwd: work,
      env: {
        ...process.env,
        CHRONICLE_DATA_DIR: data,
        CHRONICLE_PORT: '0',
        CHRONICLE_MODEL: `scripted:${o.script}`,
        CHRONICLE_LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  let out = ''
  let err = ''
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  const found = await new Promise<{ url: string; inspectorUrl: string }>((resolve, reject) => {
    let url: string | undefined
    let inspectorUrl: string | undefined
    const check = () => {
      if (url && inspectorUrl) resolve({ url, inspectorUrl })
    }
    child.stdout?.on('data', (d: Buffer) => {
      out += String(d)
      url ??= /listening on (http:\/\/\S+)/.exec(out)?.[1]
      check()
    })
    child.stderr?.on('data', (d: Buffer) => {
      err = (err + String(d)).slice(-20_000)
      inspectorUrl ??= /Debugger listening on (ws:\/\/\S+)/.exec(err)?.[1]
      check()
    })
    void exited.then((code) => reject(new Error(`server exited (${code}) before listening\n${err}`)))
  })
  const token = readFileSync(join(data, 'token'), 'utf8').trim()
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
  return {
    ...found,
    sessions: 0,
    async api<T>(method: string, path: string, body?: unknown): Promise<T> {
      const res = await fetch(found.url + path, {
        method,
        headers,
        ...(body !== undefined && { body: JSON.stringify(body) }),
      })
      const text = await res.text()
      if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`)
      return JSON.parse(text) as T
    },
    rss() {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))
      return m ? Number(m[1]) * 1024 : 0
    },
    cpuMs() {
      // /proc/<pid>/stat: fields 14 and 15 are utime and stime in clock ticks (100 a second on Linux)
      const fields = readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? []
      return (Number(fields[11]) + Number(fields[12])) * 10
    },
    async stop() {
      child.kill('SIGTERM')
      const code = await exited
      if (code !== 0 && code !== null) throw new Error(`server exited ${code}\n${err}`)
    },
  }
}

/** The soak runs dist/: say so when src/ changed after the last build. */
function warnIfStale(log: (line: string) => void): void {
  const built = (() => {
    try {
      return statSync(join(ROOT, 'dist', 'cli.js')).mtimeMs
    } catch {
      return 0
    }
  })()
  const newest = (dir: string): number =>
    Math.max(
      0,
      ...readdirSync(dir, { withFileTypes: true }).map((e) =>
        e.isDirectory() ? newest(join(dir, e.name)) : statSync(join(dir, e.name)).mtimeMs,
      ),
    )
  if (newest(join(ROOT, 'src')) > built) log('soak: WARNING src/ is newer than dist/: run `npm run build` first')
}

function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return 0
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number
}
const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  const m = Math.floor(s.length / 2)
  return s.length === 0 ? 0 : s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2
}
const mean = (xs: readonly number[]) => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length)
const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

function arg(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`)
  const v = i >= 0 ? Number(args[i + 1]) : fallback
  if (!Number.isFinite(v) || v < 0) throw new Error(`--${name} must be a non-negative number`)
  return v
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const args = process.argv.slice(2)
  const i = args.indexOf('--snapshots')
  const result = await runSoak({
    seconds: arg(args, 'seconds', 600),
    clients: arg(args, 'clients', 12),
    heapMb: arg(args, 'heap', 192),
    intervalS: arg(args, 'interval', 15),
    warmupS: arg(args, 'warmup', 60),
    turnsPerSession: arg(args, 'turns', 10),
    ...(i >= 0 && args[i + 1] && { snapshots: args[i + 1] as string }),
    log: (line) => console.log(line),
  })
  for (const w of result.warnings) console.log(`soak: WARNING ${w}`)
  for (const v of result.violations) console.log(`soak: VIOLATION ${v}`)
  for (const e of result.firstErrors) console.log(`soak: error ${e}`)
  const { intervals: _, ...summary } = result
  console.log(JSON.stringify(summary))
  process.exit(result.violations.length > 0 ? 1 : 0)
}
