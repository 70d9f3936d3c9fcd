import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { convertArrayToReadableStream, MockLanguageModelV3 } from 'ai/test'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { DEFAULT_AGENTS } from '../../src/tools/agents.js'
import { createModelResolver } from '../../src/runtime/model/providers.js'
import { createScriptedModel } from '../../src/runtime/model/scripted-model.js'
import { buildSystemPrompt } from '../../src/runtime/loop/system-prompt.js'
import { collapse, harness, text, type Harness } from './helpers.js'

describe('model adapter', () => {
  let h: Harness
  afterEach(() => h.close())

  it('maps a provider stream (MockLanguageModelV3) to events, with usage and the finish reason', async () => {
    const model = new MockLanguageModelV3({
      doStream: {
        stream: convertArrayToReadableStream([
          { type: 'stream-start', warnings: [] },
          { type: 'reasoning-start', id: 'r' },
          { type: 'reasoning-delta', id: 'r', delta: 'thinking' },
          { type: 'reasoning-end', id: 'r' },
          { type: 'text-start', id: 't' },
          { type: 'text-delta', id: 't', delta: 'Hel' },
          { type: 'text-delta', id: 't', delta: 'lo' },
          { type: 'text-end', id: 't' },
          {
            type: 'finish',
            finishReason: { unified: 'stop', raw: 'stop' },
            usage: {
              inputTokens: { total: 30, noCache: 20, cacheRead: 10, cacheWrite: undefined },
              outputTokens: { total: 9, text: 5, reasoning: 4 },
            },
          },
        ]),
      },
    })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('hi') })
    await h.runtime.idle(id)
    expect(h.types(id).slice(4)).toEqual([
      'message.created',
      'step.started',
      'reasoning.started',
      'reasoning.delta',
      'reasoning.ended',
      'text.started',
      'text.delta',
      'text.delta',
      'text.ended',
      'step.finished',
      'message.completed',
      'run.finished',
    ])
    const finished = h.events(id).find((e) => e.type === 'step.finished')
    expect(finished?.data).toMatchObject({
      finishReason: 'stop',
      usage: { inputTokens: 30, outputTokens: 9, reasoningTokens: 4, cachedInputTokens: 10 },
    })
    expect(model.doStreamCalls).toHaveLength(1)
    expect(model.doStreamCalls[0]?.prompt[0]).toMatchObject({
      role: 'system',
      content: expect.stringContaining('Working directory:'),
    })
  })

  it('retries a 429 honouring retry-after (step.retried), then completes', async () => {
    const model = createScriptedModel({
      steps: [
        { error: { status: 429, message: 'slow down', retryAfterMs: 30 } },
        { error: { status: 503 } },
        { text: 'finally' },
      ],
    })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('hi') })
    await h.runtime.idle(id)
    expect(collapse(h.types(id)).slice(4)).toEqual([
      'message.created',
      'step.started',
      'step.retried',
      'step.started',
      'step.retried',
      'step.started',
      'text.started',
      'text.delta',
      'text.ended',
      'step.finished',
      'message.completed',
      'run.finished',
    ])
    const retried = h
      .events(id)
      .filter((e) => e.type === 'step.retried')
      .map((e) => e.data)
    // 30 ms from retry-after (capped at maxMs 50), then the backoff's second delay (5 ms × 2).
    expect(retried).toEqual([
      { messageId: expect.any(String), attempt: 1, delayMs: 30, error: 'slow down' },
      { messageId: expect.any(String), attempt: 2, delayMs: 10, error: 'scripted error 503' },
    ])
    expect(h.events(id).at(-1)?.data).toMatchObject({ outcome: 'idle' })
  })

  it('gives up after the retry budget and ends the run with the error', async () => {
    const model = createScriptedModel({ steps: [{ when: {}, error: { status: 500, message: 'down' } }] })
    h = harness({ model, limits: { retry: { maxRetries: 2, initialMs: 1, maxMs: 2 } } })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('hi') })
    await h.runtime.idle(id)
    expect(h.types(id).filter((t) => t === 'step.retried')).toHaveLength(2)
    expect(h.events(id).at(-1)?.data).toMatchObject({ outcome: 'error', error: { kind: 'server', message: 'down' } })
  })

  it('a cancel during the backoff ends the run cancelled without waiting', async () => {
    const model = createScriptedModel({ steps: [{ when: {}, error: { status: 429, retryAfterMs: 10_000 } }] })
    h = harness({ model, limits: { retry: { maxRetries: 3, initialMs: 10_000, maxMs: 60_000 } } })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('hi') })
    await new Promise<void>((resolve) => {
      const off = h.store.onCommit((events) => {
        if (events.some((e) => e.type === 'step.retried')) {
          off()
          resolve()
        }
      })
    })
    await h.runtime.cancel(id)
    await h.runtime.idle(id)
    expect(h.events(id).at(-1)?.data).toMatchObject({ outcome: 'cancelled' })
  })
})

describe('the scripted model', () => {
  it('keeps its own pace: a reader that falls behind finds the chunks it is late for ready at once', async () => {
    const model = createScriptedModel({ chunkSize: 1, delayMs: 20, steps: [{ text: 'abcdefghijkl' }] })
    const { stream } = await model.doStream({ prompt: [{ role: 'user', content: [{ type: 'text', text: 'go' }] }] })
    const reader = stream.getReader()
    const started = performance.now()
    await reader.read() // stream-start, due at once
    await new Promise((r) => setTimeout(r, 130)) // the reader stalls for ~6 chunks' worth
    const arrivals: number[] = []
    for (let part = await reader.read(); !part.done; part = await reader.read())
      arrivals.push(performance.now() - started)
    expect(arrivals).toHaveLength(15) // text-start, 12 deltas, text-end, finish
    // The chunks due during the stall come together, not 20 ms apart…
    const burst = arrivals.filter((t) => t - (arrivals[0] as number) < 10)
    expect(burst.length).toBeGreaterThanOrEqual(5)
    // …and none comes before its time on the model's clock.
    arrivals.forEach((t, j) => {
      expect(t).toBeGreaterThanOrEqual((j + 1) * 20 - 2)
    })
  })

  it('plays many replies on one clock: streams due in the same millisecond share one timer', async () => {
    const model = createScriptedModel({ chunkSize: 1, delayMs: 5, steps: [{ when: {}, text: 'abcdefghij' }] })
    const prompt = [{ role: 'user' as const, content: [{ type: 'text' as const, text: 'go' }] }]
    const timers = vi.spyOn(globalThis, 'setTimeout')
    try {
      const started = performance.now()
      const streams = await Promise.all(Array.from({ length: 100 }, () => model.doStream({ prompt })))
      const parts = await Promise.all(
        streams.map(async ({ stream }) => {
          let n = 0
          await stream.pipeTo(new WritableStream({ write: () => void n++ }))
          return n
        }),
      )
      expect(parts.every((n) => n === 14)).toBe(true) // stream-start, text-start, 10 deltas, text-end, finish
      // 100 replies × 13 paced parts: a timer each would be 1300. On one clock there is
      // one a millisecond the replies ran for (and one more when an earlier wake re-arms it).
      const elapsed = performance.now() - started
      expect(elapsed).toBeGreaterThanOrEqual(13 * 5 - 2)
      expect(timers.mock.calls.length).toBeLessThanOrEqual(2 * Math.ceil(elapsed))
    } finally {
      timers.mockRestore()
    }
  })

  it('outlives a timer that never fires: a stream started after a faked clock still plays, and wakes the one waiting', async () => {
    const model = createScriptedModel({ chunkSize: 1, delayMs: 5, steps: [{ when: {}, text: 'abc' }] })
    const prompt = [{ role: 'user' as const, content: [{ type: 'text' as const, text: 'go' }] }]
    const count = async (stream: ReadableStream<unknown>) => {
      let n = 0
      await stream.pipeTo(new WritableStream({ write: () => void n++ }))
      return n
    }
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    const stranded = count((await model.doStream({ prompt })).stream) // its first wait arms a fake timer
    await new Promise<void>((resolve) => queueMicrotask(resolve))
    vi.useRealTimers() // the fake timer is dropped unfired
    await new Promise((resolve) => setTimeout(resolve, 300))
    const later = count((await model.doStream({ prompt })).stream)
    expect(await later).toBe(7) // stream-start, text-start, 3 deltas, text-end, finish
    expect(await stranded).toBe(7)
  }, 5_000)

  it('keeps the latest 1000 requests in memory: a server playing a script takes thousands', async () => {
    const model = createScriptedModel({ steps: [{ when: {}, text: 'ok', times: 1005 }] })
    for (let i = 0; i < 1005; i++) {
      const prompt = [{ role: 'user' as const, content: [{ type: 'text' as const, text: `call ${i}` }] }]
      const { stream } = await model.doStream({ prompt })
      await stream.pipeTo(new WritableStream())
    }
    expect(model.calls).toHaveLength(1000)
    expect(model.calls.map((c) => c.call).slice(0, 2)).toEqual([5, 6])
    expect(model.calls.at(-1)?.call).toBe(1004)
  })
})

describe('the scripted model paced by deltas', () => {
  it('sends the first delta with the stream start, and only deltas wait their turn', async () => {
    // A delay wide enough that a busy machine's late timers (tens of ms) cannot pass for one.
    const model = createScriptedModel({ chunkSize: 2, delayMs: 60, pace: 'deltas', steps: [{ text: 'abcdef' }] })
    // Timed from before the stream's schedule starts (inside doStream): a busy machine that is slow to hand the
    // stream over cannot make a delta look early (CI: 116 ms against 118 when timed from after).
    const started = performance.now()
    const { stream } = await model.doStream({ prompt: [{ role: 'user', content: [{ type: 'text', text: 'go' }] }] })
    const reader = stream.getReader()
    const arrivals: [string, number][] = []
    for (let part = await reader.read(); !part.done; part = await reader.read())
      arrivals.push([part.value.type, performance.now() - started])
    expect(arrivals.map(([type]) => type)).toEqual([
      'stream-start',
      'text-start',
      'text-delta',
      'text-delta',
      'text-delta',
      'text-end',
      'finish',
    ])
    const at = arrivals.map(([, t]) => t)
    expect(at[2]).toBeLessThan(40) // the first delta: at once, not a delay later
    expect(at[3]).toBeGreaterThanOrEqual(58) // each later one a delay after the one before
    expect(at[4]).toBeGreaterThanOrEqual(118)
    expect((at[6] as number) - (at[4] as number)).toBeLessThan(40) // the end and finish follow the last delta, not a delay later
  })
})

describe('providers from configuration', () => {
  let h: Harness
  afterEach(() => h.close())

  it('scripted:<file> plays a script file and records every request it received', async () => {
    h = harness({ models: createModelResolver({}) })
    const script = join(h.directory, 'script.json')
    writeFileSync(
      script,
      JSON.stringify({
        chunkSize: 4,
        record: 'requests.jsonl',
        steps: [
          { when: { afterToolResult: false }, toolCalls: [{ id: 'k1', name: 'lookup', input: { query: 'q' } }] },
          { when: { afterToolResult: true }, text: 'done!' },
        ],
      }),
    )
    const id = h.session({ model: `scripted:${script}` })
    await h.runtime.submit(id, { parts: text('go') })
    await h.runtime.idle(id)
    expect(h.events(id).at(-1)?.data).toMatchObject({ outcome: 'idle' })
    const requests = readFileSync(join(h.directory, 'requests.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { call: number; prompt: { role: string }[]; tools: string[] })
    expect(requests.map((r) => [r.call, r.prompt.map((m) => m.role), r.tools])).toEqual([
      [0, ['system', 'user'], ['lookup', 'slow', 'broken']],
      [1, ['system', 'user', 'assistant', 'tool'], ['lookup', 'slow', 'broken']],
    ])
  })

  it('the model named by the input wins over the session model', async () => {
    h = harness({ models: createModelResolver({}) })
    const script = join(h.directory, 'other.json')
    writeFileSync(script, JSON.stringify({ steps: [{ text: 'from the other model' }] }))
    const id = h.session({ model: null })
    await h.runtime.submit(id, { parts: text('hi'), model: `scripted:${script}` })
    await h.runtime.idle(id)
    expect(
      h.events(id).find((e) => e.type === 'message.created' && (e.data as { role: string }).role === 'assistant')?.data,
    ).toMatchObject({
      model: `scripted:${script}`,
    })
    expect(h.events(id).at(-1)?.data).toMatchObject({ outcome: 'idle' })
  })
})

describe('system prompt', () => {
  it('holds the agent prompt, the environment and AGENTS.md (CLAUDE.md as fallback) from the repository root down', () => {
    const h0 = harness()
    const root = join(h0.directory, 'repo')
    const sub = join(root, 'pkg', 'app')
    mkdirSync(join(root, '.git'), { recursive: true })
    mkdirSync(sub, { recursive: true })
    writeFileSync(join(root, 'AGENTS.md'), 'root rules')
    writeFileSync(join(root, 'pkg', 'CLAUDE.md'), 'pkg rules')
    writeFileSync(join(h0.directory, 'AGENTS.md'), 'outside the repo: never read')
    const prompt = buildSystemPrompt(DEFAULT_AGENTS[0]!, sub, { platform: 'linux', date: '2026-01-02' })
    expect(prompt.startsWith(DEFAULT_AGENTS[0]!.prompt)).toBe(true)
    expect(prompt).toContain(`Working directory: ${sub}`)
    expect(prompt).toContain('Is directory a git repo: yes')
    expect(prompt).toContain("Today's date: 2026-01-02")
    expect(prompt.indexOf('root rules')).toBeLessThan(prompt.indexOf('pkg rules'))
    expect(prompt).not.toContain('never read')
    void h0.close()
  })
})
