import { requestCompaction, type CompactRequested } from '../commands/compact.js'
import { submitInput, type SubmitContext, type SubmitInput, type SubmitResult } from '../commands/input.js'
import { cancelRun } from '../commands/run.js'
import type { IdSource } from '../events/ids.js'
import type { CacheBounds } from '../events/bounded-cache.js'
import type { StorePorts } from '../projections/store-ports.js'
import { DEFAULT_INPUT_INDEX_BOUNDS, InputIndex } from './inbox/input-index.js'
import type { AgentDefinition } from '../tools/agents.js'
import type { Redactor } from '../tools/redact.js'
import type { PermissionGate, ToolRegistry } from '../tools/tool.js'
import type { WorkspaceSnapshots } from './workspace/snapshots.js'
import { compactionConfig, type CompactionSettings } from './compaction/config.js'
import { recordedRequest, type SentStep } from './audit/recorded.js'
import { createAttacher } from './inbox/attach.js'
import { createTitles } from './titles.js'
import { compileContext } from './loop/context.js'
import { RunCoordinator } from './inbox/coordinator.js'
import { runLoop } from './loop/loop.js'
import { continueRun } from './recovery/resume.js'
import { runThroughOutages, whenAvailable } from './recovery/outage.js'
import { SHUTDOWN } from './abort-reasons.js'
import type { ModelRequest, ModelResolver } from './model/adapter.js'
import { DEFAULT_RETRY, type RetryPolicy } from './model/retry.js'
import { DEFAULT_VIEW_BOUNDS, SessionViews } from './loop/session-views.js'
import type { ServerInstructions, SystemEnvironment } from './loop/system-prompt.js'
import type { SkillSource } from '../tools/skills/skills.js'
import { type AwaitedInput, asksForRun, Placement, runEndedElsewhere } from './cluster/placement.js'

/**
 * The agent runtime (docs/ARCHITECTURE.md, docs/TRACES.md) — what the server uses:
 *
 *   const runtime = createRuntime({ ports, ids, models, tools, permissions, agents, log?, limits? })
 *   runtime.submit(sessionId, { inputId?, parts, agent?, model?, delivery?, noReply? })
 *       → { inputId, seq, duplicate }   input.accepted is committed (FULL) before this returns;
 *                                        then the session is woken. Throws ChronicleError
 *                                        EMPTY_INPUT, PAYLOAD_TOO_LARGE, UNKNOWN_AGENT, UNKNOWN_MODEL,
 *                                        INPUT_CONFLICT, SESSION_NOT_FOUND, SESSION_ARCHIVED, SESSION_READ_ONLY
 *                                        (nothing appended).
 *   runtime.cancel(sessionId) → { cancelled }   appends run.cancel.requested (FULL) and aborts the run
 *   runtime.wake(sessionId)       starts a run if input is pending (e.g. after recovery)
 *   runtime.resume(sessionId, runId, start?)  continues a run recovery marked run.resumed
 *                                 (src/runtime/recovery/recovery.ts); the session is held from the call, the run
 *                                 starts once `start` resolves true
 *                                 An imported session (Session.imported) is never woken or resumed, and
 *                                 submit / cancel / compact refuse it with SESSION_READ_ONLY.
 *   runtime.idle(sessionId)       resolves when no run is active and nothing is pending
 *   runtime.isRunning(sessionId)
 *   runtime.compact(sessionId) → { compactionId, seq, duplicate }   appends compaction.requested {manual} (FULL);
 *                                 the session's run performs it (one starts when idle) — src/runtime/compaction/compaction.ts
 *   runtime.context(sessionId, seq?) → { system, messages, tools, toolChoice, digest, … } (what the model sees)
 *   runtime.stop()                aborts every run at a safe point (runs stay open for recovery)
 *
 * Model and tool failures never throw out of a run: they end it with events.
 */

export interface RuntimeLimits {
  /** largest accepted input, in bytes of its parts' JSON (PAYLOAD_TOO_LARGE above) */
  readonly maxInputBytes?: number
  /** largest file attached by path (src/runtime/inbox/attach.ts) */
  readonly maxFileBytes?: number
  /** overrides every agent's step budget */
  readonly maxSteps?: number
  readonly retry?: Partial<RetryPolicy>
}

export interface RuntimeLog {
  error(obj: object, msg?: string): void
}

export interface RuntimeDeps {
  /** the store the runtime reads and appends through (src/projections/store-ports.ts) */
  readonly ports: StorePorts
  readonly ids: IdSource
  readonly models: ModelResolver
  readonly tools: ToolRegistry
  readonly permissions: PermissionGate
  readonly agents: ReadonlyMap<string, AgentDefinition>
  readonly log?: RuntimeLog
  readonly limits?: RuntimeLimits
  /** propose a title after a session's first exchange (src/runtime/titles.ts); default off */
  readonly titles?: boolean
  /** Chronicle's data dir and config file: never attached as a file part */
  readonly forbidden?: readonly string[]
  /** platform and date told to the model; injectable for reproducible requests */
  readonly environment?: () => SystemEnvironment
  /** the instructions of the connected MCP servers, for the system prompt */
  readonly serverInstructions?: () => readonly ServerInstructions[]
  /** the skills the system prompt lists (src/tools/skills/skills.ts); the `skill` tool loads them */
  readonly skills?: SkillSource
  /** context compaction; absent: none (the composition root always configures it) */
  readonly compaction?: CompactionSettings
  /** the server's secrets, kept out of what tools report (docs/SECURITY.md) */
  readonly redactor?: Redactor
  /** records the session directory at each step and after writing tools (docs/TIME-TRAVEL.md) */
  readonly workspace?: WorkspaceSnapshots
  /** a person's reject fails only its call and the run goes on (config `permission.continueOnReject`); default: it ends the run `rejected` */
  readonly continueOnReject?: boolean
  /** (cluster) whether this node's lease still runs: past it no tool starts (docs/CLUSTER.md) */
  readonly leased?: () => boolean
  /**
   * (cluster) whether this node holds the session (docs/CLUSTER.md "Commands at any node"): a session another
   * node holds is not run here — its owner acts on the commands this node takes for it, when it hears them
   */
  readonly holds?: (sessionId: string) => boolean
  /** what per-session state is kept in memory (the config's `memory`: src/runtime/memory.ts) */
  readonly memory?: { readonly views?: CacheBounds; readonly inputs?: CacheBounds }
}

export type { SubmitInput, SubmitResult }

/** What the model is (or was, at `seq`) sent for the session's next step: plain JSON. */
export interface ModelContext extends ModelRequest {
  readonly digest: string
  readonly agent: string
  /** at a step.started: the step this exact request was sent for (rebuilt from the log: docs/AUDIT.md) */
  readonly step?: SentStep
}

export interface Runtime {
  /**
   * The submit command, then a wake (clients reach the command directly: src/commands/input.ts).
   * `by`: who the input comes from (meta.actor); the runtime submits a sub-agent's prompt and an orphan's report itself.
   */
  submit(sessionId: string, input: SubmitInput, by?: 'user' | 'runtime'): Promise<SubmitResult>
  /** what submitting input to this runtime's sessions needs (the input index, agents, models, limits) */
  readonly submitContext: SubmitContext
  cancel(sessionId: string): Promise<{ cancelled: boolean }>
  wake(sessionId: string): void
  /**
   * Holds the session for the run from this call (a cancel aborts it, a wake joins it); the run starts once
   * `start` resolves true (default: at once).
   */
  resume(sessionId: string, runId: string, start?: Promise<boolean>): void
  /**
   * Resolves when no run is active and nothing is pending; on a cluster, for a session another node runs,
   * when its run has answered `input` (src/runtime/cluster/placement.ts).
   */
  idle(sessionId: string, input?: AwaitedInput): Promise<void>
  /**
   * (cluster) Sessions just claimed, being recovered: their wakes wait until the returned function is called,
   * once recovery has handed their resumed runs on (src/runtime/cluster/placement.ts).
   */
  recovering(sessionIds: readonly string[]): () => void
  /** idle, and the workspace snapshots its last steps took in the background recorded */
  settled(sessionId: string): Promise<void>
  isRunning(sessionId: string): boolean
  /**
   * (cluster, docs/CLUSTER.md) The session is no longer this node's: its run stops as at a shutdown (its
   * tools killed, nothing more appended), and what is cached of it is dropped — another node writes it now.
   */
  release(sessionId: string): Promise<void>
  /** the per-session state held in memory now (docs/ARCHITECTURE.md "Memory") */
  held(): { readonly views: number; readonly viewBytes: number; readonly inputIndexes: number }
  compact(sessionId: string): Promise<CompactRequested>
  context(sessionId: string, seq?: number): Promise<ModelContext>
  stop(): Promise<void>
}

export function createRuntime(deps: RuntimeDeps): Runtime {
  const { ids, agents, models } = deps
  const { log, readModels } = deps.ports
  const views = new SessionViews(deps.ports, deps.memory?.views ?? DEFAULT_VIEW_BOUNDS)
  const inputs = new InputIndex(log, deps.memory?.inputs ?? DEFAULT_INPUT_INDEX_BOUNDS)
  // Sessions nobody touches are dropped from memory even when nothing else happens on the server.
  const idleMs = Math.min(
    (deps.memory?.views ?? DEFAULT_VIEW_BOUNDS).idleMs,
    (deps.memory?.inputs ?? DEFAULT_INPUT_INDEX_BOUNDS).idleMs,
  )
  const sweeper = setInterval(
    () => {
      views.sweep()
      inputs.sweep()
      readModels.sweep()
    },
    Math.max(1000, idleMs / 2),
  )
  sweeper.unref()
  const submitContext: SubmitContext = {
    ids,
    prior: (sessionId, inputId, fresh) => inputs.find(sessionId, inputId, fresh),
    agents: new Set(agents.keys()),
    validateModel: (model) => models.validate(model),
    ...(deps.limits?.maxInputBytes !== undefined && { maxInputBytes: deps.limits.maxInputBytes }),
    attach: createAttacher({
      ports: deps.ports,
      ...(deps.forbidden && { forbidden: deps.forbidden }),
      ...(deps.limits?.maxFileBytes !== undefined && { maxBytes: deps.limits.maxFileBytes }),
    }),
  }
  const retry = { ...DEFAULT_RETRY, ...deps.limits?.retry }
  const loopDeps = {
    log,
    readModels,
    ids,
    views,
    models,
    tools: deps.tools,
    permissions: deps.permissions,
    agents,
    retry,
    ...(deps.limits?.maxSteps !== undefined && { maxSteps: deps.limits.maxSteps }),
    ...(deps.environment && { environment: deps.environment }),
    ...(deps.serverInstructions && { serverInstructions: deps.serverInstructions }),
    ...(deps.skills && { skills: deps.skills }),
    ...(deps.compaction && { compaction: compactionConfig(deps.compaction) }),
    ...(deps.redactor && { redactor: deps.redactor }),
    ...(deps.workspace && { workspace: deps.workspace }),
    ...(deps.continueOnReject && { continueOnReject: true }),
    ...(deps.leased && { leased: deps.leased }),
  }
  const titles = deps.titles
    ? createTitles({ ports: deps.ports, ids, models, ...(deps.log && { log: deps.log }) })
    : undefined
  // aborted (SHUTDOWN) by stop(): what waits for the store to come back gives up then
  const stopping = new AbortController()
  const coordinator = new RunCoordinator(
    async (sessionId, signal, resume) => {
      // a run the store is lost under pauses, and goes on once it is back (src/runtime/recovery/outage.ts)
      const outcome = await runThroughOutages(loopDeps, sessionId, signal, () =>
        resume ? continueRun(loopDeps, sessionId, signal, resume.runId) : runLoop(loopDeps, sessionId, signal),
      )
      if (outcome === 'idle' || outcome === 'rejected') titles?.afterRun(sessionId)
      return outcome
    },
    async (sessionId) => {
      // a wake while the store is away is not lost: it is read once the store is back
      const session = await whenAvailable(() => readModels.session(sessionId), stopping.signal)
      // An imported session is never run (src/commands/read-only.ts): nothing of it is pending work.
      if (!session || session.imported) return undefined
      // A requested compaction is pending work too: a run performs it.
      return (
        session.inbox[0]?.inputId ??
        (session.compaction?.status === 'requested' ? session.compaction.compactionId : undefined)
      )
    },
    (sessionId, err) => deps.log?.error({ err, sessionId }, 'run coordinator failed'),
  )
  // On a cluster, a session another node holds is run there; one this node is recovering, once handed on.
  const placement = deps.holds ? new Placement(deps.holds) : undefined
  const wake = (sessionId: string) => {
    if (!placement || placement.admit(sessionId)) coordinator.wake(sessionId)
  }
  // A cancel is a fact in the log, whoever appended it (a client's command, a parent's task call, another
  // node): the run it names is aborted once it is committed. Input or a compaction another node took for a
  // session this node runs wakes it here.
  const unsubscribe = log.onCommit((events, elsewhere) => {
    for (const e of events) {
      if (e.type === 'run.cancel.requested') coordinator.cancel(e.sessionId)
      else if (elsewhere && placement && asksForRun(e)) wake(e.sessionId)
    }
  })

  return {
    submitContext,
    async submit(sessionId, input, by = 'user') {
      const result = await submitInput(deps.ports, sessionId, input, submitContext, by)
      if (!input.noReply && !result.duplicate) wake(sessionId)
      return result
    },

    async cancel(sessionId) {
      const { cancelled } = await cancelRun(deps.ports, sessionId)
      // A run starting in this very turn has no run.started to cancel in the log yet: abort it here too.
      const aborted = coordinator.cancel(sessionId)
      return { cancelled: cancelled || aborted }
    },

    wake, // an imported session has no pending work (above): nothing starts
    resume(sessionId, runId, start = Promise.resolve(true)) {
      // Held at once, read later: a cancel or an input that comes first must find the run the runtime's.
      const resumable = async () => {
        if (!(await start)) return false
        const session = await whenAvailable(() => readModels.session(sessionId), stopping.signal)
        return session !== undefined && !session.imported // an imported session is never resumed
      }
      coordinator.resume(sessionId, { runId }, resumable())
    },
    idle(sessionId, input) {
      if (placement && !placement.runsHere(sessionId))
        return runEndedElsewhere(deps.ports, sessionId, input, stopping.signal)
      return coordinator.idle(sessionId)
    },
    recovering(sessionIds) {
      const end = placement?.hold(sessionIds)
      return () => {
        for (const sessionId of end?.() ?? []) wake(sessionId)
      }
    },
    async settled(sessionId) {
      await coordinator.idle(sessionId)
      await deps.workspace?.settled(sessionId)
    },
    isRunning: (sessionId) => coordinator.isRunning(sessionId),
    async release(sessionId) {
      await coordinator.release(sessionId)
      views.forget(sessionId)
      inputs.forget(sessionId)
    },
    held: () => ({ views: views.held.views, viewBytes: views.held.bytes, inputIndexes: inputs.size }),
    async compact(sessionId) {
      const requested = await requestCompaction(deps.ports, ids, sessionId)
      wake(sessionId)
      return requested
    },
    async context(sessionId, seq) {
      const sent = seq === undefined ? undefined : await recordedRequest(deps.ports, sessionId, seq)
      if (sent) return { ...sent.request, digest: sent.digest, agent: sent.agent, step: sent.step }
      const { system, messages, tools, toolChoice, digest, agent } = await compileContext(
        deps.ports,
        sessionId,
        seq,
        loopDeps,
      )
      return { system, messages, tools, toolChoice, digest, agent: agent.name }
    },

    async stop() {
      unsubscribe()
      stopping.abort(SHUTDOWN)
      await coordinator.stop()
      await titles?.drain()
      await deps.workspace?.drain()
      clearInterval(sweeper)
      views.close()
      inputs.close()
    },
  }
}
