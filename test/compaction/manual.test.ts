import { afterEach, describe, expect, it } from 'vitest'
import { SUMMARY_PREFIX, SUMMARY_SUFFIX } from '../../src/runtime/loop/chat-messages.js'
import { compactionHarness, dataOf, shape, TRANSCRIPT, type CompactionHarness } from './helpers.js'

describe('manual compaction', () => {
  let h: CompactionHarness
  afterEach(() => h.close())

  it('on an idle session: a run performs it and ends idle without an ordinary model step', async () => {
    h = compactionHarness(
      [
        { when: TRANSCRIPT, text: 'SUMMARY: one and two' },
        { text: 'answer one' },
        { text: 'answer two' },
        { text: 'answer three' },
      ],
      {},
    )
    const id = h.session()
    await h.turn(id, 'one')
    await h.turn(id, 'two')
    const before = h.events(id).length

    const requested = await h.runtime.compact(id)
    expect(requested).toEqual({ compactionId: expect.any(String), seq: expect.any(Number), duplicate: false })
    expect(await h.runtime.compact(id)).toMatchObject({ compactionId: requested.compactionId, duplicate: true }) // not requested twice
    await h.runtime.idle(id)

    const added = h.events(id).slice(before)
    expect(added[0]).toMatchObject({
      type: 'compaction.requested',
      data: { reason: 'manual' },
      meta: { actor: 'user', command: 'compact' },
    })
    expect(added.map((e) => e.type).filter((t) => !t.endsWith('.delta'))).toEqual([
      'compaction.requested',
      'run.started',
      'compaction.started',
      'message.created',
      'step.started',
      'text.started',
      'text.ended',
      'step.finished',
      'message.completed',
      'compaction.completed',
      'run.finished',
    ])
    expect(dataOf(added, 'run.finished')).toEqual([{ runId: expect.any(String), outcome: 'idle' }])
    expect(h.model.calls).toHaveLength(3) // two turns and the compaction
    // The default 15k tail keeps the last turn; the summary answers the latest user message, so the session stays answered.
    const users = dataOf(h.events(id), 'input.delivered').map((d) => d.messageId)
    expect(dataOf(added, 'compaction.completed')[0]).toMatchObject({ tailStartMessageId: users[1] })
    expect(dataOf(added, 'message.created')[0]).toMatchObject({ summary: true, parentId: users[1] })

    await h.turn(id, 'three')
    expect(shape(h.model.calls[3]!.prompt).slice(1)).toEqual([
      { role: 'user', text: `${SUMMARY_PREFIX}SUMMARY: one and two${SUMMARY_SUFFIX}` },
      { role: 'user', text: 'two' },
      { role: 'assistant', text: 'answer two' },
      { role: 'user', text: 'three' },
    ])
  })

  it('a later failed compaction keeps replaying from the last completed one', async () => {
    h = compactionHarness(
      [
        { when: { ...TRANSCRIPT, call: 2 }, text: 'SUMMARY: first' },
        { when: TRANSCRIPT, error: { status: 400, message: 'bad request' } },
        { text: 'a1' },
        { text: 'a2' },
        { text: 'a3' },
        { text: 'a4' },
      ],
      { tail: 1 }, // tiny tail: everything up to the last user message is summarised
    )
    const id = h.session()
    for (const t of ['one', 'two']) await h.turn(id, t)
    await h.runtime.compact(id)
    await h.runtime.idle(id)
    await h.turn(id, 'three')
    await h.runtime.compact(id)
    await h.runtime.idle(id)
    const events = h.events(id)
    expect(dataOf(events, 'compaction.completed')).toHaveLength(1)
    expect(dataOf(events, 'compaction.failed')).toEqual([
      { compactionId: expect.any(String), error: expect.stringContaining('bad request') },
    ])
    // The second compaction summarised from the first summary on (it updates the checkpoint).
    const second = shape(h.model.calls.at(-1)!.prompt)[1]!.text
    expect(second).toMatch(
      /^<transcript>\n\[Previous summary\]: SUMMARY: first\n\n\[User\]: three\n\n\[Assistant\]: a3\n<\/transcript>/,
    )
    const context = await h.runtime.context(id)
    expect(context.messages[0]).toMatchObject({
      role: 'user',
      content: [{ text: `${SUMMARY_PREFIX}SUMMARY: first${SUMMARY_SUFFIX}` }],
    })
    expect(JSON.stringify(context.messages)).not.toContain('"one"')
    // And the loop sends exactly that (not the failed attempt's summary message, not the head).
    await h.turn(id, 'four')
    expect(shape(h.model.calls.at(-1)!.prompt).slice(1)).toEqual([
      { role: 'user', text: `${SUMMARY_PREFIX}SUMMARY: first${SUMMARY_SUFFIX}` },
      { role: 'user', text: 'three' },
      { role: 'assistant', text: 'a3' },
      { role: 'user', text: 'four' },
    ])
  })

  it('during a run: performed at the next step boundary, and the run carries on', async () => {
    let release: () => void = () => {}
    const toolRunning = new Promise<void>((started) => {
      h = compactionHarness(
        [
          { when: TRANSCRIPT, text: 'SUMMARY: said hello' },
          { text: 'hi' },
          { toolCalls: [{ id: 'c1', name: 'lookup', input: { query: 'q' } }] },
          { text: 'done' },
        ],
        {},
        { lookup: (q) => new Promise((resolve) => ((release = () => resolve(`result for ${q}`)), started())) },
      )
    })
    const id = h.session()
    await h.turn(id, 'hello')
    await h.runtime.submit(id, { parts: [{ type: 'text', text: 'go' }] })
    await toolRunning
    await h.runtime.compact(id)
    release()
    await h.runtime.idle(id)

    const types = h.types(id).filter((t) => !t.endsWith('.delta'))
    const from = types.indexOf('compaction.requested')
    expect(types.slice(from)).toEqual([
      'compaction.requested', // while the tool ran
      'tool.completed',
      'compaction.started', // at the step boundary
      'message.created',
      'step.started',
      'text.started',
      'text.ended',
      'step.finished',
      'message.completed',
      'compaction.completed',
      'message.created', // the run goes on with the answer
      'step.started',
      'text.started',
      'text.ended',
      'step.finished',
      'message.completed',
      'run.finished',
    ])
    expect(dataOf(h.events(id), 'run.finished').at(-1)).toMatchObject({ outcome: 'idle' })
    expect(shape(h.model.calls.at(-1)!.prompt).slice(1)).toEqual([
      { role: 'user', text: `${SUMMARY_PREFIX}SUMMARY: said hello${SUMMARY_SUFFIX}` },
      { role: 'user', text: 'go' },
      { role: 'assistant', text: 'call:lookup' },
      { role: 'tool', text: 'result' },
    ])
  })

  it('an unknown session is an error and appends nothing', async () => {
    h = compactionHarness([], {})
    await expect(h.runtime.compact('ses_missing')).rejects.toThrow(
      expect.objectContaining({ code: 'SESSION_NOT_FOUND' }),
    )
  })
})
