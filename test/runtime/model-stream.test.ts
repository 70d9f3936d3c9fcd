import { APICallError, type LanguageModelV3StreamPart } from '@ai-sdk/provider'
import { convertArrayToReadableStream, MockLanguageModelV3 } from 'ai/test'
import { describe, expect, it } from 'vitest'
import { readModelStep, type ModelRequest, type StepPart } from '../../src/runtime/model/adapter.js'

/**
 * The adapter reads the provider's doStream itself (no streamText): these
 * specs pin what streamText used to do for it — tool input parsing, tool
 * choice none, errors thrown or streamed, abort, usage — part by part.
 */

const finish = (unified: 'stop' | 'tool-calls' = 'stop'): LanguageModelV3StreamPart => ({
  type: 'finish',
  finishReason: { unified, raw: unified },
  usage: {
    inputTokens: { total: 12, noCache: 8, cacheRead: 4, cacheWrite: undefined },
    outputTokens: { total: 7, text: 5, reasoning: 2 },
  },
})

const request = (over: Partial<ModelRequest> = {}): ModelRequest => ({
  system: 'sys',
  messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
  tools: [
    { name: 'read', description: 'reads', parameters: { type: 'object', properties: { path: { type: 'string' } } } },
  ],
  toolChoice: 'auto',
  ...over,
})

/** A provider that sends a text start and one delta, then nothing: only a cancel ends its stream. */
function stalledModel(onCancel: (reason: unknown) => void) {
  return new MockLanguageModelV3({
    doStream: async () => ({
      stream: new ReadableStream<LanguageModelV3StreamPart>({
        start(c) {
          c.enqueue({ type: 'text-start', id: 't' })
          c.enqueue({ type: 'text-delta', id: 't', delta: 'part' })
        },
        cancel: onCancel,
      }),
    }),
  })
}

async function collect(
  parts: LanguageModelV3StreamPart[] | (() => never),
  req = request(),
  signal = new AbortController().signal,
) {
  const model = new MockLanguageModelV3({
    doStream: Array.isArray(parts) ? { stream: convertArrayToReadableStream(parts) } : parts,
  })
  const out: StepPart[] = []
  await readModelStep({ spec: 'mock', model, settings: { maxOutputTokens: 64 } }, req, signal, (part) => out.push(part))
  return { out, calls: model.doStreamCalls }
}

describe('the model adapter reading doStream', () => {
  it('sends the whole prompt, the tools as function tools, tool choice and the settings to the provider', async () => {
    const { calls } = await collect([finish()])
    const call = calls[0]
    expect(call?.prompt[0]).toEqual({ role: 'system', content: 'sys' })
    expect(call?.prompt[1]).toEqual({ role: 'user', content: [{ type: 'text', text: 'hi' }] })
    expect(call?.tools).toEqual([
      {
        type: 'function',
        name: 'read',
        description: 'reads',
        inputSchema: { type: 'object', properties: { path: { type: 'string' } } },
      },
    ])
    expect(call?.toolChoice).toEqual({ type: 'auto' })
    expect(call?.maxOutputTokens).toBe(64)
    expect(call?.abortSignal).toBeInstanceOf(AbortSignal)
  })

  it('sends no tools when the request has none', async () => {
    const { calls } = await collect([finish()], request({ tools: [] }))
    expect(calls[0]?.tools).toBeUndefined()
    expect(calls[0]?.toolChoice).toBeUndefined()
  })

  it('maps usage and the unified finish reason', async () => {
    const { out } = await collect([finish('tool-calls')])
    expect(out).toEqual([
      {
        type: 'finish',
        finishReason: 'tool-calls',
        usage: { inputTokens: 12, outputTokens: 7, reasoningTokens: 2, cachedInputTokens: 4 },
      },
    ])
  })

  it('parses tool input as JSON, reads empty input as {}, and passes input that is not JSON on as text', async () => {
    const { out } = await collect([
      { type: 'tool-input-start', id: 'c1', toolName: 'read' },
      { type: 'tool-input-delta', id: 'c1', delta: '{"path": "a"}' },
      { type: 'tool-input-end', id: 'c1' },
      { type: 'tool-call', toolCallId: 'c1', toolName: 'read', input: '{"path": "a"}' },
      { type: 'tool-call', toolCallId: 'c2', toolName: 'read', input: '  ' },
      { type: 'tool-call', toolCallId: 'c3', toolName: 'read', input: '{"path": ' },
      { type: 'tool-call', toolCallId: 'c4', toolName: 'nope', input: '' },
      finish('tool-calls'),
    ])
    expect(out.slice(0, 2)).toEqual([
      { type: 'tool-input-start', callId: 'c1', tool: 'read' },
      { type: 'tool-input-delta', callId: 'c1', delta: '{"path": "a"}' },
    ])
    expect(out.filter((p) => p.type === 'tool-call')).toEqual([
      { type: 'tool-call', callId: 'c1', tool: 'read', input: { path: 'a' }, rawInput: '{"path":"a"}' },
      { type: 'tool-call', callId: 'c2', tool: 'read', input: {}, rawInput: '{}' },
      { type: 'tool-call', callId: 'c3', tool: 'read', input: '{"path": ', rawInput: '{"path": ' },
      { type: 'tool-call', callId: 'c4', tool: 'nope', input: '', rawInput: '' },
    ])
  })

  it('with tool choice none, drops the tool parts a provider sends anyway and fails the step', async () => {
    const { out } = await collect(
      [
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: 'ok' },
        { type: 'text-end', id: 't' },
        { type: 'tool-input-start', id: 'c1', toolName: 'read' },
        { type: 'tool-input-delta', id: 'c1', delta: '{}' },
        { type: 'tool-call', toolCallId: 'c1', toolName: 'read', input: '{}' },
        finish('tool-calls'),
      ],
      request({ toolChoice: 'none' }),
    )
    expect(out.map((p) => p.type)).toEqual(['text-start', 'text-delta', 'text-end', 'error', 'finish'])
    expect(out[3]).toMatchObject({ failure: { kind: 'provider', retryable: false } })
    expect(out[4]).toMatchObject({ finishReason: 'error' })
  })

  it('turns a thrown provider error and a streamed error into error parts the retry policy can judge', async () => {
    const thrown = await collect(() => {
      throw new APICallError({
        message: 'slow down',
        url: 'http://x',
        requestBodyValues: {},
        statusCode: 429,
        responseHeaders: { 'retry-after': '2' },
      })
    })
    expect(thrown.out).toEqual([
      {
        type: 'error',
        failure: { kind: 'rate_limited', message: 'slow down', status: 429, retryAfterMs: 2000, retryable: true },
      },
    ])
    const streamed = await collect([{ type: 'error', error: new Error('boom') }, finish()])
    expect(streamed.out[0]).toEqual({ type: 'error', failure: { kind: 'provider', message: 'boom', retryable: false } })
  })

  it('what the reader of the parts throws is its own: it propagates, and the provider stream is released', async () => {
    let cancelled = false
    const model = stalledModel(() => {
      cancelled = true
    })
    const parts: string[] = []
    const reading = readModelStep({ spec: 'mock', model }, request(), new AbortController().signal, (part) => {
      parts.push(part.type)
      if (part.type === 'text-delta') throw new Error('a bug in the step')
    })
    await expect(reading).rejects.toThrow('a bug in the step') // not an error part: the provider did nothing wrong
    expect(parts).toEqual(['text-start', 'text-delta'])
    expect(cancelled).toBe(true)
  })

  it('on abort, stops reading, cancels the provider stream and ends with aborted', async () => {
    const controller = new AbortController()
    let cancelled: unknown = 'not cancelled'
    const model = stalledModel((reason) => {
      cancelled = reason
    })
    const out: StepPart[] = []
    await readModelStep({ spec: 'mock', model }, request(), controller.signal, (part) => {
      out.push(part)
      if (part.type === 'text-delta') controller.abort(new Error('user cancelled'))
    })
    expect(out.map((p) => p.type)).toEqual(['text-start', 'text-delta', 'aborted'])
    expect(cancelled).toEqual(new Error('user cancelled'))
  })
})
