import { afterEach, describe, expect, it } from 'vitest'
import { NOT_STARTED_BEFORE_RESTART } from '../../src/runtime/loop/tool-exec.js'
import type { EventType } from '../../src/events/catalogue.js'
import { getParts } from '../../src/projections/queries/read-model.js'
import { createScriptedModel } from '../../src/runtime/model/scripted-model.js'
import { harness, text, type Harness } from './helpers.js'

function when(h: Harness, type: EventType, count = 1): Promise<void> {
  let seen = 0
  return new Promise((resolve) => {
    const off = h.store.onCommit((events) => {
      seen += events.filter((e) => e.type === type).length
      if (seen >= count) {
        off()
        resolve()
      }
    })
  })
}

describe('cancellation', () => {
  let h: Harness
  afterEach(() => h.close())

  it('mid-stream: the model call is aborted, the text streamed so far is kept, the run ends cancelled', async () => {
    const answer = 'a long answer that streams slowly, chunk by chunk, for a while. '.repeat(4)
    const model = createScriptedModel({ chunkSize: 4, delayMs: 5, steps: [{ text: answer }] })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('talk') })
    await when(h, 'text.delta', 3)
    expect(await h.runtime.cancel(id)).toEqual({ cancelled: true })
    await h.runtime.idle(id)

    // Deltas are left out: how many land before the abort depends on timing.
    expect(h.types(id).filter((t) => t !== 'text.delta')).toEqual([
      'session.created',
      'input.accepted',
      'run.started',
      'input.delivered',
      'message.created',
      'step.started',
      'text.started',
      'run.cancel.requested',
      'text.ended',
      'step.finished',
      'message.completed',
      'run.finished',
    ])
    const events = h.events(id)
    const streamed = events
      .filter((e) => e.type === 'text.delta')
      .map((e) => (e.data as { text: string }).text)
      .join('')
    expect(streamed.length).toBeGreaterThanOrEqual(12)
    expect(streamed.length).toBeLessThan(answer.length) // the model's 320 ms of streaming were cut short
    expect(events.find((e) => e.type === 'message.completed')?.data).toMatchObject({ error: { kind: 'aborted' } })
    expect(events.at(-1)?.data).toEqual({ runId: expect.any(String), outcome: 'cancelled' })
    expect(await h.runtime.cancel(id)).toEqual({ cancelled: false }) // nothing left to cancel
  })

  it('mid-reasoning: the open reasoning part is closed as reasoning, not as text', async () => {
    const model = createScriptedModel({
      chunkSize: 4,
      delayMs: 5,
      steps: [{ reasoning: 'thinking it over, step by step. '.repeat(8), text: 'done' }],
    })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('think') })
    await when(h, 'reasoning.delta', 3)
    await h.runtime.cancel(id)
    await h.runtime.idle(id)
    const types = h.types(id).filter((t) => t !== 'reasoning.delta')
    expect(types.slice(types.indexOf('reasoning.started'), types.indexOf('step.finished'))).toEqual([
      'reasoning.started',
      'run.cancel.requested',
      'reasoning.ended',
    ])
    expect(getParts(h.store, id).find((p) => p.type === 'reasoning')).toMatchObject({ ended: true })
  })

  it('mid-tool: the running tool gets the abort signal, fails as aborted, the run ends cancelled', async () => {
    const model = createScriptedModel({
      steps: [
        { when: { afterToolResult: false, turn: 0 }, toolCalls: [{ id: 'c1', name: 'slow', input: { ms: 10_000 } }] },
        { when: { turn: 1 }, text: 'fresh start' },
      ],
    })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('wait a long time') })
    await when(h, 'tool.progressed')
    const started = Date.now()
    await h.runtime.cancel(id)
    await h.runtime.idle(id)
    expect(Date.now() - started).toBeLessThan(5000) // did not wait for the tool's 10 s

    expect(h.types(id).slice(-5)).toEqual([
      'tool.called',
      'tool.progressed',
      'run.cancel.requested',
      'tool.failed',
      'run.finished',
    ])
    const events = h.events(id)
    expect(events.find((e) => e.type === 'tool.failed')?.data).toMatchObject({ error: { kind: 'aborted' } })
    expect(events.at(-1)?.data).toMatchObject({ outcome: 'cancelled' })

    // The next run sends the aborted call with a synthetic error result: every call has its result.
    await h.runtime.submit(id, { parts: text('never mind') })
    await h.runtime.idle(id)
    const prompt = model.calls[1]?.prompt ?? []
    expect(prompt.slice(2, 4)).toEqual([
      {
        role: 'assistant',
        content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'slow', input: { ms: 10_000 } }],
      },
      {
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId: 'c1',
            toolName: 'slow',
            output: { type: 'error-text', value: 'Error (aborted): the run was cancelled' },
          },
        ],
      },
    ])
  })
})

describe('concurrency', () => {
  let h: Harness
  afterEach(() => h.close())

  it('two sessions progress at the same time while each stays serial', async () => {
    const model = createScriptedModel({
      chunkSize: 2,
      delayMs: 2,
      steps: [{ when: {}, text: 'forty characters of text, streamed slowly' }],
    })
    h = harness({ model })
    const a = h.session()
    const b = h.session()
    await h.runtime.submit(a, { parts: text('a1') })
    await h.runtime.submit(b, { parts: text('b1') })
    await when(h, 'text.delta')
    await h.runtime.submit(a, { parts: text('a2'), delivery: 'queue' })
    await Promise.all([h.runtime.idle(a), h.runtime.idle(b)])

    h.store.reader() // every append committed: readAll reads by seq, what is committed
    const all = h.store.readAll(0, 10_000)
    const deltas = all.filter((e) => e.type === 'text.delta').map((e) => e.sessionId)
    // Interleaved: each session streamed before the other had finished streaming —
    // not all of one's deltas, then all of the other's. Which one starts first is the scheduler's call.
    expect(deltas.indexOf(b)).toBeLessThan(deltas.lastIndexOf(a))
    expect(deltas.indexOf(a)).toBeLessThan(deltas.lastIndexOf(b))
    // Serial within each session: runs never overlap.
    for (const id of [a, b]) {
      const brackets = all
        .filter((e) => e.sessionId === id && (e.type === 'run.started' || e.type === 'run.finished'))
        .map((e) => e.type)
      expect(brackets).toEqual(
        id === a ? ['run.started', 'run.finished', 'run.started', 'run.finished'] : ['run.started', 'run.finished'],
      )
    }
  })
})

describe('stop (shutdown)', () => {
  let h: Harness
  afterEach(() => h.close())

  it('brings a running tool to a safe point and leaves the run open for recovery', async () => {
    const model = createScriptedModel({ steps: [{ toolCalls: [{ id: 'c1', name: 'slow', input: { ms: 10_000 } }] }] })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('long job') })
    await when(h, 'tool.progressed')
    await h.runtime.stop()

    expect(h.types(id).slice(-3)).toEqual(['tool.called', 'tool.progressed', 'tool.failed'])
    expect(h.events(id).at(-1)?.data).toMatchObject({ error: { kind: 'interrupted' } })
    expect(h.types(id)).not.toContain('run.finished') // recovery resumes it after the restart
  })

  it('a call of the step the shutdown reached before it started says it did not run', async () => {
    const model = createScriptedModel({
      steps: [
        {
          toolCalls: [
            { id: 'c1', name: 'slow', input: { ms: 10_000 } },
            { id: 'c2', name: 'slow', input: { ms: 1 } },
          ],
        },
      ],
    })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('two jobs') })
    await when(h, 'tool.progressed')
    await h.runtime.stop()
    const failed = h.events(id).filter((e) => e.type === 'tool.failed')
    expect(failed.map((e) => (e.data as { error: { kind: string } }).error.kind)).toEqual([
      'interrupted',
      'interrupted',
    ])
    expect(failed[1]?.data).toMatchObject({ error: { message: NOT_STARTED_BEFORE_RESTART } })
  })

  it('cuts a stream off as interrupted, not cancelled', async () => {
    const model = createScriptedModel({
      chunkSize: 2,
      delayMs: 5,
      steps: [{ text: 'streaming for quite a while… '.repeat(8) }],
    }) // ~0.6 s of streaming
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('talk') })
    await when(h, 'text.delta', 2)
    await h.runtime.stop()
    expect(
      h
        .types(id)
        .filter((t) => t !== 'text.delta')
        .slice(-4),
    ).toEqual(['text.started', 'text.ended', 'step.finished', 'message.completed'])
    expect(h.events(id).at(-1)?.data).toMatchObject({ error: { kind: 'interrupted' } })
  })
})

describe('a cancel that races the run’s end', () => {
  let h: Harness
  afterEach(() => h.close())

  it('a cancel committed as the last step commits (the run deciding it is done) ends the run cancelled, never idle', async () => {
    h = harness({ model: createScriptedModel({ steps: [{ text: 'done' }] }) })
    const id = h.session()
    // the cancel is asked the moment the answer's end commits: the loop then reads the view and decides to end
    const off = h.store.onCommit((events) => {
      if (events.some((e) => e.sessionId === id && e.type === 'message.completed')) {
        off()
        void h.runtime.cancel(id)
      }
    })
    await h.runtime.submit(id, { parts: text('hi') })
    await h.runtime.idle(id)
    const events = h.events(id)
    const cancelled = events.some((e) => e.type === 'run.cancel.requested')
    const end = events.filter((e) => e.type === 'run.finished').map((e) => (e.data as { outcome: string }).outcome)
    // whichever came first in the log, a run with a cancel in it ends cancelled
    expect(end).toEqual([cancelled ? 'cancelled' : 'idle'])
    expect(cancelled).toBe(true) // the cancel landed before the end: the race this spec is about
  })
})
