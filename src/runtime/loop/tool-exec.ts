import { z } from 'zod'
import type { ToolErrorKind } from '../../events/catalogue.js'
import { NO_SECRETS, type Redactor } from '../../tools/redact.js'
import {
  ToolFailure,
  type PermissionChecker,
  type PermissionGate,
  type Tool,
  type ToolContext,
} from '../../tools/tool.js'
import { abortError, SHUTDOWN } from '../abort-reasons.js'
import type { Recorder } from './recorder.js'
import type { StreamedCall } from './step.js'
import type { WorkspaceSnapshots } from '../workspace/snapshots.js'
import type { Transcript } from './transcript.js'
import type { LoopScope } from '../permissions/gate.js'
import type { Session } from '../../projections/fold/model.js'

/**
 * Executes the tool calls of one step, in order. Arguments are validated
 * with the tool's zod schema before anything runs; an unknown tool or bad
 * arguments fail as `invalid` with a message the model can act on. The same
 * tool with the same input three times in a row asks the `doom_loop`
 * permission first (after `tool.called`, so the call's part holds its input
 * like any other call that asks). Every call ends in tool.completed or
 * tool.failed. Once a person has rejected a permission request of the run
 * (`rejected`), the step's calls not yet started are not run: each fails
 * `denied` with NOT_RUN_AFTER_REJECT, and the loop ends the run.
 *
 * Two guards hold for every tool, whatever it does (docs/SECURITY.md): what
 * it reports is redacted of the server's secrets before it is appended, and
 * it has a wall-clock budget (the tool's own, else DEFAULT_BUDGET_MS; time
 * spent waiting for the user's permission does not count), past which its
 * signal aborts and the call fails.
 */

export const DOOM_LOOP_THRESHOLD = 3
export const DEFAULT_BUDGET_MS = 5 * 60_000
const OVER_BUDGET = 'over budget'

/** a call the server's shutdown reached before it started: it never ran (a restart's other interrupted calls may have) */
export const NOT_STARTED_BEFORE_RESTART = 'interrupted by a server restart before it started: it did not run'

/** a call a cluster node reached after its lease ran out (docs/CLUSTER.md): it never ran */
export const NOT_STARTED_LEASE_LAPSED =
  "not started: this server's lease on the session ran out (another node may be running it); it did not run"

export const NOT_RUN_AFTER_REJECT =
  'Not run: the user rejected a permission request in this step, which stopped the run. Wait for the user before trying it again.'

export interface ExecuteInput {
  readonly recorder: Recorder
  readonly runId: string
  readonly sessionId: string
  readonly messageId: string
  readonly agent: string
  readonly directory: string
  readonly toolset: ReadonlyMap<string, Tool>
  readonly permissions: PermissionGate
  readonly signal: AbortSignal
  /** the session's history as committed now: the doom-loop check reads its latest tool calls, the step's earlier ones too */
  readonly transcript: () => Promise<Transcript>
  /** the session as committed now, what the permission gate decides on (LoopScope.session in ../permissions/gate.ts) */
  readonly session?: () => Promise<Session | null>
  /** the first message this run created: a repeat is a loop only within one run (earlier turns never count) */
  readonly runStartMessageId?: string
  /** the server's secrets, kept out of what tools report */
  readonly redactor?: Redactor
  /** records the workspace after a tool that may write (docs/TIME-TRAVEL.md) */
  readonly workspace?: WorkspaceSnapshots
  /** whether a person's reject has stopped the run (src/runtime/permissions/rejections.ts); absent: never */
  readonly rejected?: () => Promise<boolean>
  /** (cluster) whether this node's lease still runs (docs/CLUSTER.md); absent: always */
  readonly leased?: () => boolean
}

export async function executeCalls(calls: readonly StreamedCall[], input: ExecuteInput): Promise<void> {
  for (const [i, call] of calls.entries()) {
    if (await input.rejected?.()) return notRun(calls.slice(i), input)
    await executeCall(call, input)
  }
}

/** The step's calls a reject left unstarted: settled without running, in one commit. */
async function notRun(calls: readonly StreamedCall[], input: ExecuteInput): Promise<void> {
  for (const call of calls) {
    input.recorder.emit(
      { type: 'tool.failed', data: { partId: call.partId, error: { kind: 'denied', message: NOT_RUN_AFTER_REJECT } } },
      { actor: 'tool', run: input.runId, call: call.callId },
      'full',
    )
  }
  await input.recorder.settle()
}

async function executeCall(call: StreamedCall, input: ExecuteInput): Promise<void> {
  const { recorder, signal } = input
  const redact = input.redactor ?? NO_SECRETS
  const meta = { actor: 'tool' as const, run: input.runId, call: call.callId }
  const fail = async (kind: ToolErrorKind, message: string) => {
    recorder.emit(
      { type: 'tool.failed', data: { partId: call.partId, error: { kind, message: redact.text(message) } } },
      meta,
      'full',
    )
    await recorder.settle()
  }
  if (signal.aborted) {
    const { kind } = abortError(signal)
    return fail(kind, kind === 'interrupted' ? NOT_STARTED_BEFORE_RESTART : 'the run was cancelled before the tool ran')
  }

  const tool = input.toolset.get(call.tool)
  if (!tool) {
    const known = [...input.toolset.keys()].join(', ') || 'none'
    return fail('invalid', `Unknown tool "${call.tool}". Available tools: ${known}. Call one of those instead.`)
  }
  let args: unknown
  try {
    args = typeof call.input === 'string' ? JSON.parse(call.rawInput || '{}') : call.input
  } catch (err) {
    return fail(
      'invalid',
      `The arguments for ${call.tool} are not valid JSON (${(err as Error).message}). Send a JSON object matching the tool's schema.`,
    )
  }
  const parsed = tool.parameters.safeParse(args)
  if (!parsed.success) {
    return fail(
      'invalid',
      `Invalid arguments for ${call.tool}:\n${z.prettifyError(parsed.error)}\nFix the arguments and call ${call.tool} again.`,
    )
  }

  const scope: LoopScope = {
    sessionId: input.sessionId,
    agent: input.agent,
    messageId: input.messageId,
    callId: call.callId,
    partId: call.partId,
    abort: signal,
    ...(input.session && { session: input.session }),
  }
  // Called first, then (for a repeat) asked: the part holds the input as a value, as for any call that asks.
  const doomLoop = isDoomLoop(await input.transcript(), call, parsed.data, input.runStartMessageId)
  recorder.emit(
    {
      type: 'tool.called',
      data: {
        messageId: input.messageId,
        partId: call.partId,
        callId: call.callId,
        tool: call.tool,
        input: parsed.data,
      },
    },
    meta,
  )
  // ctx.check decides at once (a search filters every path it finds): on the rules read here, and again after each ask.
  let check: PermissionChecker
  try {
    if (doomLoop) {
      await input.permissions.ask(scope, {
        permission: 'doom_loop',
        patterns: [call.tool],
        metadata: { tool: call.tool, input: parsed.data },
      })
    }
    check = await input.permissions.checker(scope)
  } catch (err) {
    return fail(failureKind(err, signal, 'denied'), messageOf(err))
  }

  const budget = new Budget(tool.budgetMs?.(parsed.data) ?? DEFAULT_BUDGET_MS, signal)
  const ctx: ToolContext = {
    sessionId: input.sessionId,
    messageId: input.messageId,
    callId: call.callId,
    partId: call.partId,
    agent: input.agent,
    directory: input.directory,
    abort: budget.signal,
    progress: (metadata) =>
      recorder.emit({ type: 'tool.progressed', data: { partId: call.partId, metadata: redact.value(metadata) } }, meta),
    network: (use) =>
      recorder.emit({ type: 'tool.network', data: Object.assign({ partId: call.partId }, redact.value(use)) }, meta),
    ask: (request) => {
      const abort = request.signal ? AbortSignal.any([budget.signal, request.signal]) : budget.signal
      return budget.paused(async () => {
        await input.permissions.ask(Object.assign({}, scope, { abort }), request)
        check = await input.permissions.checker(scope)
      })
    },
    check: (request) => check(request),
  }
  // What a writing tool changed — completed, failed or cut off by a cancel — is recorded just before its
  // terminal event: up to that event the workspace is the one before the call, from it on the one after (a
  // fork or revert at any seq gets files that agree with the call's state). One cut off by a shutdown is
  // found when the resumed run starts.
  let recorded = false
  const recordWrites = async () => {
    if (recorded || !tool.writes || !input.workspace || signal.reason === SHUTDOWN) return
    recorded = true
    const at = { messageId: input.messageId, partId: call.partId }
    const snapshot = await input.workspace.take(input.sessionId, input.directory, 'tool', at)
    if (snapshot)
      recorder.emit({ type: 'workspace.snapshotted', data: snapshot }, { actor: 'runtime', run: input.runId })
  }
  // (cluster) A node past its lease may be dead to the others, who resume its runs: it starts nothing more.
  if (input.leased && !input.leased()) {
    budget.close()
    return fail('interrupted', NOT_STARTED_LEASE_LAPSED)
  }
  try {
    const result = await untilAborted(tool.execute(parsed.data, ctx), budget.signal)
    budget.close()
    await recordWrites()
    recorder.emit(
      {
        type: 'tool.completed',
        data: {
          partId: call.partId,
          output: redact.text(result.output),
          ...(result.title !== undefined && { title: redact.text(result.title) }),
          ...(result.metadata && { metadata: redact.value(result.metadata) }),
          ...(result.attachments && { attachments: redact.value([...result.attachments]) }),
        },
      },
      meta,
      'full',
    )
    await recorder.settle()
  } catch (err) {
    budget.close()
    await recordWrites()
    if (budget.spent)
      return fail('failed', `The ${call.tool} call ran longer than its ${duration(budget.ms)} budget and was stopped.`)
    return fail(failureKind(err, signal, 'failed'), messageOf(err))
  } finally {
    budget.close()
  }
}

/**
 * A call's wall-clock budget: its signal aborts when the run's does, or when
 * the call has run for `ms` — not counting time parked on a permission request.
 */
class Budget {
  private readonly controller = new AbortController()
  private timer: NodeJS.Timeout | undefined
  private left: number
  private since = 0
  private waiting = 0
  spent = false

  constructor(
    readonly ms: number,
    private readonly run: AbortSignal,
  ) {
    this.left = ms
    if (run.aborted) this.controller.abort(run.reason)
    else run.addEventListener('abort', this.onRun, { once: true })
    this.start()
  }

  get signal(): AbortSignal {
    return this.controller.signal
  }

  /** Runs `work` with the clock stopped (nested waits are fine). */
  async paused<T>(work: () => Promise<T>): Promise<T> {
    if (this.waiting++ === 0) this.stop()
    try {
      return await work()
    } finally {
      if (--this.waiting === 0) this.start()
    }
  }

  close(): void {
    this.stop()
    this.run.removeEventListener('abort', this.onRun)
  }

  private readonly onRun = () => this.controller.abort(this.run.reason)

  private start(): void {
    if (this.controller.signal.aborted) return
    this.since = Date.now()
    this.timer = setTimeout(() => {
      this.spent = true
      this.controller.abort(OVER_BUDGET)
    }, this.left)
  }

  private stop(): void {
    if (this.timer === undefined) return
    clearTimeout(this.timer)
    this.timer = undefined
    this.left = Math.max(0, this.left - (Date.now() - this.since))
  }
}

/** The last DOOM_LOOP_THRESHOLD - 1 calls before this one, in this run, were the same tool with the same input. */
function isDoomLoop(transcript: Transcript, call: StreamedCall, args: unknown, runStart?: string): boolean {
  const key = JSON.stringify(args)
  const earlier = transcript
    .toolPartsBefore(call.partId, DOOM_LOOP_THRESHOLD - 1)
    .filter((p) => runStart === undefined || p.messageId >= runStart)
  return (
    earlier.length === DOOM_LOOP_THRESHOLD - 1 &&
    earlier.every((p) => p.tool === call.tool && p.input !== undefined && JSON.stringify(p.input) === key)
  )
}

function duration(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`
}

function failureKind(err: unknown, signal: AbortSignal, otherwise: ToolErrorKind): ToolErrorKind {
  if (signal.aborted) return abortError(signal).kind
  return err instanceof ToolFailure ? err.kind : otherwise
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

/** A tool that ignores its abort signal still stops the run promptly. */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  const stopped = () => new ToolFailure(abortError(signal).kind, abortError(signal).message)
  if (signal.aborted) return Promise.reject(stopped())
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(stopped())
    signal.addEventListener('abort', onAbort, { once: true })
    work.then(
      (v) => {
        signal.removeEventListener('abort', onAbort)
        resolve(v)
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort)
        reject(e)
      },
    )
  })
}
