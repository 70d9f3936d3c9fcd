import type { RunOutcome } from '../../events/catalogue.js'
import { isChronicleError } from '../../events/errors.js'
import type { EventLog } from '../../events/log.js'
import type { SessionView } from '../../projections/fold/model.js'
import { SHUTDOWN } from '../abort-reasons.js'
import { type LoopDeps, runLoop } from '../loop/loop.js'
import { sleep } from '../model/retry.js'
import { endInterrupted, type RecoveryDecision, settleInterrupted } from './recovery.js'
import { continueRun } from './resume.js'

/**
 * A run whose store went away under it (PostgreSQL lost: STORE_UNAVAILABLE) pauses rather than fails
 * (docs/RECOVERY.md "The store lost mid-run"). What it could not append was acknowledged to nobody, and a
 * commit whose answer was lost may still have made it: so, as after a restart, the run continues from what
 * the log holds once the store answers again — at least once, never from its own memory:
 *
 *   the store answers  → the session read again (its cached view dropped: commits may have gone unheard)
 *   run still open     → what was in flight settled `interrupted` (STORE_LOST_MESSAGE), one append with
 *                        the version read, and the loop goes on with the same runId — no run.resumed:
 *                        a pause is not a restart and spends none of the resume budget
 *   cancel requested   → run.finished {cancelled}, as recovery ends it
 *   no run in the log  → its run.started never committed: the input it was to deliver starts a run
 *   run finished       → its end committed before the answer was lost: nothing to do
 *
 * A shutdown while paused leaves the run open for the next start's recovery.
 */

export const STORE_LOST_MESSAGE =
  'interrupted while the event store was unavailable; it may have partially executed; its outcome is unknown'

/** How often a paused run asks whether the store is back, doubling up to the max. */
const WAIT_MS = 100
const WAIT_MAX_MS = 2_000

type Outcome = RunOutcome | 'shutdown' | 'paused'

/** Runs `start` (a run or a resumed one), then continues it through every outage until it ends. */
export async function runThroughOutages(
  deps: LoopDeps,
  sessionId: string,
  signal: AbortSignal,
  start: () => Promise<Outcome>,
): Promise<RunOutcome | 'shutdown'> {
  let outcome = await pausedOnLoss(start)
  while (outcome === 'paused') outcome = await pausedOnLoss(() => afterOutage(deps, sessionId, signal))
  return outcome
}

/** Resolves once the store answers the log's head (true), or false when the server is shutting down meanwhile. */
export async function storeBack(log: Pick<EventLog, 'head'>, stopping: AbortSignal): Promise<boolean> {
  return (await whenAvailable(() => log.head(), stopping)) !== undefined
}

/**
 * `read`, asked again (after a pause that doubles) while the store is unavailable; undefined if the server
 * shuts down meanwhile (`stopping` aborted with SHUTDOWN).
 */
export async function whenAvailable<T>(read: () => Promise<T>, stopping: AbortSignal): Promise<T | undefined> {
  for (let wait = WAIT_MS; ; wait = Math.min(wait * 2, WAIT_MAX_MS)) {
    if (stopping.reason === SHUTDOWN) return undefined
    try {
      return await read()
    } catch (err) {
      if (!isChronicleError(err, 'STORE_UNAVAILABLE')) throw err
    }
    await sleep(wait, stopping.aborted ? undefined : stopping)
  }
}

/** The paused run's next part: waits for the store, settles what the outage cut off, and goes on. */
async function afterOutage(deps: LoopDeps, sessionId: string, signal: AbortSignal): Promise<Outcome> {
  for (;;) {
    if (!(await storeBack(deps.log, signal))) return 'shutdown'
    deps.views.forget(sessionId)
    const view = await deps.readModels.view(sessionId)
    const run = view.session?.run
    const decision = decideAfterOutage(view)
    if (decision.events.length > 0) {
      try {
        await deps.log.append(sessionId, decision.events, {
          expectedVersion: view.session?.version ?? 0,
          durability: 'full',
          meta: { actor: 'recovery', ...(run && { run: run.runId }) },
        })
      } catch (err) {
        // the store lost again, or the session moved on meanwhile (a reply, a cancel): read it again
        if (isChronicleError(err, 'STORE_UNAVAILABLE') || isChronicleError(err, 'VERSION_CONFLICT')) continue
        throw err
      }
    }
    const action = decision.action
    if (action.kind === 'resumed') return continueRun(deps, sessionId, signal, action.runId)
    if (action.kind === 'cancelled' || action.kind === 'failed') return action.kind
    if (action.kind === 'deliver') return runLoop(deps, sessionId, signal)
    return view.session?.lastRun?.outcome ?? 'idle'
  }
}

/** The pure half: what a paused run's session needs appended once the store is back, and what to do next. */
export function decideAfterOutage(view: SessionView): RecoveryDecision {
  const session = view.session
  if (!session || session.imported) return { events: [], action: { kind: 'none' } }
  const run = session.run
  if (!run) {
    const work = session.inbox.length > 0 || session.compaction?.status === 'requested'
    return { events: [], action: { kind: work && !session.archived ? 'deliver' : 'none' } }
  }
  if (run.cancelRequested) return endInterrupted(view, run.runId, 'cancelled', STORE_LOST_MESSAGE)
  return {
    events: settleInterrupted(view, STORE_LOST_MESSAGE),
    action: { kind: 'resumed', runId: run.runId, attempt: run.attempt },
  }
}

/** A STORE_UNAVAILABLE thrown out of a run (a read before the loop's own handling) is a pause too. */
async function pausedOnLoss(run: () => Promise<Outcome>): Promise<Outcome> {
  try {
    return await run()
  } catch (err) {
    if (isChronicleError(err, 'STORE_UNAVAILABLE')) return 'paused'
    throw err
  }
}
