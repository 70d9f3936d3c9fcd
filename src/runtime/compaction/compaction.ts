import type { EventLog } from '../../events/log.js'
import type { IdSource } from '../../events/ids.js'
import type { SessionView } from '../../projections/fold/model.js'
import { latestUser, digestOf, type CompiledContext } from '../loop/context.js'
import { viewAnswered } from '../loop/stop-rule.js'
import { type Budget, budgetFor, type CompactionConfig } from './config.js'
import { prunable, pruneLimits } from './prune.js'
import { COMPACTION_AGENT, COMPACTION_SYSTEM, compactionRequestText } from './prompt.js'
import { fitTranscript, splitHistory, transcriptEntries } from './split.js'
import { partsByMessage, type ChatMessage } from '../loop/chat-messages.js'
import type { ModelHandle, ModelResolver } from '../model/adapter.js'
import type { Recorder } from '../loop/recorder.js'
import type { RetryPolicy } from '../model/retry.js'
import type { SessionViews } from '../loop/session-views.js'
import { runModelStep } from '../loop/step.js'
import { contextSize, estimateMessage, estimateTokens } from './tokens.js'

/**
 * Compaction as a recorded task (docs/COMPACTION.md):
 *
 *   compaction.requested {reason} → compaction.started
 *     → message.created {summary: true} → step.started → text.* → step.finished → message.completed
 *     → compaction.completed {summaryMessageId, tailStartMessageId, tokensBefore, tokensAfter}
 *   | compaction.failed {error}
 *
 * The head of the history is written as a transcript and summarised by the
 * tool-less compaction agent through the same model adapter; the recent tail
 * (whole turns, from a user message) is kept verbatim. From then on the model
 * is sent summary + tail + later messages (history.ts visibleMessages); the
 * head stays in the log. A request that is itself too large is shrunk
 * (halved) up to `maxShrinks` times, each attempt its own summary message.
 */

export interface CompactionDeps {
  /** where the compaction request's texts are stored as blobs */
  readonly log: EventLog
  readonly ids: IdSource
  readonly views: SessionViews
  readonly models: ModelResolver
  readonly retry: RetryPolicy
  readonly config: CompactionConfig
}

export interface RunScope {
  readonly recorder: Recorder
  readonly runId: string
  readonly sessionId: string
  readonly signal: AbortSignal
}

export type CompactionResult =
  | { readonly status: 'completed'; readonly compactionId: string; readonly summaryMessageId: string }
  | { readonly status: 'failed'; readonly compactionId: string; readonly error: string; readonly aborted?: boolean }

export interface CompactRequest {
  readonly reason: 'auto' | 'overflow' | 'manual'
  /** an already requested compaction (manual: appended by the command) */
  readonly compactionId?: string
  /** the summary answers the latest user message when the session had already answered it (so an idle session stays idle) */
  readonly answered: boolean
  readonly model?: ModelHandle
  readonly tokensBefore?: number
}

/** Summary output allowance subtracted from the window when sizing the request. */
const SUMMARY_ALLOWANCE = 4_000

export async function compact(
  deps: CompactionDeps,
  scope: RunScope,
  request: CompactRequest,
): Promise<CompactionResult> {
  const { recorder, runId, sessionId, signal } = scope
  const meta = { actor: 'runtime' as const, run: runId }
  const compactionId = request.compactionId ?? deps.ids.next('cmp')
  await recorder.append(
    [
      ...(request.compactionId
        ? []
        : [{ type: 'compaction.requested' as const, data: { compactionId, reason: request.reason } }]),
      { type: 'compaction.started', data: { compactionId } },
    ],
    meta,
  )
  const fail = async (error: string, aborted = false): Promise<CompactionResult> => {
    await recorder.append([{ type: 'compaction.failed', data: { compactionId, error } }], meta)
    return { status: 'failed', compactionId, error, ...(aborted && { aborted }) }
  }

  const view = await deps.views.read(sessionId)
  const user = latestUser(view)
  const model = request.model ?? deps.models.resolve(user?.model ?? view.session?.model ?? null)
  if (!model) return fail('no model is configured for the compaction agent')
  const budget = budgetFor(deps.config, model.spec)
  const split = splitHistory(view, budget?.tail ?? deps.config.tail)
  if (!split.head.some((m) => !m.summary))
    return fail('nothing to compact: the history since the last summary is all recent')
  const entries = transcriptEntries(view, split.head)
  const tokensBefore = request.tokensBefore ?? historyTokens(view)

  let target = budget
    ? Math.max(500, budget.usable - estimateTokens(COMPACTION_SYSTEM) - SUMMARY_ALLOWANCE)
    : Number.POSITIVE_INFINITY
  for (let attempt = 0; ; attempt++) {
    const fit = fitTranscript(entries, target)
    const messages: ChatMessage[] = [
      { role: 'user', content: [{ type: 'text', text: compactionRequestText(fit.text, split.tail.length > 0) }] },
    ]
    const base = { system: COMPACTION_SYSTEM, messages, tools: [], toolChoice: 'auto' as const }
    const context: CompiledContext = { ...base, digest: digestOf(base), agent: COMPACTION_AGENT, toolset: new Map() }
    const messageId = deps.ids.next('msg')
    recorder.emit(
      {
        type: 'message.created',
        data: {
          messageId,
          role: 'assistant',
          ...(request.answered && user && { parentId: user.id }),
          agent: COMPACTION_AGENT.name,
          model: model.spec,
          summary: true,
        },
      },
      meta,
    )
    const outcome = await runModelStep({
      recorder,
      ids: deps.ids,
      runId,
      messageId,
      step: 1,
      model,
      context,
      compiledFrom: {
        system: await deps.log.blobs.put(base.system),
        tools: await deps.log.blobs.put(JSON.stringify(base.tools)),
        messages: await deps.log.blobs.put(JSON.stringify(base.messages)),
      },
      signal,
      retry: deps.retry,
    })
    await recorder.settle()
    if (outcome.status === 'aborted' || signal.aborted) return fail('cancelled', true)
    if (outcome.status === 'error') {
      if (outcome.failure.kind !== 'context_overflow')
        return fail(`the compaction model failed: ${outcome.failure.message}`)
      if (attempt >= deps.config.maxShrinks) {
        return fail(
          `the compaction request is too large for the model even after ${attempt} shrinks (last target ${fit.tokens} tokens)`,
        )
      }
      target = Math.max(1, Math.floor(Math.min(target, fit.tokens) / 2))
      continue
    }
    const after = await deps.views.read(sessionId)
    const summary = (partsByMessage(after).get(messageId) ?? [])
      .map((p) => (p.type === 'text' ? p.text : ''))
      .join('')
      .trim()
    if (!summary) return fail('the compaction model returned no summary')
    const parts = partsByMessage(after)
    const tokensAfter =
      estimateTokens(summary) + split.tail.reduce((n, m) => n + estimateMessage(parts.get(m.id) ?? []), 0)
    await recorder.append(
      [
        {
          type: 'compaction.completed',
          data: {
            compactionId,
            summaryMessageId: messageId,
            ...(split.tailStartMessageId && { tailStartMessageId: split.tailStartMessageId }),
            tokensBefore,
            tokensAfter,
          },
        },
      ],
      meta,
    )
    return { status: 'completed', compactionId, summaryMessageId: messageId }
  }
}

function historyTokens(view: SessionView): number {
  const parts = partsByMessage(view)
  let n = 0
  for (const m of view.messages.values())
    if (!m.summary || m.id === view.session?.compaction?.applied?.summaryMessageId)
      n += estimateMessage(parts.get(m.id) ?? [])
  return n
}

export type OverflowVerdict =
  | { readonly retry: true }
  | { readonly retry: false; readonly error: { kind: string; message: string } }

/**
 * One run's compaction policy: a requested (manual) compaction runs at the
 * next step boundary; before a step, compaction runs when the context passes
 * the usable window (once per run if it fails); a provider overflow gets one
 * compaction and a retry of the step, a second overflow ends the run.
 */
export class RunCompaction {
  private autoFailed = false
  private overflowStep = -1

  constructor(
    private readonly deps: CompactionDeps,
    private readonly scope: RunScope,
  ) {}

  /** Performs the compaction the session has pending (status `requested`), if any; true when it ran. */
  async pending(view: SessionView): Promise<boolean> {
    const c = view.session?.compaction
    if (c?.status !== 'requested') return false
    const answered = viewAnswered(view)
    await compact(this.deps, this.scope, {
      reason: c.reason as CompactRequest['reason'],
      compactionId: c.compactionId,
      answered,
    })
    return true
  }

  /**
   * Prunes old tool outputs when that saves enough, else compacts when the next request would pass the
   * usable window; true when either happened (recompile).
   */
  async beforeStep(view: SessionView, context: CompiledContext, model: ModelHandle): Promise<boolean> {
    const budget = budgetFor(this.deps.config, model.spec)
    if (await this.prune(view, budget)) return true
    if (!this.deps.config.auto || this.autoFailed) return false
    if (!budget || nothingSinceSummary(view)) return false
    const size = contextSize(view, context)
    if (size.tokens < budget.usable) return false
    const result = await compact(this.deps, this.scope, {
      reason: 'auto',
      answered: false,
      model,
      tokensBefore: size.tokens,
    })
    if (result.status === 'failed') this.autoFailed = true
    return result.status === 'completed' || result.aborted === true
  }

  /** Records a pruning of old tool outputs (prune.ts) when one is due; true when it did. */
  private async prune(view: SessionView, budget: Budget | undefined): Promise<boolean> {
    const config = this.deps.config.prune
    if (!config.enabled) return false
    const found = prunable(view, pruneLimits(config, budget))
    if (!found) return false
    await this.scope.recorder.append([{ type: 'context.pruned', data: found }], {
      actor: 'runtime',
      run: this.scope.runId,
    })
    return true
  }

  /** After a provider context overflow in `step`. */
  async overflow(step: number, model: ModelHandle): Promise<OverflowVerdict> {
    if (!this.deps.config.auto) {
      return {
        retry: false,
        error: {
          kind: 'CONTEXT_OVERFLOW',
          message:
            'The request exceeds the model context window and automatic compaction is off (compaction.auto = false). ' +
            'Compact the session (POST /sessions/:id/compact or `chronicle compact <id>`) and send the input again.',
        },
      }
    }
    if (this.overflowStep === step) {
      return {
        retry: false,
        error: {
          kind: 'CONTEXT_OVERFLOW',
          message:
            'The request still exceeds the model context window after compacting the history; start a new session or use a model with a larger window.',
        },
      }
    }
    this.overflowStep = step
    const result = await compact(this.deps, this.scope, { reason: 'overflow', answered: false, model })
    if (result.status === 'completed' || result.aborted) return { retry: true } // aborted: the loop ends the run cancelled
    return {
      retry: false,
      error: {
        kind: 'CONTEXT_OVERFLOW',
        message: `The request exceeds the model context window and compaction failed: ${result.error}`,
      },
    }
  }
}

/** Right after a compaction nothing new has been added: compacting again would only summarise the summary. */
function nothingSinceSummary(view: SessionView): boolean {
  const applied = view.session?.compaction?.applied
  if (!applied) return false
  for (const m of view.messages.values()) if (m.id > applied.summaryMessageId && !m.summary) return false
  return true
}
