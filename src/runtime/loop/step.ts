import type { DataOf, Usage } from '../../events/catalogue.js'
import type { IdSource } from '../../events/ids.js'
import { abortError } from '../abort-reasons.js'
import type { CompiledContext } from './context.js'
import { readModelStep, type ModelFailure, type ModelHandle } from '../model/adapter.js'
import type { Recorder } from './recorder.js'
import { retryDelay, sleep, type RetryPolicy } from '../model/retry.js'
import { completeUsage } from '../compaction/tokens.js'
import { costOf } from '../model/pricing.js'

/**
 * One model step, recorded: step.started, every streamed part as its event,
 * step.finished and message.completed. Retryable failures before any output
 * are retried with backoff (step.retried); nothing here throws for a model
 * failure — the outcome says what happened.
 */

export interface StreamedCall {
  readonly partId: string
  readonly callId: string
  readonly tool: string
  readonly rawInput: string
  /** the parsed input, or the raw string when the model's JSON did not parse */
  readonly input: unknown
}

export type StepOutcome =
  | { readonly status: 'done'; readonly finishReason: string; readonly calls: readonly StreamedCall[] }
  | { readonly status: 'error'; readonly failure: ModelFailure }
  | { readonly status: 'aborted' }

export interface StepInput {
  readonly recorder: Recorder
  readonly ids: IdSource
  readonly runId: string
  readonly messageId: string
  readonly step: number
  readonly model: ModelHandle
  readonly context: CompiledContext
  /** what the request was compiled from, recorded on step.started */
  readonly compiledFrom?: DataOf<'step.started'>['context']
  readonly signal: AbortSignal
  readonly retry: RetryPolicy
}

export async function runModelStep(input: StepInput): Promise<StepOutcome> {
  const { recorder, ids, messageId, signal } = input
  const model = { actor: 'model' as const, run: input.runId }
  // Deltas are most of a session's events: their meta is just the actor (the run is the one open around them).
  const delta = { actor: 'model' as const }
  for (let attempt = 0; ; attempt++) {
    recorder.emit(
      {
        type: 'step.started',
        data: {
          messageId,
          partId: ids.next('prt'),
          step: input.step,
          contextDigest: input.context.digest,
          ...(input.compiledFrom && { context: input.compiledFrom }),
          ...(input.model.settings && { settings: input.model.settings }),
        },
      },
      model,
    )
    // 'text:<stream id>' or 'reasoning:<stream id>' → its part (a provider may number both kinds from 0)
    const open = new Map<string, { partId: string; kind: 'text' | 'reasoning' }>()
    const tools = new Map<string, { partId: string; tool: string; raw: string }>()
    const calls: StreamedCall[] = []
    let finish: { finishReason: string; usage: Usage } | undefined
    let failure: ModelFailure | undefined
    let aborted = false
    let streamed = false
    let produced = 0 // output characters: the usage estimate when the provider reports none

    await readModelStep(
      input.model,
      input.context,
      signal,
      (part) => {
        switch (part.type) {
          case 'text-start':
          case 'reasoning-start': {
            const partId = ids.next('prt')
            const kind = part.type === 'text-start' ? 'text' : 'reasoning'
            open.set(`${kind}:${part.id}`, { partId, kind })
            recorder.emit({ type: `${kind}.started`, data: { messageId, partId } }, model)
            break
          }
          case 'text-delta':
          case 'reasoning-delta': {
            const kind = part.type === 'text-delta' ? 'text' : 'reasoning'
            const partId = open.get(`${kind}:${part.id}`)?.partId
            if (!partId) break
            streamed = true
            produced += part.text.length
            recorder.emit({ type: `${kind}.delta`, data: { partId, text: part.text } }, delta)
            break
          }
          case 'text-end':
          case 'reasoning-end': {
            const key = `${part.type === 'text-end' ? 'text' : 'reasoning'}:${part.id}`
            const started = open.get(key)
            if (!started) break
            open.delete(key)
            const metadata = part.type === 'reasoning-end' ? part.providerMetadata : undefined
            recorder.emit(
              started.kind === 'reasoning'
                ? {
                    type: 'reasoning.ended',
                    data: { partId: started.partId, ...(metadata && { providerMetadata: metadata }) },
                  }
                : { type: 'text.ended', data: { partId: started.partId } },
              model,
            )
            break
          }
          case 'tool-input-start': {
            streamed = true
            const partId = ids.next('prt')
            tools.set(part.callId, { partId, tool: part.tool, raw: '' })
            recorder.emit(
              { type: 'tool.input.started', data: { messageId, partId, callId: part.callId, tool: part.tool } },
              model,
            )
            break
          }
          case 'tool-input-delta': {
            const t = tools.get(part.callId)
            if (!t || part.delta.length === 0) break
            t.raw += part.delta
            produced += part.delta.length
            recorder.emit({ type: 'tool.input.delta', data: { partId: t.partId, delta: part.delta } }, delta)
            break
          }
          case 'tool-call': {
            streamed = true
            let t = tools.get(part.callId)
            if (!t) {
              // The provider sent the call whole, without streaming its input.
              t = { partId: ids.next('prt'), tool: part.tool, raw: part.rawInput }
              tools.set(part.callId, t)
              recorder.emit(
                [
                  {
                    type: 'tool.input.started',
                    data: { messageId, partId: t.partId, callId: part.callId, tool: part.tool },
                  },
                  { type: 'tool.input.delta', data: { partId: t.partId, delta: part.rawInput } },
                ],
                model,
              )
            }
            calls.push({
              partId: t.partId,
              callId: part.callId,
              tool: part.tool,
              rawInput: t.raw || part.rawInput,
              input: part.input,
            })
            break
          }
          case 'finish':
            finish = { finishReason: part.finishReason, usage: part.usage }
            break
          case 'error':
            failure ??= part.failure
            break
          case 'aborted':
            aborted = true
            break
        }
      },
      input.retry.stallMs,
    )
    if (signal.aborted) aborted = true
    // Text and reasoning streamed so far are kept: close what the stream left open.
    for (const { partId, kind } of open.values()) recorder.emit({ type: `${kind}.ended`, data: { partId } }, model)

    if (!aborted && failure && !streamed && failure.retryable && attempt < input.retry.maxRetries) {
      const delayMs = retryDelay(attempt + 1, failure, input.retry)
      recorder.emit(
        { type: 'step.retried', data: { messageId, attempt: attempt + 1, delayMs, error: failure.message } },
        model,
      )
      await recorder.settle()
      await sleep(delayMs, signal)
      if (signal.aborted) return finishStep(input, { status: 'aborted' }, undefined)
      continue
    }

    // Calls that will not run (input incomplete, or the run was cancelled) fail now: every call gets a result.
    const complete = new Set(calls.map((c) => c.callId))
    const unfinished = [...tools.entries()]
      .filter(([callId]) => aborted || !complete.has(callId))
      .map(([, t]) => t.partId)
    const error = aborted
      ? abortError(signal)
      : { kind: 'failed' as const, message: 'the model stopped before the call was complete' }
    for (const partId of unfinished) recorder.emit({ type: 'tool.failed', data: { partId, error } }, model)

    const outcome: StepOutcome = aborted
      ? { status: 'aborted' }
      : failure
        ? { status: 'error', failure }
        : { status: 'done', finishReason: finish?.finishReason ?? 'other', calls }
    return finishStep(
      input,
      outcome,
      finish && Object.assign({}, finish, { usage: completeUsage(finish.usage, input.context, produced) }),
    )
  }
}

function finishStep(
  input: StepInput,
  outcome: StepOutcome,
  finish: { finishReason: string; usage: Usage } | undefined,
): StepOutcome {
  const { recorder, messageId } = input
  const meta = { actor: 'runtime' as const, run: input.runId }
  const finishReason =
    outcome.status === 'done' ? outcome.finishReason : outcome.status === 'aborted' ? 'aborted' : 'error'
  const usage = finish?.usage ?? {}
  const price = input.model.price
  const cost = price && finish ? costOf(usage, price) : undefined
  const error =
    outcome.status === 'aborted'
      ? abortError(input.signal)
      : outcome.status === 'error'
        ? { kind: outcome.failure.kind, message: outcome.failure.message }
        : undefined
  recorder.emit(
    [
      {
        type: 'step.finished',
        data: { messageId, partId: input.ids.next('prt'), finishReason, usage, ...(cost !== undefined && { cost }) },
      },
      {
        type: 'message.completed',
        data: { messageId, finish: finishReason, usage, ...(cost !== undefined && { cost }), ...(error && { error }) },
      },
    ],
    meta,
  )
  return outcome
}
