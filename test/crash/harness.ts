import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type PostgresServer, startPostgres } from '../support/postgres.js'
import { auditDataDir, checkStore, checkWorkspaces, type Acked, type CheckedStore, type CheckResult } from './checks.js'
import { Rng } from './rng.js'
import { startServer } from './server-process.js'
import { CrashClient, type WireEvent } from './ws-client.js'

/**
 * The kill -9 fault-injection harness (issue #6, SECURITY.md R-A/R-D/R-F).
 *
 *   npm run test:crash -- --iterations 500 --seed 7
 *
 * Each iteration starts the real server process (scripted model: long
 * streams, a slow bash job that appends to a marker file, a bash call that
 * needs permission), reconnects a real WebSocket client from its cursor,
 * submits inputs with ids (recording every acknowledgement), resends some,
 * cancels some runs, answers permission requests (re-offered ones included),
 * and SIGKILLs the server at a seeded point: right after an input is
 * acknowledged, mid-stream, mid-tool, during a permission wait, during a
 * compaction, or at a random instant. After the last iteration it restarts once more, lets every
 * session settle, shuts down cleanly and checks the data directory
 * (test/crash/checks.ts). The last line printed is the summary; the exit code
 * is non-zero on any violation.
 *
 *   npm run test:crash -- --store postgres --iterations 50
 *
 * runs the server on PostgreSQL: a throwaway server started as the tests start
 * theirs (test/support/postgres.ts), unless CHRONICLE_DATABASE_URL names one.
 * On the throwaway server, every fifth iteration (the third, the eighth, …) also
 * kills PostgreSQL itself under the running server (`pg_ctl stop -m immediate`)
 * at a seeded instant and starts it again after a seeded pause: clients are told
 * STORE_UNAVAILABLE meanwhile, runs pause, and the server is killed only once
 * the database has been back a while (docs/RECOVERY.md "The store lost mid-run").
 */

export interface CrashOptions {
  readonly iterations: number
  readonly seed: number
  readonly sessions?: number
  /** progress lines (default: none) */
  readonly log?: (line: string) => void
  /** keep the temp directory (its path is logged) */
  readonly keep?: boolean
  /** where the server keeps its log: SQLite in the data dir (default), or PostgreSQL */
  readonly store?: 'sqlite' | 'postgres'
}

export interface CrashResult extends CheckResult {
  readonly iterations: number
  readonly kills: number
  readonly acked: number
  readonly reoffered: number
  readonly reofferedAnswered: number
  readonly killPoints: Record<string, number>
  /** session directories that differ from the tree the log records last (or a workspace task left open) */
  readonly workspaceMismatches: number
  /** model steps whose request, rebuilt from the log by `chronicle audit --all`, has another digest */
  readonly auditMismatches: number
  /** model steps that audit verified */
  readonly auditedSteps: number
  /** reverts, unreverts and fork materializations started */
  readonly workspaceTasks: number
  /** of those, the ones a kill cut off and a restart finished */
  readonly workspaceTasksRecovered: number
  /** times PostgreSQL itself was killed and started again under the running server (--store postgres) */
  readonly storeRestarts: number
  /** client requests answered STORE_UNAVAILABLE while it was down (nothing acknowledged for them) */
  readonly storeUnavailable: number
}

const TOKEN = 'crash-harness-token-0123456789abcdef'
const SCRIPT = fileURLToPath(new URL('./fixtures/script.json', import.meta.url))
const SCENARIOS = ['#story', '#work', '#work', '#permit'] as const
const KILL_POINTS = [
  'after-accept',
  'mid-stream',
  'mid-tool',
  'permission-wait',
  'compaction',
  'revert',
  'fork-files',
  'random-instant',
] as const
type KillPoint = (typeof KILL_POINTS)[number]

export async function runCrash(options: CrashOptions): Promise<CrashResult> {
  const log = options.log ?? (() => {})
  const rng = new Rng(options.seed) // the workload's choices
  const plan = new Rng(options.seed ^ 0x5bd1e995) // where each iteration is killed: independent of timing
  const root = mkdtempSync(join(tmpdir(), 'chronicle-crash-'))
  const dataDir = join(root, 'data')
  const requestLog = join(root, 'requests.jsonl')
  mkdirSync(dataDir, { recursive: true })
  // PostgreSQL: the one CHRONICLE_DATABASE_URL names, or a throwaway server (which this harness may restart)
  const given = options.store === 'postgres' ? process.env.CHRONICLE_DATABASE_URL : undefined
  const postgres: PostgresServer | undefined =
    options.store === 'postgres' && !given ? await startPostgres() : undefined
  const databaseUrl = given ?? (await postgres?.database())
  // bash is allowed except `touch ask…`, which asks: that is where permission waits come from.
  writeFileSync(
    join(dataDir, 'chronicle.json'),
    JSON.stringify({
      permission: [
        { permission: 'bash', pattern: '*', action: 'allow' },
        { permission: 'bash', pattern: 'touch ask*', action: 'ask' },
      ],
    }),
  )
  const env = {
    CHRONICLE_DATA_DIR: dataDir,
    CHRONICLE_PORT: '0',
    CHRONICLE_HOST: '127.0.0.1',
    CHRONICLE_TOKEN: TOKEN,
    CHRONICLE_MODEL: `scripted:${SCRIPT}`,
    CHRONICLE_SCRIPT_LOG: requestLog,
    CHRONICLE_LOG_LEVEL: 'warn',
    ...(databaseUrl && { CHRONICLE_DATABASE_URL: databaseUrl }),
  }
  log(`crash: data in ${root}`)

  const sessions: { id: string; dir: string }[] = []
  const acked: Acked[] = []
  const sentParts = new Map<string, { sessionId: string; parts: unknown[]; delivery: string }>()
  const pending = new Map<string, { sessionId: string; requestId: string }>() // open permission requests, from events
  const running = new Set<string>() // sessions with an open run, from events
  const violations: string[] = []
  const killPoints: Record<string, number> = {}
  let cursor = 0
  let gaps = 0
  let duplicates = 0
  let kills = 0
  let reoffered = 0
  let reofferedAnswered = 0
  let inputCounter = 0
  let storeRestarts = 0
  const unavailable = { count: 0 }

  const track = (e: WireEvent) => {
    if (e.event.type === 'run.started' || e.event.type === 'run.resumed') running.add(e.session)
    else if (e.event.type === 'run.finished') running.delete(e.session)
    else if (e.event.type === 'permission.requested') {
      const requestId = String(e.event.data['requestId'])
      pending.set(requestId, { sessionId: e.session, requestId })
    } else if (e.event.type === 'permission.replied') pending.delete(String(e.event.data['requestId']))
  }

  /** Answers a permission request; a request that is still open must be answerable. */
  const answer = async (
    client: CrashClient,
    req: { sessionId: string; requestId: string },
    reply: string,
    strict: boolean,
  ) => {
    const r = await client.call('permission.reply', { session: req.sessionId, requestId: req.requestId, reply })
    if (!r) return false // the connection died: not answered
    if (r.error) {
      if (r.error.code === 'STORE_UNAVAILABLE') {
        unavailable.count++
        return false // not answered: it stays open and is offered again
      }
      // Already closed by another reply (a reject closes every request of the session) or a cancel: fine.
      if (strict && pending.has(req.requestId))
        violations.push(`re-offered ${req.requestId} could not be answered: ${r.error.code}`)
      return false
    }
    return true
  }

  try {
    for (let iteration = 0; iteration < options.iterations; iteration++) {
      const server = await startServer(env)
      const point: KillPoint = plan.pick(KILL_POINTS)
      killPoints[point] = (killPoints[point] ?? 0) + 1
      let killed = false
      const kill = () => {
        if (killed) return
        killed = true
        server.child.kill('SIGKILL')
      }
      const streamAfter = plan.int(1, 40)
      const toolDelay = plan.int(0, 300)
      const waitDelay = plan.int(0, 150)
      const fallbackMs = point === 'random-instant' ? plan.int(50, 1000) : plan.int(700, 1600)
      let deltas = 0
      const onEvent = (e: WireEvent) => {
        track(e)
        if (killed) return
        const t = e.event.type
        if (point === 'mid-stream' && (t === 'text.delta' || t === 'reasoning.delta') && ++deltas >= streamAfter) kill()
        if (point === 'mid-tool' && t === 'tool.called') setTimeout(kill, toolDelay)
        if (point === 'permission-wait' && t === 'permission.requested') setTimeout(kill, waitDelay)
        if (point === 'compaction' && t === 'compaction.started') setTimeout(kill, waitDelay)
        // the restore or checkout runs right after its start is recorded: a kill within a few ms lands inside it
        if (point === 'revert' && t === 'workspace.restore.started') setTimeout(kill, plan.int(0, 15))
        if (point === 'fork-files' && t === 'workspace.materialize.started') setTimeout(kill, plan.int(0, 15))
      }
      const client = await CrashClient.connect(server.url, TOKEN, cursor, onEvent)
      await client.subscribeAll()
      // Requests still open after the restart are re-offered: each must be answerable.
      // Usually answered at once; sometimes late, so that a kill can also land while a request is re-offered.
      const reoffers = [...pending.values()]
      reoffered += reoffers.length
      const answerNow = rng.chance(0.7)
      const answered = new Set(reoffers.map((r) => r.requestId)) // answered here, not again by the workload
      for (const req of reoffers) {
        const reply = rng.pick(['once', 'once', 'always', 'reject'])
        const send = () => answer(client, req, reply, true).then((ok) => void (ok && reofferedAnswered++))
        if (answerNow) await send()
        else setTimeout(() => void (killed || send()), rng.int(0, 400))
      }
      // PostgreSQL killed under the running server, then started again; the server is killed only once it has
      // been back a while (its paused runs go on meanwhile) — or earlier, at this iteration's kill point.
      const storeDown =
        postgres && iteration % 5 === 2
          ? { at: plan.int(50, 700), for: plan.int(100, 1200), after: plan.int(600, 1500) }
          : undefined
      let fallback: NodeJS.Timeout | undefined
      const storeRestarted = storeDown
        ? new Promise<void>((resolve, reject) => {
            setTimeout(() => {
              void (async () => {
                await (postgres as PostgresServer).crash()
                await new Promise((r) => setTimeout(r, storeDown.for))
                await (postgres as PostgresServer).restart()
                storeRestarts++
                fallback = setTimeout(kill, storeDown.after)
              })().then(resolve, reject)
            }, storeDown.at)
          })
        : undefined
      if (!storeDown) fallback = setTimeout(kill, fallbackMs)
      if (point === 'compaction' && sessions.length > 0) {
        await client.call('session.compact', { session: plan.pick(sessions).id }) // the kill lands once it has started
      }

      await drive(client, () => killed, {
        rng,
        sessions,
        root,
        acked,
        sentParts,
        pending,
        running,
        violations,
        answered,
        nextInput: () => `in_${options.seed}_${++inputCounter}`,
        onAck: () => {
          if (point === 'after-accept') kill()
        },
        workspaceFirst: point === 'revert' ? 'revert' : point === 'fork-files' ? 'fork' : undefined,
        answer,
        unavailable,
      })
      await storeRestarted // the next start needs its database
      clearTimeout(fallback)
      kill()
      await server.exited
      await client.closed
      gaps += client.gaps
      duplicates += client.duplicates
      cursor = client.cursor
      kills++
      log(
        `crash: iteration ${iteration + 1} killed at ${point}; recovered ${JSON.stringify(server.recovered)}; cursor ${cursor}`,
      )
    }

    // Last start: recovery, then let every session settle, answering what asks; then a clean shutdown.
    const server = await startServer(env)
    const client = await CrashClient.connect(server.url, TOKEN, cursor, track)
    await client.subscribeAll()
    await settleAll(client, pending, answer, violations, (line) =>
      log(`${line}; the workload knows ${sessions.length}`),
    )
    await server.kill('SIGTERM')
    await client.closed
    gaps += client.gaps
    duplicates += client.duplicates
    log(`crash: final start recovered ${JSON.stringify(server.recovered)}; cursor ${client.cursor}`)
  } catch (err) {
    await postgres?.stop()
    throw err
  } finally {
    if (!options.keep) process.on('exit', () => rmSync(root, { recursive: true, force: true }))
  }

  const store: CheckedStore = databaseUrl ? { url: databaseUrl } : { dbPath: join(dataDir, 'chronicle.db') }
  let checks: CheckResult
  let workspaces: Awaited<ReturnType<typeof checkWorkspaces>>
  let audited: Awaited<ReturnType<typeof auditDataDir>>
  try {
    checks = await checkStore({ store, requestLog, acked, sessions })
    workspaces = await checkWorkspaces(store, sessions, join(root, 'check-store'))
    audited = await auditDataDir(dataDir, databaseUrl)
  } finally {
    await postgres?.stop()
  }
  if (gaps > 0) violations.push(`clients saw ${gaps} gaps in seq across reconnects`)
  if (duplicates > 0) violations.push(`clients saw ${duplicates} duplicate events across reconnects`)
  const result: CrashResult = {
    ...checks,
    gaps: checks.gaps + gaps + duplicates,
    violations: [...violations, ...checks.violations, ...workspaces.violations, ...audited.violations],
    auditMismatches: audited.auditMismatches,
    auditedSteps: audited.auditedSteps,
    workspaceMismatches: workspaces.workspaceMismatches,
    workspaceTasks: workspaces.workspaceTasks,
    workspaceTasksRecovered: workspaces.workspaceTasksRecovered,
    iterations: options.iterations,
    kills,
    acked: acked.length,
    reoffered,
    reofferedAnswered,
    killPoints,
    storeRestarts,
    storeUnavailable: unavailable.count,
  }
  if (!options.keep) rmSync(root, { recursive: true, force: true })
  return result
}

interface DriveContext {
  readonly rng: Rng
  readonly sessions: { id: string; dir: string }[]
  readonly root: string
  readonly acked: Acked[]
  readonly sentParts: Map<string, { sessionId: string; parts: unknown[]; delivery: string }>
  readonly pending: Map<string, { sessionId: string; requestId: string }>
  readonly running: ReadonlySet<string>
  readonly violations: string[]
  /** requests already being answered */
  readonly answered: Set<string>
  nextInput(): string
  onAck(): void
  /** this iteration's kill point is a revert or a fork with files: do one as soon as a session can take it */
  readonly workspaceFirst?: 'revert' | 'fork'
  /** requests the server answered STORE_UNAVAILABLE (PostgreSQL down): counted, not violations */
  readonly unavailable: { count: number }
  answer(
    client: CrashClient,
    req: { sessionId: string; requestId: string },
    reply: string,
    strict: boolean,
  ): Promise<boolean>
}

/** The client's workload until the server is killed: create, submit, resend, cancel, reply. */
async function drive(client: CrashClient, killed: () => boolean, c: DriveContext): Promise<void> {
  const { rng, answered } = c
  let workspaceFirst = c.workspaceFirst
  while (!killed()) {
    if (c.sessions.length < 3 || (c.sessions.length < 6 && rng.chance(0.03))) {
      const dir = join(c.root, 'work', `s${c.sessions.length}`)
      mkdirSync(dir, { recursive: true })
      const r = await client.call('session.create', { directory: dir, title: `crash ${c.sessions.length}` })
      if (!r) break
      if (r.error?.code === 'STORE_UNAVAILABLE') {
        c.unavailable.count++
        await new Promise((resolve) => setTimeout(resolve, 50))
        continue
      }
      const session = r.result?.['session'] as { id: string } | undefined
      if (!session) throw new Error(`session.create failed: ${JSON.stringify(r.error)}`)
      c.sessions.push({ id: session.id, dir })
      continue
    }
    for (const req of c.pending.values()) {
      if (answered.has(req.requestId)) continue
      answered.add(req.requestId)
      setTimeout(
        () => void c.answer(client, req, rng.pick(['once', 'once', 'once', 'always', 'reject']), false),
        rng.int(20, 500),
      )
    }
    const roll = rng.next()
    const idle = c.sessions.filter((s) => !c.running.has(s.id))
    const points = c.acked.filter((a) => idle.some((s) => s.id === a.sessionId))
    if ((workspaceFirst || (roll >= 0.24 && roll < 0.3)) && points.length > 0) {
      // Back to an earlier point (force: the harness's own bash jobs are not the user's edits), or a fork there with files.
      const at = rng.pick(points)
      const fork = workspaceFirst ? workspaceFirst === 'fork' : roll >= 0.28
      workspaceFirst = undefined
      if (fork && c.sessions.length < 10) {
        const r = await client.call('session.fork', { session: at.sessionId, at: at.seq })
        const child = r?.result?.['session'] as { id: string; directory: string } | undefined
        if (child) c.sessions.push({ id: child.id, dir: child.directory })
        else if (r?.error && r.error.code === 'INTERNAL') c.violations.push(`fork failed: ${r.error.message}`)
      } else {
        const r = await client.call('session.revert', { session: at.sessionId, to: at.seq, force: true })
        if (r?.error && r.error.code === 'INTERNAL') c.violations.push(`revert failed: ${r.error.message}`)
      }
    } else if (roll < 0.1 && c.acked.length > 0) {
      // An idempotent retry: same id, same content → the original acknowledgement, nothing appended.
      const prior = rng.pick(c.acked)
      const sent = c.sentParts.get(prior.inputId)
      if (sent) {
        const r = await client.call('input.submit', {
          session: sent.sessionId,
          inputId: prior.inputId,
          parts: sent.parts,
          delivery: sent.delivery,
        })
        if (r?.error?.code === 'STORE_UNAVAILABLE') c.unavailable.count++
        if (r?.result && (r.result['duplicate'] !== true || r.result['seq'] !== prior.seq)) {
          c.violations.push(`resent ${prior.inputId}: ${JSON.stringify(r.result)} (first acknowledged at ${prior.seq})`)
        }
      }
    } else if (roll < 0.16) {
      // A manual compaction: the session's run summarises (a kill point of its own).
      await client.call('session.compact', { session: rng.pick(c.sessions).id })
    } else if (roll < 0.24 && c.running.size > 0) {
      // The user stops a run: it ends cancelled and must never be resumed by a restart.
      await client.call('run.cancel', { session: rng.pick([...c.running]) })
    } else {
      const session = rng.pick(c.sessions)
      const inputId = c.nextInput()
      const parts = [{ type: 'text', text: `${rng.pick(SCENARIOS)} ${inputId}` }]
      const delivery = rng.chance(0.5) ? 'queue' : 'steer'
      c.sentParts.set(inputId, { sessionId: session.id, parts, delivery })
      const r = await client.call('input.submit', { session: session.id, inputId, parts, delivery })
      if (r?.result) {
        c.acked.push({ inputId, sessionId: session.id, seq: r.result['seq'] as number })
        c.onAck()
      } else if (r?.error?.code === 'STORE_UNAVAILABLE')
        c.unavailable.count++ // not acknowledged: nothing to hold it to
      else if (r?.error) c.violations.push(`submit ${inputId} refused: ${r.error.code} ${r.error.message}`)
    }
    await new Promise((resolve) => setTimeout(resolve, rng.int(20, 250)))
  }
}

/** Waits until every session is idle with nothing pending, answering permission requests `once`. */
async function settleAll(
  client: CrashClient,
  pending: Map<string, { sessionId: string; requestId: string }>,
  answer: DriveContext['answer'],
  violations: string[],
  log: (line: string) => void,
): Promise<void> {
  const deadline = Date.now() + 60_000
  // Idle is not settled: between a run's end and the start of the next queued input's run a session reads idle.
  // Settled is every session idle twice, half a second apart, with no event in between; otherwise the shutdown
  // below would leave that next run open for a recovery that never comes. (An inbox may stay non-empty when
  // settled: input a cancel parked waits for the next wake.)
  let quiet: { since: number; cursor: number } | undefined
  for (;;) {
    for (const req of [...pending.values()]) await answer(client, req, 'once', false)
    // Every session the log holds, not only those the workload knows: a fork whose reply a kill cut off is
    // unknown to it, yet runs the queued input it inherited.
    const all = await allSessions(client)
    let busy = 0
    for (const s of all) if (s.run !== null || s.status !== 'idle' || s.pendingPermissions.length > 0) busy++
    if (busy > 0) quiet = undefined
    else if (quiet?.cursor !== client.cursor) quiet = { since: Date.now(), cursor: client.cursor }
    else if (Date.now() - quiet.since >= 500) {
      log(`crash: ${all.length} sessions settled`)
      return
    }
    if (Date.now() > deadline) {
      violations.push(`${busy} sessions still busy 60 s after the last restart`)
      return
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

interface ListedSession {
  readonly run: unknown
  readonly status: string
  readonly pendingPermissions: readonly unknown[]
}

async function allSessions(client: CrashClient): Promise<ListedSession[]> {
  const all: ListedSession[] = []
  let cursor: string | undefined
  do {
    const r = await client.call('session.list', { limit: 500, ...(cursor && { cursor }) })
    const page = r?.result as { sessions: ListedSession[]; cursor?: string } | undefined
    if (!page) throw new Error(`session.list failed: ${JSON.stringify(r?.error)}`)
    all.push(...page.sessions)
    cursor = page.cursor
  } while (cursor)
  return all
}

export function summaryLine(r: CrashResult): string {
  return `crash: iterations=${r.iterations} kills=${r.kills} lostInputs=${r.lostInputs} duplicateInputs=${r.duplicateInputs} gaps=${r.gaps} danglingTools=${r.danglingTools} verifyFailures=${r.verifyFailures} workspaceMismatches=${r.workspaceMismatches} auditMismatches=${r.auditMismatches}`
}

function storeArg(args: string[]): 'sqlite' | 'postgres' {
  const i = args.indexOf('--store')
  const v = i >= 0 ? args[i + 1] : 'sqlite'
  if (v !== 'sqlite' && v !== 'postgres') throw new Error('--store must be sqlite or postgres')
  return v
}

function arg(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`)
  const v = i >= 0 ? Number(args[i + 1]) : fallback
  if (!Number.isInteger(v) || v < 0) throw new Error(`--${name} must be a non-negative integer`)
  return v
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const args = process.argv.slice(2)
  const iterations = arg(args, 'iterations', 50)
  const seed = arg(args, 'seed', Date.now() % 1_000_000)
  const started = Date.now()
  const store = storeArg(args)
  const result = await runCrash({ iterations, seed, log: (l) => console.log(l), keep: args.includes('--keep'), store })
  for (const v of result.violations) console.log(`crash: VIOLATION ${v}`)
  console.log(
    `crash: seed=${seed} acked=${result.acked} requests=${result.requests} resumeRequests=${result.resumeRequests} resumedRuns=${result.resumedRuns} ` +
      `interruptedTools=${result.interruptedTools} interruptedCompactions=${result.interruptedCompactions} failedAfterBudget=${result.failedAfterBudget} cancelledRuns=${result.cancelledRuns} ` +
      `reoffered=${result.reoffered} reofferedAnswered=${result.reofferedAnswered} ${store === 'postgres' ? `storeRestarts=${result.storeRestarts} storeUnavailable=${result.storeUnavailable} ` : ''}workspaceTasks=${result.workspaceTasks} workspaceTasksRecovered=${result.workspaceTasksRecovered} auditedSteps=${result.auditedSteps} killPoints=${JSON.stringify(result.killPoints)} seconds=${Math.round((Date.now() - started) / 1000)}`,
  )
  console.log(summaryLine(result))
  process.exit(result.violations.length > 0 ? 1 : 0)
}
