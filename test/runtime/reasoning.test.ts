import type { LanguageModelV3StreamPart } from '@ai-sdk/provider'
import { convertArrayToReadableStream, MockLanguageModelV3 } from 'ai/test'
import { afterEach, describe, expect, it } from 'vitest'
import { type Harness, harness, text } from './helpers.js'

/**
 * Reasoning is replayed where the provider needs it: the provider metadata
 * that came with a reasoning part (a signature, an item id) is kept on
 * reasoning.ended, and the part goes back to the model with it on the next
 * step. Reasoning without such metadata is not sent back.
 */

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 1 },
}
const thinkThenCall = (metadata: boolean): LanguageModelV3StreamPart[] => [
  { type: 'reasoning-start', id: 'r1', ...(metadata && { providerMetadata: { anthropic: { redacted: false } } }) },
  { type: 'reasoning-delta', id: 'r1', delta: 'The user wants ' },
  { type: 'reasoning-delta', id: 'r1', delta: 'a lookup.' },
  ...(metadata
    ? [
        {
          type: 'reasoning-delta',
          id: 'r1',
          delta: '',
          providerMetadata: { anthropic: { signature: 'sig-1' } },
        } as const,
      ]
    : []),
  { type: 'reasoning-end', id: 'r1' },
  { type: 'tool-call', toolCallId: 'c1', toolName: 'lookup', input: '{"query":"x"}' },
  { type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_use' }, usage },
]
const answer: LanguageModelV3StreamPart[] = [
  { type: 'text-start', id: 't' },
  { type: 'text-delta', id: 't', delta: 'Found it.' },
  { type: 'text-end', id: 't' },
  { type: 'finish', finishReason: { unified: 'stop', raw: 'end_turn' }, usage },
]

let h: Harness | undefined
afterEach(() => h?.close())

describe('reasoning', () => {
  it('comes back to the model with its provider metadata on the next step', async () => {
    const model = new MockLanguageModelV3({
      doStream: [thinkThenCall(true), answer].map((s) => ({ stream: convertArrayToReadableStream(s) })),
    })
    h = harness({ model, agents: [{ name: 'build', rules: [{ permission: '*', pattern: '*', action: 'allow' }] }] })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('look it up') })
    await h.runtime.idle(id)

    const ended = h.events(id).find((e) => e.type === 'reasoning.ended')
    expect(ended?.data).toMatchObject({ providerMetadata: { anthropic: { redacted: false, signature: 'sig-1' } } })
    const assistant = model.doStreamCalls[1]?.prompt.find((m) => m.role === 'assistant')
    expect(assistant?.content).toEqual([
      {
        type: 'reasoning',
        text: 'The user wants a lookup.',
        providerOptions: { anthropic: { redacted: false, signature: 'sig-1' } },
      },
      { type: 'tool-call', toolCallId: 'c1', toolName: 'lookup', input: { query: 'x' } },
    ])
  })

  it('without provider metadata it stays in the log only', async () => {
    const model = new MockLanguageModelV3({
      doStream: [thinkThenCall(false), answer].map((s) => ({ stream: convertArrayToReadableStream(s) })),
    })
    h = harness({ model, agents: [{ name: 'build', rules: [{ permission: '*', pattern: '*', action: 'allow' }] }] })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('look it up') })
    await h.runtime.idle(id)
    const assistant = model.doStreamCalls[1]?.prompt.find((m) => m.role === 'assistant')
    expect(assistant?.content.map((p) => p.type)).toEqual(['tool-call'])
  })
})
