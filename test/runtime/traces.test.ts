import { afterEach, describe, expect, it } from 'vitest'
import { createScriptedModel } from '../../src/runtime/model/scripted-model.js'
import { harness, text, type Harness } from './helpers.js'

/** The two canonical traces of docs/TRACES.md, pinned event by event. */
describe('canonical traces', () => {
  let h: Harness
  afterEach(() => h.close())

  it('direct answer: one model call, text streamed in deltas, run ends idle', async () => {
    const model = createScriptedModel({
      chunkSize: 8,
      steps: [{ text: 'Hello there, friend.', usage: { input: 12, output: 5 } }],
    })
    h = harness({ model })
    const id = h.session()
    const accepted = await h.runtime.submit(id, { parts: text('hi') })
    await h.runtime.idle(id)

    expect(h.types(id)).toEqual([
      'session.created',
      'input.accepted',
      'run.started',
      'input.delivered',
      'message.created',
      'step.started',
      'text.started',
      'text.delta',
      'text.delta',
      'text.delta',
      'text.ended',
      'step.finished',
      'message.completed',
      'run.finished',
    ])
    const events = h.events(id)
    expect(accepted).toEqual({ inputId: expect.stringMatching(/^in_/), seq: events[1]?.seq, duplicate: false })
    expect(events.filter((e) => e.type === 'text.delta').map((e) => (e.data as { text: string }).text)).toEqual([
      'Hello th',
      'ere, fri',
      'end.',
    ])
    expect(events.at(-1)?.data).toEqual({ runId: expect.stringMatching(/^run_/), outcome: 'idle' })
    expect(model.calls).toHaveLength(1)
    const completed = events.find((e) => e.type === 'message.completed')
    expect(completed?.data).toMatchObject({ finish: 'stop', usage: { inputTokens: 12, outputTokens: 5 } })
  })

  it('read then answer: two model calls; the second prompt carries the tool result under the original call id', async () => {
    const model = createScriptedModel({
      chunkSize: 8,
      steps: [
        { when: { afterToolResult: false }, toolCalls: [{ id: 'call_42', name: 'lookup', input: { query: 'paris' } }] },
        { when: { afterToolResult: true }, text: 'Paris it is.' },
      ],
    })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('what about paris?') })
    await h.runtime.idle(id)

    expect(h.types(id)).toEqual([
      'session.created',
      'input.accepted',
      'run.started',
      'input.delivered',
      'message.created',
      'step.started',
      'tool.input.started',
      'tool.input.delta',
      'tool.input.delta',
      'tool.input.delta',
      'step.finished',
      'message.completed',
      'tool.called',
      'tool.completed',
      'message.created',
      'step.started',
      'text.started',
      'text.delta',
      'text.delta',
      'text.ended',
      'step.finished',
      'message.completed',
      'run.finished',
    ])
    expect(model.calls).toHaveLength(2)
    const second = model.calls[1]?.prompt ?? []
    expect(second.slice(1)).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'what about paris?' }] },
      {
        role: 'assistant',
        content: [{ type: 'tool-call', toolCallId: 'call_42', toolName: 'lookup', input: { query: 'paris' } }],
      },
      {
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId: 'call_42',
            toolName: 'lookup',
            output: { type: 'text', value: 'result for paris' },
          },
        ],
      },
    ])
    const finished = h.events(id).at(-1)
    expect(finished?.data).toMatchObject({ outcome: 'idle' })
  })
})
