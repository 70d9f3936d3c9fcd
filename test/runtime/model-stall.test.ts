import type { LanguageModelV3StreamPart } from '@ai-sdk/provider'
import { convertArrayToReadableStream, MockLanguageModelV3 } from 'ai/test'
import { afterEach, describe, expect, it } from 'vitest'
import { collapse, harness, text, type Harness } from './helpers.js'

/**
 * A model stream that goes silent (docs/RECOVERY.md "Stuck sessions"): after
 * `retry.stallMs` of silence the call is cancelled as a `stalled` failure —
 * retried when the step had sent nothing yet, else the step and the run end
 * with it recorded. Either way the session is idle again, never stuck busy.
 */
const finish: LanguageModelV3StreamPart = {
  type: 'finish',
  finishReason: { unified: 'stop', raw: 'stop' },
  usage: {
    inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: 1, text: 1, reasoning: undefined },
  },
}

/** A stream that sends `parts` and then nothing, never closing (until cancelled). */
function silentAfter(parts: LanguageModelV3StreamPart[]): ReadableStream<LanguageModelV3StreamPart> {
  return new ReadableStream({
    start(controller) {
      for (const p of parts) controller.enqueue(p)
    },
  })
}

const answer = (words: string): LanguageModelV3StreamPart[] => [
  { type: 'text-start', id: 't' },
  { type: 'text-delta', id: 't', delta: words },
  { type: 'text-end', id: 't' },
  finish,
]

describe('a model stream that goes silent', () => {
  let h: Harness
  afterEach(() => h.close())
  const limits = { retry: { initialMs: 5, maxMs: 20, stallMs: 150 } }

  it('after its first chunk: the step ends with a recorded stalled error, the text so far kept, the session idle', async () => {
    const model = new MockLanguageModelV3({
      doStream: async () => ({
        stream: silentAfter([
          { type: 'text-start', id: 't' },
          { type: 'text-delta', id: 't', delta: 'Half an ans' },
        ]),
      }),
    })
    h = harness({ model, limits })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('hi') })
    await h.runtime.idle(id)
    expect(collapse(h.types(id)).slice(4)).toEqual([
      'message.created',
      'step.started',
      'text.started',
      'text.delta',
      'text.ended',
      'step.finished',
      'message.completed',
      'run.finished',
    ])
    const run = h.events(id).find((e) => e.type === 'run.finished')
    expect(run?.data).toMatchObject({
      outcome: 'error',
      error: { kind: 'stalled', message: 'the model sent nothing for 0.15 s' },
    })
    expect(h.store.readSession(id).some((e) => e.type === 'step.retried')).toBe(false)
    expect(model.doStreamCalls).toHaveLength(1)
  })

  it('before anything (no response at all, then a stream with nothing in it): retried, and the third call answers', async () => {
    let calls = 0
    const model = new MockLanguageModelV3({
      doStream: async ({ abortSignal }) => {
        calls++
        if (calls === 1)
          // no response: only the call's abort signal ends it
          return new Promise((_, reject) => abortSignal?.addEventListener('abort', () => reject(abortSignal.reason)))
        if (calls === 2) return { stream: silentAfter([]) }
        return { stream: convertArrayToReadableStream(answer('Whole answer')) }
      },
    })
    h = harness({ model, limits })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('hi') })
    await h.runtime.idle(id)
    const retried = h.events(id).filter((e) => e.type === 'step.retried')
    expect(retried.map((e) => e.data)).toMatchObject([
      { attempt: 1, error: 'the model sent nothing for 0.15 s' },
      { attempt: 2, error: 'the model sent nothing for 0.15 s' },
    ])
    expect(h.events(id).find((e) => e.type === 'run.finished')?.data).toMatchObject({ outcome: 'idle' })
    expect(
      h
        .events(id)
        .filter((e) => e.type === 'text.delta')
        .map((e) => e.data),
    ).toMatchObject([{ text: 'Whole answer' }])
  })

  it('a slow stream that keeps talking is not stalled, however long it takes in all', async () => {
    const model = new MockLanguageModelV3({
      doStream: async () => ({
        stream: new ReadableStream<LanguageModelV3StreamPart>({
          async start(controller) {
            controller.enqueue({ type: 'text-start', id: 't' })
            for (let i = 0; i < 6; i++) {
              await new Promise((r) => setTimeout(r, 80)) // 480 ms in all, never 150 silent
              controller.enqueue({ type: 'text-delta', id: 't', delta: `${i}` })
            }
            controller.enqueue({ type: 'text-end', id: 't' })
            controller.enqueue(finish)
            controller.close()
          },
        }),
      }),
    })
    h = harness({ model, limits })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('hi') })
    await h.runtime.idle(id)
    expect(h.events(id).find((e) => e.type === 'run.finished')?.data).toMatchObject({ outcome: 'idle' })
    expect(h.events(id).filter((e) => e.type === 'text.delta')).toHaveLength(6)
  })
})
