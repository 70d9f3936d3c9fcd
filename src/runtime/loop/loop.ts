import type { Redactor } from '../../tools/redact.js'
import type { WorkspaceSnapshots } from '../workspace/snapshots.js'
import type { ChronicleEvent, RunOutcome } from '../../events/catalogue.js'
import { isChronicleError } from '../../events/errors.js'
import { type SettleReason, settleInFlight } from '../../commands/settle.js'
import type { IdSource } from '../../events/ids.js'
import type { EventLog } from '../../events/log.js'
import type { ReadModels } from '../../projections/read-models.js'
import type { Message, SessionView } from '../../projections/fold/model.js'
import type { AgentDefinition } from '../../tools/agents.js'
import type { PermissionGate, ToolRegistry } from '../../tools/tool.js'
import type { SkillSource } from '../../tools/skills/skills.js'
import { SHUTDOWN } from '../abort-reasons.js'
import { type CompiledContext, compileView } from './context.js'
import { transcriptAnswered } from './stop-rule.js'
import { ACCEPTS_ALL, type ModelHandle, type ModelResolver } from '../model/adapter.js'
import { Recorder } from './recorder.js'
import { type RetryPolicy, sleep } from '../model/retry.js'
import type { SessionViews } from './session-views.js'
import { runModelStep } from './step.js'
import { RunCompaction } from '../compaction/compaction.js'
import type { CompactionConfig } from '../compaction/config.js'
import type { ServerInstructions, SystemEnvironment } from './system-prompt.js'
import { executeCalls } from './tool-exec.js'
import { type RejectionWatch, watchRejections } from '../permissions/rejections.js'

/**
 * The agent loop (docs/TRACES.md). One run: deliver pending input,
 * then step — re-read the session, decide stop or continue, create the
 * assistant message, compile, one model call, record, execute tools — until
 * the stop rule holds, the step budget is spent, the run is cancelled, a
 * person rejects a permission request, or something fails. Every decision
 * reads the session as the log has it.
 */

export interface LoopDeps {
  readonly log: EventLog
  readonly readModels: ReadModels
  readonly ids: IdSource
  readonly views: SessionViews
  readonly models: ModelResolver
  readonly tools: ToolRegistry
  readonly permissions: PermissionGate
  readonly agents: ReadonlyMap<string, AgentDefinition>
  readonly retry: RetryPolicy
  /** overrides every agent's step budget (tests, benchmarks) */
  readonly maxSteps?: number
  readonly environment?: () => SystemEnvironment
  /** the instructions of the connected MCP servers, for the system prompt */
  readonly serverInstructions?: () => readonly ServerInstructions[]
  /** the skills the system prompt lists (src/tools/skills/skills.ts) */
  readonly skills?: SkillSource
  /** context compaction (src/runtime/compaction/compaction.ts); without it there is none */
  readonly compaction?: CompactionConfig
  /** the server's secrets, kept out of what tools report */
  readonly redactor?: Redactor
  /** records the session directory at each step and after writing tools; without it, none is recorded */
  readonly workspace?: WorkspaceSnapshots
  /**
   * the config's `permission.continueOnReject`: a person's reject fails only its call and the run goes on;
   * by default it ends the run `rejected` once the step's calls settle (src/runtime/permissions/rejections.ts)
   */
  readonly continueOnReject?: boolean
  /** (cluster) whether this node's lease still runs: past it no tool starts (docs/CLUSTER.md); absent: always */
  readonly leased?: () => boolean
}

export { CANCELLED, SHUTDOWN } from '../abort-reasons.js'

/** How soon a run whose end a full disk refused tries again, doubling up to the max. */
const STORAGE_RETRY_MS = 500
const STORAGE_RETRY_MAX_MS = 10_000
const DISK_FULL: SettleReason = {
  kind: 'interrupted',
  message: 'the disk was full',
  rejectPermissions: false,
  finishRun: false,
}

/**
 * Runs one run to its end; resolves with its outcome ('shutdown' when stopped for a restart; 'paused' when the
 * store became unavailable under it: the run stays open, nothing more recorded, and is continued once the store
 * is back — src/runtime/recovery/outage.ts).
 * `resume` continues a run recovery settled and marked `run.resumed` (src/runtime/recovery/recovery.ts):
 * same runId, no second run.started.
 */
export async function runLoop(
  deps: LoopDeps,
  sessionId: string,
  signal: AbortSignal,
  resume?: { readonly runId: string },
): Promise<RunOutcome | 'shutdown' | 'paused'> {
  const runId = resume?.runId ?? deps.ids.next('run')
  const recorder = new Recorder(deps.log, sessionId)
  const meta = { actor: 'runtime' as const, run: runId }
  // A person's reject ends the run after its step's calls settle; read from the log, so a resumed run stops too.
  // The reads the run starts with come before run.started is queued: where the session's requests are answered,
  // and the session's view (the first pass then reads it from memory). A read that waits on the store
  // (PostgreSQL) after it would let run.started commit alone, ahead of the delivery.
  let rejections: RejectionWatch | undefined
  let readFailed: { readonly error: unknown } | undefined
  try {
    if (!deps.continueOnReject)
      rejections = await watchRejections(deps, sessionId, runId, { resumed: resume !== undefined })
    await deps.views.committed(sessionId)
  } catch (error) {
    readFailed = { error }
  }
  // Appended through the batching appender and awaited (not committed at once): under load a
  // run's own commits then share the server's batched ones, `full` ones one fsync between them.
  if (!resume) recorder.emit([{ type: 'run.started', data: { runId, reason: 'input' } }], meta)

  const finish = async (
    outcome: RunOutcome,
    error?: { kind: string; message: string },
  ): Promise<RunOutcome | 'shutdown' | 'paused'> => {
    // what the run recorded before it decided to end; the store lost under it: how it ends is decided again later
    const lost = await recorder.settle().then(
      () => false,
      (err: unknown) => isChronicleError(err, 'STORE_UNAVAILABLE'),
    )
    if (lost) return 'paused'
    // A full disk refuses the run's end too: the run waits, busy, and records it once there is room
    // (docs/BACKUP.md "A full disk"), rather than leaving the log with a run that never ended.
    for (let wait = STORAGE_RETRY_MS; ; wait = Math.min(wait * 2, STORAGE_RETRY_MAX_MS)) {
      if (signal.reason === SHUTDOWN) return 'shutdown'
      // what the refused appends left open (a streaming text, a running tool) is closed with the run
      const open =
        error?.kind === 'STORAGE_FULL' ? settleInFlight((await deps.views.committed(sessionId)).view, DISK_FULL) : []
      // A cancel committed while the run was deciding how it ends (its reads since it last looked) is its end:
      // a run whose cancel is in the log ends cancelled. Checked with the emit, in one turn: a cancel decided
      // after this sees run.finished queued, and finds no run to cancel.
      if (signal.reason === SHUTDOWN) return 'shutdown'
      const ended: RunOutcome = signal.aborted ? 'cancelled' : outcome
      recorder.emit(
        [
          ...open,
          { type: 'run.finished', data: { runId, outcome: ended, ...(ended === outcome && error && { error }) } },
        ],
        meta,
        'full',
      )
      try {
        await recorder.settle()
        return ended
      } catch (err) {
        if (isChronicleError(err, 'STORE_UNAVAILABLE')) return 'paused' // its end not recorded: the run is still open
        if (!isChronicleError(err, 'STORAGE_FULL')) throw err
        // a cancel does not end the wait (the end still has to be recorded); a shutdown does
        await sleep(wait, signal.aborted ? undefined : signal)
      }
    }
  }

  try {
    if (readFailed) throw readFailed.error // the run ends as when any read in it fails
    let step = 0
    let first = true
    let runStart: string | undefined // the first message this run creates (doom loops count within the run)
    const compaction =
      deps.compaction &&
      new RunCompaction(Object.assign({}, deps, { config: deps.compaction }), { recorder, runId, sessionId, signal })
    for (;;) {
      if (signal.aborted) return await finish('cancelled')
      if (await rejections?.check()) return await finish('rejected')
      // The first pass reads the inbox before run.started commits (which changes no inbox), so the
      // delivery commits with it: one commit, not two, at every run's start.
      if (!first) await recorder.settle()
      let { view, transcript } = await (first ? deps.views.committed(sessionId) : deps.views.state(sessionId))
      const delivered = deliver(view, first, deps.ids)
      if (delivered.length > 0) recorder.emit(delivered, meta)
      if (delivered.length > 0 || first) {
        await recorder.settle()
        if (delivered.length > 0 && !first)
          step = 0 // new user input renews the step budget
        ;({ view, transcript } = await deps.views.state(sessionId))
      }
      first = false
      if (compaction && (await compaction.pending(view))) continue // a requested (manual) compaction runs first

      if (transcriptAnswered(transcript)) {
        if (view.session?.inbox.some((i) => i.delivery === 'steer')) continue // arrived during the last step
        return await finish('idle')
      }
      const user = transcript.latest('user') as Message // answered without one
      const maxSteps = budget(deps, view, user)
      if (step >= maxSteps) return await finish('max_steps')
      const lastStep = step + 1 >= maxSteps
      let model: ModelHandle | undefined
      try {
        model = deps.models.resolve(user.model ?? view.session?.model ?? null)
      } catch (err) {
        // e.g. a session created with a model this server cannot build (UNKNOWN_MODEL)
        return await finish('error', {
          kind: isChronicleError(err) ? err.code : 'provider',
          message: err instanceof Error ? err.message : String(err),
        })
      }
      if (!model) {
        return await finish('error', {
          kind: 'NO_MODEL_CONFIGURED',
          message:
            'No model is configured: set CHRONICLE_MODEL (openai:<id>, compatible:<id> or scripted:<file>) or pass a model with the input.',
        })
      }
      const context = await compileView(view, deps, { lastStep, transcript, accepts: model.accepts ?? ACCEPTS_ALL })
      if (compaction && (await compaction.beforeStep(view, context, model))) continue // compacted: recompile
      step++
      // The workspace as the step starts (changes found here were made outside the agent), taken in the
      // background; a tool that may write waits for it, so it never sees the tool's writes.
      const directory = view.session?.directory ?? '.'
      deps.workspace?.step(sessionId, directory, meta)

      const messageId = deps.ids.next('msg')
      runStart ??= messageId
      recorder.emit(
        {
          type: 'message.created',
          data: { messageId, role: 'assistant', parentId: user.id, agent: context.agent.name, model: model.spec },
        },
        meta,
      )
      const outcome = await runModelStep({
        recorder,
        ids: deps.ids,
        runId,
        messageId,
        step,
        model,
        context,
        compiledFrom: await recordSources(deps.log, context, lastStep),
        signal,
        retry: deps.retry,
      })
      if (outcome.status === 'aborted') return await finish('cancelled')
      if (outcome.status === 'error' && outcome.failure.kind === 'context_overflow' && compaction) {
        const verdict = await compaction.overflow(step, model)
        if (!verdict.retry) return await finish('error', verdict.error)
        step-- // compacted: the same step again
        continue
      }
      if (outcome.status === 'error')
        return await finish('error', { kind: outcome.failure.kind, message: outcome.failure.message })
      if (outcome.calls.length > 0) {
        if (deps.workspace && outcome.calls.some((c) => context.toolset.get(c.tool)?.writes))
          await deps.workspace.settled(sessionId)
        await recorder.settle()
        await executeCalls(outcome.calls, {
          recorder,
          runId,
          sessionId,
          messageId,
          agent: context.agent.name,
          directory,
          toolset: context.toolset,
          permissions: deps.permissions,
          signal,
          transcript: async () => (await deps.views.committed(sessionId)).transcript,
          session: async () => (await deps.views.committed(sessionId)).view.session,
          ...(runStart && { runStartMessageId: runStart }),
          ...(deps.redactor && { redactor: deps.redactor }),
          ...(deps.workspace && { workspace: deps.workspace }),
          ...(rejections && { rejected: async () => (await rejections?.check()) !== undefined }),
          ...(deps.leased && { leased: deps.leased }),
        })
      }
    }
  } catch (err) {
    // The store lost mid-run is no failure of the run: it pauses, and continues once the store is back.
    if (isChronicleError(err, 'STORE_UNAVAILABLE')) return 'paused'
    return await finish('failed', {
      kind: isChronicleError(err) ? err.code : 'INTERNAL',
      message: err instanceof Error ? err.message : String(err),
    })
  } finally {
    rejections?.close()
  }
}

/** step.started's `context`: what the request was compiled from, its texts stored as blobs (docs/AUDIT.md). */
async function recordSources(log: EventLog, context: CompiledContext, lastStep: boolean) {
  return {
    system: await log.blobs.put(context.system),
    tools: await log.blobs.put(JSON.stringify(context.tools)),
    ...(context.version !== undefined && { version: context.version }),
    accepts: [...(context.accepts ?? ACCEPTS_ALL)],
    ...(lastStep && { lastStep: true as const }),
  }
}

function budget(deps: LoopDeps, view: SessionView, user: Message): number {
  if (deps.maxSteps !== undefined) return deps.maxSteps
  const name = user.agent ?? view.session?.agent ?? ''
  return deps.agents.get(name)?.maxSteps ?? 50
}

/**
 * Inbox entries to deliver now. At the start of a run: every steer and the
 * first queued input, in order. Mid-run (a step boundary): steers only —
 * they reach the model as steering; queued inputs wait for the next run.
 */
function deliver(view: SessionView, first: boolean, ids: IdSource): ChronicleEvent[] {
  const out: ChronicleEvent[] = []
  let queued = false
  for (const input of view.session?.inbox ?? []) {
    if (input.delivery === 'queue') {
      if (!first || queued) continue
      queued = true
    }
    const messageId = ids.next('msg')
    const partIds = input.parts.map(() => ids.next('prt'))
    out.push({
      type: 'input.delivered',
      data: { inputId: input.inputId, messageId, partIds, ...(!first && { steered: true }) },
    })
  }
  return out
}
