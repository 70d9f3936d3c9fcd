import type { ChronicleEvent } from '../../events/catalogue.js'
import { settleInFlight, type SettleReason } from '../../commands/settle.js'
import type { SessionView } from '../../projections/fold/model.js'
import type { StorePorts } from '../../projections/store-ports.js'
import { isChronicleError } from '../../events/errors.js'

/**
 * Crash recovery on start (docs/RECOVERY.md): at-least-once
 * continuation of the runs a restart cut off. `run.started` without
 * `run.finished` is the durable marker; the sessions read model holds it as
 * `Session.run`, so finding unfinished runs is one scan of the sessions table,
 * never of the log.
 *
 * For each unfinished run, one append (decided purely from the session's view):
 * open text/reasoning ended, pending/running tool calls `tool.failed
 * {interrupted}` (never re-executed), a running compaction failed (one only
 * requested stays requested: the resumed run performs it),
 * open assistant messages closed with the same error, then
 *   - user asked to cancel      → `run.finished {cancelled}` (never resumed);
 *   - a sub-agent's child run is resumed like any other (its parent's task call was interrupted; the
 *     parent learns the child's outcome from src/runtime/subagents/orphans.ts when the child finishes);
 *   - attempts > resume budget  → `run.finished {failed}`;
 *   - otherwise                 → `run.resumed {runId, attempt}`, and the caller continues the loop.
 *
 * A call parked on a permission request is the one exception to "fail every
 * open call": it had not passed its permission check, so it did not run. Its
 * request stays pending (re-offered to clients) and the resumed run settles
 * the call by the user's answer (src/runtime/recovery/resume.ts). When the run is
 * not resumed, its pending requests are closed and the call failed. A request
 * raised here for a sub-agent (`from`) is closed too: the child's call that
 * asked was interrupted with its own run.
 *
 * An imported session (Session.imported) is skipped: nothing is appended to
 * it and nothing of it is resumed or woken, whatever run or input its file
 * left open (src/commands/read-only.ts).
 *
 * Sessions with no run but undelivered input (a crash between `input.accepted`
 * and `run.started`), or whose run recovery ended `failed`, are woken — unless
 * the run was cancelled: input a cancel parked waits for the next wake, as it
 * would have without the crash.
 */

export const INTERRUPTED_MESSAGE =
  'interrupted by a server restart; it may have partially executed; its outcome is unknown'
export const DEFAULT_RESUME_BUDGET = 3
export const SUBAGENT_ASK_INTERRUPTED = 'closed by a server restart: the sub-agent call that asked was interrupted'

const keepPermissions = (message: string): SettleReason => ({
  kind: 'interrupted',
  message,
  rejectPermissions: false,
  finishRun: false,
})
const closeAll = (message: string): SettleReason => ({
  kind: 'interrupted',
  message,
  rejectPermissions: true,
  finishRun: false,
})

export type RecoveryAction =
  | { readonly kind: 'none' }
  | { readonly kind: 'deliver' }
  | { readonly kind: 'resumed'; readonly runId: string; readonly attempt: number }
  | { readonly kind: 'cancelled' | 'failed'; readonly runId: string }

export interface RecoveryDecision {
  readonly events: ChronicleEvent[]
  readonly action: RecoveryAction
}

/** The pure half: what recovery appends for one session, and what to do next. */
export function decideRecovery(view: SessionView, budget: number = DEFAULT_RESUME_BUDGET): RecoveryDecision {
  // An imported session is never run: whatever its history left open stays as the file had it.
  if (view.session?.imported) return { events: [], action: { kind: 'none' } }
  const session = view.session
  if (!session) return { events: [], action: { kind: 'none' } }
  const run = session.run
  if (!run) {
    // a requested (not started) compaction is pending work too: a run performs it
    const work = session.inbox.length > 0 || session.compaction?.status === 'requested'
    const deliver = work && session.lastRun?.outcome !== 'cancelled' && !session.archived
    return { events: [], action: { kind: deliver ? 'deliver' : 'none' } }
  }
  const { runId } = run
  if (run.cancelRequested) return endInterrupted(view, runId, 'cancelled', INTERRUPTED_MESSAGE)
  const attempt = run.attempt + 1
  if (attempt > budget) {
    return endInterrupted(view, runId, 'failed', INTERRUPTED_MESSAGE, {
      kind: 'RESUME_BUDGET_EXHAUSTED',
      message: `interrupted by ${attempt} server restarts; not resumed again (resume budget ${budget})`,
    })
  }
  return {
    events: [...settleInterrupted(view, INTERRUPTED_MESSAGE), { type: 'run.resumed', data: { runId, attempt } }],
    action: { kind: 'resumed', runId, attempt },
  }
}

/**
 * An unfinished run's end: everything in flight settled `interrupted` (`message` says by what), its permission
 * requests closed, then `run.finished` — cancelled (the user asked; never resumed) or failed (`error`).
 */
export function endInterrupted(
  view: SessionView,
  runId: string,
  outcome: 'cancelled' | 'failed',
  message: string,
  error: { kind: string; message: string } = { kind: 'interrupted', message: `cancelled by the user; ${message}` },
): RecoveryDecision {
  return {
    events: [...settleInFlight(view, closeAll(message)), { type: 'run.finished', data: { runId, outcome, error } }],
    action: { kind: outcome, runId },
  }
}

/**
 * What an interrupted run that goes on leaves settled (`message` says by what): open parts ended, open calls
 * failed `interrupted` — except those parked on a permission request the user may still answer — the open
 * assistant message closed, a running compaction failed (one only requested stays: the run performs it), and
 * requests raised for a sub-agent's call closed (that call was interrupted with the child's run).
 */
export function settleInterrupted(view: SessionView, message: string): ChronicleEvent[] {
  const session = view.session
  if (!session) return []
  const own = session.pendingPermissions.filter((p) => !p.from)
  const parked = new Set(own.flatMap((p) => (p.partId ? [p.partId] : [])))
  const childAsks = session.pendingPermissions
    .filter((p) => p.from)
    .map(
      (p): ChronicleEvent => ({
        type: 'permission.replied',
        data: { requestId: p.requestId, reply: 'reject', message: SUBAGENT_ASK_INTERRUPTED },
      }),
    )
  // Kept for the resumed run: calls parked on a re-offered request, and a compaction requested but not started.
  const requested = session.compaction?.status === 'requested'
  const settle = settleInFlight(view, keepPermissions(message)).filter(
    (e) => !(e.type === 'tool.failed' && parked.has(e.data.partId)) && !(e.type === 'compaction.failed' && requested),
  )
  return [...settle, ...childAsks]
}

export interface RecoveryReport {
  readonly resumed: { readonly sessionId: string; readonly runId: string; readonly attempt: number }[]
  readonly cancelled: string[]
  readonly failed: string[]
  /** sessions with undelivered input and no run: to wake */
  readonly deliver: string[]
  readonly ms: number
}

export const EMPTY_REPORT: RecoveryReport = { resumed: [], cancelled: [], failed: [], deliver: [], ms: 0 }

/** Two recoveries' reports as one (a cluster node's claims while it starts). */
export function mergeReports(a: RecoveryReport, b: RecoveryReport): RecoveryReport {
  return {
    resumed: [...a.resumed, ...b.resumed],
    cancelled: [...a.cancelled, ...b.cancelled],
    failed: [...a.failed, ...b.failed],
    deliver: [...a.deliver, ...b.deliver],
    ms: a.ms + b.ms,
  }
}

/**
 * Settles every unfinished run (before the server listens) and
 * reports what to continue. Each session's events commit in one transaction
 * with expectedVersion; the last commit is FULL, which hardens the others.
 */
export async function recoverSessions(
  ports: Pick<StorePorts, 'log' | 'readModels'>,
  options: {
    readonly budget?: number
    /** only these sessions (on a cluster: those just claimed, docs/CLUSTER.md); default every one */
    readonly among?: ReadonlySet<string>
  } = {},
): Promise<RecoveryReport> {
  const started = performance.now()
  const budget = options.budget ?? DEFAULT_RESUME_BUDGET
  const report: RecoveryReport = { resumed: [], cancelled: [], failed: [], deliver: [], ms: 0 }
  const plans: { readonly sessionId: string; version: number; waiting: boolean; decision: RecoveryDecision }[] = []
  // sessions whose read model says a run is open or input waits: no log scan
  for (const sessionId of await ports.readModels.sessionsWithOpenWork()) {
    if (options.among && !options.among.has(sessionId)) continue
    const view = await ports.readModels.view(sessionId)
    if (!view.session) continue
    const waiting = view.session.inbox.length > 0 && !view.session.archived
    plans.push({ sessionId, version: view.session.version, waiting, decision: decideRecovery(view, budget) })
  }
  const writes = plans.filter((p) => p.decision.events.length > 0)
  for (const [i, plan] of writes.entries()) {
    const durability = i === writes.length - 1 ? 'full' : 'normal'
    for (let attempt = 1; ; attempt++) {
      const { sessionId, version, decision } = plan
      const runId = 'runId' in decision.action ? decision.action.runId : undefined
      try {
        await ports.log.append(sessionId, decision.events, {
          expectedVersion: version,
          durability,
          meta: { actor: 'recovery', ...(runId && { run: runId }) },
        })
        break
      } catch (err) {
        // A cluster node recovers what it claims while it serves: a command may have appended since the read.
        if (!isChronicleError(err, 'VERSION_CONFLICT') || attempt >= 3) throw err
        const view = await ports.readModels.view(sessionId)
        plan.version = view.session?.version ?? 0
        plan.decision = decideRecovery(view, budget)
        if (plan.decision.events.length === 0) break
      }
    }
  }
  for (const { sessionId, waiting, decision } of plans) {
    const a = decision.action
    if (a.kind === 'resumed') report.resumed.push({ sessionId, runId: a.runId, attempt: a.attempt })
    else if (a.kind === 'cancelled') report.cancelled.push(sessionId)
    else if (a.kind === 'failed') report.failed.push(sessionId)
    // Input that waited behind a run recovery ended `failed` starts the next run, as it would have.
    if (a.kind === 'failed' && waiting) report.deliver.push(sessionId)
    else if (a.kind === 'deliver') report.deliver.push(sessionId)
  }
  return { ...report, ms: Math.round(performance.now() - started) }
}

/** The resume budget: CHRONICLE_RESUME_BUDGET when set (a non-negative integer), else 3. */
export function resumeBudgetFrom(env: NodeJS.ProcessEnv): number {
  const raw = env['CHRONICLE_RESUME_BUDGET']
  if (raw === undefined || raw === '') return DEFAULT_RESUME_BUDGET
  const n = Number(raw)
  return Number.isInteger(n) && n >= 0 ? n : DEFAULT_RESUME_BUDGET
}

/**
 * Continues what recovery reported. Every resumed run is the runtime's when this returns — call it before the
 * server takes commands: a cancel that comes first aborts the run, and input that comes first joins it, where
 * a run not yet held would let the cancel go unheard (the run ended `idle`) or the input start a second run
 * over the open one, which then never ended (docs/RECOVERY.md). The runs start once `ready` resolves true (the
 * server listens), one session per event-loop turn, so that a server that resumes a hundred runs still answers
 * its first requests at once; then the sessions with undelivered input are woken.
 */
export function continueRecovered(
  report: RecoveryReport,
  runtime: { resume(sessionId: string, runId: string, start: Promise<boolean>): void; wake(sessionId: string): void },
  ready: Promise<boolean> = Promise.resolve(true),
): Promise<void> {
  const turn = (go: boolean) => new Promise<boolean>((resolve) => setImmediate(resolve, go))
  let start = ready
  for (const r of report.resumed) {
    start = start.then(turn)
    runtime.resume(r.sessionId, r.runId, start)
  }
  return start.then(async (go) => {
    if (!go) return
    for (const sessionId of report.deliver) {
      await turn(go)
      runtime.wake(sessionId)
    }
  })
}
