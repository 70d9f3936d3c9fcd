import { LLMock } from '@copilotkit/aimock'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createModelResolver } from '../../src/runtime/model/providers.js'
import { collapse, harness, text, type Harness } from './helpers.js'

/**
 * The runtime against a real OpenAI-compatible HTTP server (@copilotkit/aimock
 * on 127.0.0.1): chat completions (compatible:) and the Responses API (openai:).
 */

const READ_THEN_ANSWER = [
  'session.created',
  'input.accepted',
  'run.started',
  'input.delivered',
  'message.created',
  'step.started',
  'tool.input.started',
  'tool.input.delta',
  'step.finished',
  'message.completed',
  'tool.called',
  'tool.completed',
  'message.created',
  'step.started',
  'text.started',
  'text.delta',
  'text.ended',
  'step.finished',
  'message.completed',
  'run.finished',
]

describe('over HTTP (aimock)', () => {
  let mock: LLMock
  let h: Harness

  beforeAll(async () => {
    mock = new LLMock({ port: 0, host: '127.0.0.1', chunkSize: 8 })
    mock.on(
      { userMessage: 'weather', hasToolResult: false },
      {
        toolCalls: [{ id: 'call_1', name: 'lookup', arguments: '{"query":"paris weather"}' }],
        usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
      },
    )
    mock.on({ userMessage: 'weather', hasToolResult: true }, { content: 'It is 21C in Paris.' })
    await mock.start()
  })
  afterAll(async () => {
    await mock.stop()
  })
  afterEach(async () => {
    mock.clearRequests()
    await h.close()
  })

  const resolver = () =>
    createModelResolver({
      baseURL: `${mock.url}/v1`,
      apiKey: 'test-key',
      openaiBaseURL: `${mock.url}/v1`,
      openaiApiKey: 'test-key',
      anthropicBaseURL: `${mock.url}/v1`,
      anthropicApiKey: 'test-key',
      googleBaseURL: `${mock.url}/v1beta`,
      googleApiKey: 'test-key',
    })

  // each provider's own API, as aimock serves it: the path of the first request, and whether call ids travel
  const PROVIDERS = [
    { spec: 'anthropic:claude-sonnet-4-5', api: 'the Anthropic Messages API', path: '/v1/messages', callIds: true },
    {
      spec: 'google:gemini-2.5-flash',
      api: 'the Gemini API',
      path: '/v1beta/models/gemini-2.5-flash:streamGenerateContent',
      callIds: false, // Gemini names no call ids: the SDK makes them
    },
  ]
  for (const { spec, api, path, callIds } of PROVIDERS) {
    it(`streams text and a tool call round trip through ${api} (${spec})`, async () => {
      h = harness({ models: resolver() })
      const id = h.session({ model: spec })
      await h.runtime.submit(id, { parts: text('what is the weather in paris?') })
      await h.runtime.idle(id)

      const events = h.events(id)
      expect(events.at(-1)?.data).toMatchObject({ outcome: 'idle' })
      const called = events.find((e) => e.type === 'tool.called')?.data as { callId: string } | undefined
      expect(called).toMatchObject({ tool: 'lookup', input: { query: 'paris weather' } })
      if (callIds) expect(called?.callId).toBe('call_1')
      expect(events.find((e) => e.type === 'tool.completed')?.data).toMatchObject({
        output: 'result for paris weather',
      })
      const answer = events
        .filter((e) => e.type === 'text.delta')
        .map((e) => (e.data as { text: string }).text)
        .join('')
      expect(answer).toBe('It is 21C in Paris.')
      expect(events.filter((e) => e.type === 'text.delta').length).toBeGreaterThan(1) // streamed, not whole

      const requests = mock.getRequests()
      expect(requests).toHaveLength(2)
      expect(requests[0]?.path?.split('?')[0]).toBe(path)
      // the second request carries the call and its result back to the model
      expect(JSON.stringify(requests[1]?.body)).toContain('result for paris weather')
      if (callIds) expect(JSON.stringify(requests[1]?.body)).toContain('call_1')
    })
  }

  for (const spec of ['compatible:gpt-4o-mini', 'openai:gpt-4o-mini']) {
    it(`read then answer through ${spec.startsWith('openai') ? 'the Responses API' : 'chat completions'}`, async () => {
      h = harness({ models: resolver() })
      const id = h.session({ model: spec })
      await h.runtime.submit(id, { parts: text('what is the weather in paris?') })
      await h.runtime.idle(id)

      expect(collapse(h.types(id))).toEqual(READ_THEN_ANSWER)
      const events = h.events(id)
      expect(events.find((e) => e.type === 'tool.called')?.data).toMatchObject({
        callId: 'call_1',
        tool: 'lookup',
        input: { query: 'paris weather' },
      })
      const answer = events
        .filter((e) => e.type === 'text.delta')
        .map((e) => (e.data as { text: string }).text)
        .join('')
      expect(answer).toBe('It is 21C in Paris.')
      expect(events.at(-1)?.data).toMatchObject({ outcome: 'idle' })

      const requests = mock.getRequests()
      expect(requests).toHaveLength(2)
      expect(requests[0]?.path).toBe(spec.startsWith('openai') ? '/v1/responses' : '/v1/chat/completions')
      // The second request carries the tool result under the original call id.
      expect(JSON.stringify(requests[1]?.body)).toContain('call_1')
      expect(JSON.stringify(requests[1]?.body)).toContain('result for paris weather')
    })
  }

  it('a 429 is retried (step.retried) and the run then completes', async () => {
    h = harness({ models: resolver() })
    const id = h.session({ model: 'compatible:gpt-4o-mini' })
    mock.nextRequestError(429, { message: 'Rate limit reached', type: 'rate_limit_error' })
    await h.runtime.submit(id, { parts: text('weather please') })
    await h.runtime.idle(id)

    const types = collapse(h.types(id))
    expect(types.slice(0, 9)).toEqual([
      'session.created',
      'input.accepted',
      'run.started',
      'input.delivered',
      'message.created',
      'step.started',
      'step.retried',
      'step.started',
      'tool.input.started',
    ])
    expect(types.at(-1)).toBe('run.finished')
    const retried = h.events(id).find((e) => e.type === 'step.retried')
    expect(retried?.data).toMatchObject({ attempt: 1, error: expect.stringContaining('Rate limit') })
    expect(h.events(id).at(-1)?.data).toMatchObject({ outcome: 'idle' })
    expect(mock.getRequests()).toHaveLength(3)
  })
})
