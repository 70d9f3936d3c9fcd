import type { LanguageModelV3StreamPart } from '@ai-sdk/provider'
import { convertArrayToReadableStream, MockLanguageModelV3 } from 'ai/test'
import { afterEach, describe, expect, it } from 'vitest'
import { z } from 'zod'
import type { ModelHandle } from '../../src/runtime/model/adapter.js'
import { defineTool } from '../../src/tools/tool.js'
import { type Harness, harness, text } from './helpers.js'

/** An image a tool returns reaches a model that takes images; another model is told one came back. */

const PIXEL = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
}
const steps: LanguageModelV3StreamPart[][] = [
  [
    { type: 'tool-call', toolCallId: 'c1', toolName: 'snap', input: '{}' },
    { type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage },
  ],
  [{ type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage }],
]
const snap = defineTool({
  id: 'snap',
  description: 'Takes a picture.',
  parameters: z.object({}),
  execute: async () => ({
    output: 'here it is',
    attachments: [{ type: 'image', mediaType: 'image/png', data: PIXEL }],
  }),
})

let h: Harness | undefined
afterEach(() => h?.close())

describe('an image a tool returns', () => {
  it.each([
    [
      'a model that takes images gets it in the tool result',
      undefined,
      {
        type: 'content',
        value: [
          { type: 'text', text: 'here it is' },
          { type: 'image-data', data: PIXEL, mediaType: 'image/png' },
        ],
      },
    ],
    [
      'a model that reads text only gets a note',
      [] as const,
      { type: 'text', value: 'here it is\n[the tool returned 1 image; this model does not take images]' },
    ],
  ])('%s', async (_, accepts, output) => {
    const model = new MockLanguageModelV3({ doStream: steps.map((s) => ({ stream: convertArrayToReadableStream(s) })) })
    const handle: ModelHandle = { spec: 'mock:model', model, ...(accepts && { accepts }) }
    h = harness({
      models: { validate() {}, resolve: () => handle },
      tools: [snap],
      agents: [{ name: 'build', rules: [{ permission: '*', pattern: '*', action: 'allow' }] }],
    })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('take a picture') })
    await h.runtime.idle(id)
    const result = model.doStreamCalls[1]?.prompt.at(-1)
    expect(result).toMatchObject({ role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', output }] })
  })
})
