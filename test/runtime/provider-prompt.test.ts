import { streamText, type ModelMessage } from 'ai'
import { convertArrayToReadableStream, MockLanguageModelV3 } from 'ai/test'
import { describe, expect, it } from 'vitest'
import type { ChatMessage } from '../../src/runtime/loop/chat-messages.js'
import { providerPrompt } from '../../src/runtime/model/adapter.js'

/**
 * The adapter builds the provider prompt itself (each message converted
 * once) instead of letting streamText convert the whole history every step.
 * It must be exactly what streamText would have sent.
 */
describe('provider prompt', () => {
  it('equals the prompt streamText builds from the same messages', async () => {
    const messages: ChatMessage[] = [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'look at this' },
          { type: 'file', data: 'data:image/png;base64,iVBORw0KGgo=', mediaType: 'image/png', filename: 'a.png' },
        ],
      },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'checking' },
          { type: 'tool-call', toolCallId: 'c1', toolName: 'lookup', input: { query: 'x' } },
          { type: 'tool-call', toolCallId: 'c2', toolName: 'lookup', input: {} },
        ],
      },
      {
        role: 'tool',
        content: [
          { type: 'tool-result', toolCallId: 'c1', toolName: 'lookup', output: { type: 'text', value: 'found' } },
          {
            type: 'tool-result',
            toolCallId: 'c2',
            toolName: 'lookup',
            output: { type: 'error-text', value: 'Error (invalid): bad' },
          },
        ],
      },
      { role: 'assistant', content: [{ type: 'text', text: 'done' }] },
      { role: 'user', content: [{ type: 'text', text: 'thanks' }] },
    ]
    const model = new MockLanguageModelV3({
      doStream: {
        stream: convertArrayToReadableStream([
          {
            type: 'finish',
            finishReason: { unified: 'stop', raw: 'stop' },
            usage: {
              inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
              outputTokens: { total: 1, text: 1, reasoning: 0 },
            },
          },
        ]),
      },
    })
    const result = streamText({ model, system: 'be brief', messages: messages as ModelMessage[], maxRetries: 0 })
    for await (const _ of result.fullStream) void _
    const sdk = model.doStreamCalls[0]?.prompt
    const ours = providerPrompt({ system: 'be brief', messages, tools: [], toolChoice: 'auto' })
    expect(JSON.parse(JSON.stringify(ours))).toEqual(JSON.parse(JSON.stringify(sdk)))
  })
})
