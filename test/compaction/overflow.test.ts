import { afterEach, describe, expect, it } from 'vitest'
import { SUMMARY_PREFIX, SUMMARY_SUFFIX } from '../../src/runtime/loop/chat-messages.js'
import { compactionHarness, dataOf, shape, SPEC, TRANSCRIPT, type CompactionHarness } from './helpers.js'

const OVERFLOW = { error: { kind: 'context_overflow' as const } }

describe('context overflow reported by the provider', () => {
  let h: CompactionHarness
  afterEach(() => h.close())

  it('compacts once and retries the same step', async () => {
    h = compactionHarness(
      [{ when: TRANSCRIPT, text: 'SUMMARY: greeted' }, { text: 'hi' }, OVERFLOW, { text: 'done' }],
      {},
    )
    const id = h.session()
    await h.turn(id, 'hello')
    await h.turn(id, 'go')
    const types = h.types(id)
    expect(types.slice(types.lastIndexOf('input.delivered') + 1)).toEqual([
      'message.created',
      'step.started',
      'step.finished',
      'message.completed', // the overflowed step, closed with its error
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
      'message.created', // the same step again
      'step.started',
      'text.started',
      'text.delta',
      'text.ended',
      'step.finished',
      'message.completed',
      'run.finished',
    ])
    const events = h.events(id)
    expect(dataOf(events, 'compaction.requested')).toEqual([{ compactionId: expect.any(String), reason: 'overflow' }])
    expect(dataOf(events, 'message.completed').find((d) => d.error)).toMatchObject({
      error: { kind: 'context_overflow' },
    })
    expect(dataOf(events, 'run.finished').at(-1)).toEqual({ runId: expect.any(String), outcome: 'idle' })
    // The retry sent summary + tail ("go"), not the head and not the empty overflowed message.
    expect(shape(h.model.calls[3]!.prompt).slice(1)).toEqual([
      { role: 'user', text: `${SUMMARY_PREFIX}SUMMARY: greeted${SUMMARY_SUFFIX}` },
      { role: 'user', text: 'go' },
    ])
  })

  it('a second overflow in the same step ends the run with a clear error', async () => {
    h = compactionHarness(
      [{ when: TRANSCRIPT, text: 'SUMMARY: greeted' }, { text: 'hi' }, OVERFLOW, OVERFLOW, { text: 'never' }],
      {},
    )
    const id = h.session()
    await h.turn(id, 'hello')
    await h.turn(id, 'go')
    const events = h.events(id)
    expect(dataOf(events, 'compaction.completed')).toHaveLength(1)
    expect(dataOf(events, 'run.finished').at(-1)).toEqual({
      runId: expect.any(String),
      outcome: 'error',
      error: {
        kind: 'CONTEXT_OVERFLOW',
        message: expect.stringContaining('still exceeds the model context window after compacting'),
      },
    })
    expect(h.model.calls).toHaveLength(4) // hello, go, compaction, go again — nothing after
  })

  it('a compaction request that is itself too large shrinks a bounded number of times, then fails', async () => {
    const window = { models: { [SPEC]: { contextWindow: 2000 } }, maxShrinks: 2 }
    h = compactionHarness(
      [{ when: TRANSCRIPT, ...OVERFLOW }, { text: `long answer ${'z'.repeat(2400)}` }, OVERFLOW],
      window,
    )
    const id = h.session()
    await h.turn(id, 'hello')
    await h.turn(id, 'go')
    const events = h.events(id)
    const attempts = h.model.calls.filter((c) => shape(c.prompt)[1]?.text.includes('<transcript>'))
    expect(attempts).toHaveLength(3) // the first try and two shrinks
    const sizes = attempts.map((c) => shape(c.prompt)[1]!.text.length)
    expect(sizes[1]!).toBeLessThan(sizes[0]!)
    expect(sizes[2]!).toBeLessThan(sizes[1]!)
    expect(dataOf(events, 'compaction.failed')).toEqual([
      {
        compactionId: expect.any(String),
        error: expect.stringContaining('too large for the model even after 2 shrinks'),
      },
    ])
    expect(dataOf(events, 'compaction.completed')).toEqual([])
    // Each attempt is its own recorded summary message, closed with the overflow; none is ever replayed.
    expect(dataOf(events, 'message.created').filter((d) => d.summary)).toHaveLength(3)
    expect(dataOf(events, 'run.finished').at(-1)).toMatchObject({
      outcome: 'error',
      error: { kind: 'CONTEXT_OVERFLOW', message: expect.stringContaining('compaction failed') },
    })
    const context = await h.runtime.context(id)
    expect(context.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user']) // history unchanged
  })

  it('auto: false — no automatic and no overflow compaction; the overflow ends the run saying so', async () => {
    const off = { auto: false, models: { [SPEC]: { contextWindow: 1000, reserved: 200 } } }
    h = compactionHarness(
      [{ when: TRANSCRIPT, text: 'SUMMARY: manual' }, { text: 'hi', usage: { input: 900, output: 10 } }, OVERFLOW],
      off,
    )
    const id = h.session()
    await h.turn(id, 'hello')
    await h.turn(id, 'go') // 910 is past the usable 800: auto would compact here
    const events = h.events(id)
    expect(events.filter((e) => e.type.startsWith('compaction.'))).toEqual([])
    expect(dataOf(events, 'run.finished').at(-1)).toMatchObject({
      outcome: 'error',
      error: { kind: 'CONTEXT_OVERFLOW', message: expect.stringContaining('automatic compaction is off') },
    })
    // Manual compaction still works.
    await h.runtime.compact(id)
    await h.runtime.idle(id)
    expect(dataOf(h.events(id), 'compaction.completed')).toHaveLength(1)
  })
})
