import { afterEach, describe, expect, it } from 'vitest'
import { stateAt } from '../../src/projections/time-travel/time-travel.js'
import { COMPACTION_SYSTEM } from '../../src/runtime/compaction/prompt.js'
import { SUMMARY_PREFIX, SUMMARY_SUFFIX, toChatMessages } from '../../src/runtime/loop/chat-messages.js'
import { viewAt } from '../../src/projections/time-travel/time-travel.js'
import { compactionHarness, dataOf, shape, SPEC, TRANSCRIPT, type CompactionHarness } from './helpers.js'

/**
 * Window 1000, reserve 200 → usable 800; tail budget 100. The provider
 * reports usage; the estimate adds what it has not counted yet (4 chars ≈ 1 token).
 */
const config = { models: { [SPEC]: { contextWindow: 1000, reserved: 200 } }, tail: 100 }
const LONG = `answer two ${'y'.repeat(400)}`

const steps = [
  { when: TRANSCRIPT, text: 'SUMMARY: the user said one, two, three', usage: { input: 60, output: 12 } },
  { text: 'answer one', usage: { input: 700, output: 50 } }, // 750
  { toolCalls: [{ id: 'c1', name: 'lookup', input: { query: 'x' } }], usage: { input: 760, output: 10 } }, // 770 + result (3) = 773
  { text: LONG, usage: { input: 780, output: 19 } }, // 799
  { text: 'answer three', usage: { input: 300, output: 10 } },
]

describe('automatic compaction', () => {
  let h: CompactionHarness
  afterEach(() => h.close())

  it('triggers before the step whose context passes the usable window, not before', async () => {
    h = compactionHarness(steps, config)
    const id = h.session()
    await h.turn(id, 'one')
    await h.turn(id, 'two') // 750 + "two" (5) = 755, then 773 after the tool: below 800
    expect(dataOf(h.events(id), 'compaction.requested')).toEqual([])
    await h.turn(id, 'three') // 799 + "three" (6) = 805 ≥ 800
    const events = h.events(id)
    expect(dataOf(events, 'compaction.requested')).toEqual([{ compactionId: expect.any(String), reason: 'auto' }])
    expect(dataOf(events, 'compaction.completed')[0]).toMatchObject({ tokensBefore: 805 })

    // The third turn: the compaction task, fully recorded, then the ordinary step.
    const types = h.types(id)
    const third = types.slice(types.lastIndexOf('input.delivered'))
    expect(third).toEqual([
      'input.delivered',
      'compaction.requested',
      'compaction.started',
      'message.created',
      'step.started',
      'text.started',
      'text.delta',
      'text.ended',
      'step.finished',
      'message.completed',
      'compaction.completed',
      'message.created',
      'step.started',
      'text.started',
      'text.delta',
      'text.ended',
      'step.finished',
      'message.completed',
      'run.finished',
    ])
    const summary = dataOf(events, 'message.created').find((d) => d.summary === true)
    expect(summary).toMatchObject({ role: 'assistant', agent: 'compaction', model: SPEC, summary: true })
    expect(summary?.parentId).toBeUndefined()
    expect(dataOf(events, 'run.finished').at(-1)).toMatchObject({ outcome: 'idle' })
  })

  it('keeps the tail from a user message, sends the head as a transcript to the tool-less agent, and replays summary + tail', async () => {
    h = compactionHarness(steps, config)
    const id = h.session()
    for (const t of ['one', 'two', 'three']) await h.turn(id, t)
    const events = h.events(id)
    const users = dataOf(events, 'input.delivered').map((d) => d.messageId)
    // [three] is 6 tokens; adding the 107-token answer before it passes the 100-token tail budget,
    // and that answer is no user boundary anyway: the tail is the third turn alone.
    expect(dataOf(events, 'compaction.completed')[0]).toMatchObject({ tailStartMessageId: users[2] })

    const calls = h.model.calls
    expect(calls).toHaveLength(5)
    const compaction = calls[3]!
    expect(compaction.tools).toEqual([]) // tool-less
    const [system, request] = shape(compaction.prompt)
    expect(system).toEqual({ role: 'system', text: COMPACTION_SYSTEM })
    expect(request?.role).toBe('user')
    expect(request?.text).toContain(
      '[User]: one\n\n[Assistant]: answer one\n\n[User]: two\n\n[Assistant tool call]: lookup({"query":"x"})\n\n[Tool result]: result for x',
    )
    expect(request?.text).not.toContain('three')

    // The next request: system, the summary (as user context), then the tail — not the head.
    expect(shape(calls[4]!.prompt).slice(1)).toEqual([
      { role: 'user', text: `${SUMMARY_PREFIX}SUMMARY: the user said one, two, three${SUMMARY_SUFFIX}` },
      { role: 'user', text: 'three' },
    ])
  })

  it('time travel before the compaction shows the full history; the context at each step is what the model saw', async () => {
    h = compactionHarness(steps, config)
    const id = h.session()
    for (const t of ['one', 'two', 'three']) await h.turn(id, t)
    const events = h.events(id)
    const requested = events.find((e) => e.type === 'compaction.requested')!
    const before = requested.seq - 1

    const past = stateAt(h.store, id, before)
    const now = stateAt(h.store, id)
    // Exactly the messages that existed then, as they are now: the head is still in the log.
    const then = new Set(
      events
        .filter((e) => e.seq < requested.seq && (e.type === 'message.created' || e.type === 'input.delivered'))
        .map((e) => (e.data as { messageId: string }).messageId),
    )
    const existing = now.messages.filter((m) => then.has(m.id))
    expect(past.messages).toEqual(existing)
    expect(past.messages.filter((m) => m.role === 'user')).toHaveLength(3)
    expect(past.messages.some((m) => m.summary)).toBe(false)
    const pastContext = await h.runtime.context(id, before)
    expect(pastContext.messages).toEqual(toChatMessages(viewAt(h.store, id, before)))
    expect(pastContext.messages.map((m) => m.role)).toEqual([
      'user',
      'assistant',
      'user',
      'assistant',
      'tool',
      'assistant',
      'user',
    ])

    // Every step.started's digest equals the digest of the context compiled just before it.
    for (const started of events.filter((e) => e.type === 'step.started' && e.meta.actor === 'model')) {
      const msg = events.find(
        (e) =>
          e.type === 'message.created' &&
          (e.data as { messageId: string }).messageId === (started.data as { messageId: string }).messageId,
      )!
      if ((msg.data as { summary?: boolean }).summary) continue // the compaction request is not the session's context
      const context = await h.runtime.context(id, started.seq - 1)
      expect(context.digest).toBe((started.data as { contextDigest: string }).contextDigest)
    }
    // Now: summary then tail.
    const current = await h.runtime.context(id)
    expect(current.messages[0]).toMatchObject({
      role: 'user',
      content: [{ type: 'text', text: expect.stringContaining(SUMMARY_PREFIX) }],
    })
    expect(h.model.calls[4]!.prompt.length).toBe(current.messages.length - 1 + 1) // system + all but the answer to three
  })
})
