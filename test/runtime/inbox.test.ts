import { getMessages } from '../../src/projections/queries/read-model.js'
import { afterEach, describe, expect, it } from 'vitest'
import { ChronicleError } from '../../src/events/errors.js'
import { createModelResolver } from '../../src/runtime/model/providers.js'
import { createScriptedModel } from '../../src/runtime/model/scripted-model.js'
import { harness, text, type Harness } from './helpers.js'

const code = async (fn: () => unknown): Promise<string | undefined> => {
  try {
    await fn()
  } catch (err) {
    return err instanceof ChronicleError ? err.code : `not a ChronicleError: ${String(err)}`
  }
  return undefined
}

describe('submit: the durable inbox', () => {
  let h: Harness
  afterEach(() => h.close())

  it('input.accepted is committed before anything runs, and its seq is returned', async () => {
    h = harness({ model: createScriptedModel({ delayMs: 5, steps: [{ text: 'hi' }] }) })
    const id = h.session()
    const result = await h.runtime.submit(id, { inputId: 'in-1', parts: text('hello') })
    // Nothing of the run has happened yet: only the acceptance is in the log.
    expect(h.types(id)).toEqual(['session.created', 'input.accepted'])
    expect(result).toEqual({ inputId: 'in-1', seq: h.events(id)[1]?.seq, duplicate: false })
    await h.runtime.idle(id)
    expect(h.types(id).at(-1)).toBe('run.finished')
  })

  it('resubmitting the same inputId with the same content returns the original acceptance and appends nothing', async () => {
    h = harness({ model: createScriptedModel({ steps: [{ text: 'once' }] }) })
    const id = h.session()
    const first = await h.runtime.submit(id, { inputId: 'in-7', parts: text('hello') })
    await h.runtime.idle(id)
    const before = h.events(id).length
    const again = await h.runtime.submit(id, { inputId: 'in-7', parts: text('hello') })
    await h.runtime.idle(id)
    expect(again).toEqual({ inputId: 'in-7', seq: first.seq, duplicate: true })
    expect(h.events(id)).toHaveLength(before)
  })

  it('the same inputId with different content is INPUT_CONFLICT, nothing appended', async () => {
    h = harness({ model: createScriptedModel({ steps: [{ text: 'once' }] }) })
    const id = h.session()
    await h.runtime.submit(id, { inputId: 'in-7', parts: text('hello') })
    await h.runtime.idle(id)
    const before = h.events(id).length
    expect(await code(() => h.runtime.submit(id, { inputId: 'in-7', parts: text('goodbye') }))).toBe('INPUT_CONFLICT')
    expect(await code(() => h.runtime.submit(id, { inputId: 'in-7', parts: text('hello'), delivery: 'queue' }))).toBe(
      'INPUT_CONFLICT',
    )
    expect(h.events(id)).toHaveLength(before)
  })

  it('bad input is refused with a stable code and nothing is appended', async () => {
    h = harness({ model: createScriptedModel({ steps: [] }), limits: { maxInputBytes: 100 } })
    const id = h.session()
    expect(await code(() => h.runtime.submit(id, { parts: [] }))).toBe('EMPTY_INPUT')
    expect(await code(() => h.runtime.submit(id, { parts: text('   ') }))).toBe('EMPTY_INPUT')
    expect(await code(() => h.runtime.submit(id, { parts: text('x'.repeat(200)) }))).toBe('PAYLOAD_TOO_LARGE')
    expect(await code(() => h.runtime.submit(id, { parts: text('hi'), agent: 'wizard' }))).toBe('UNKNOWN_AGENT')
    expect(await code(() => h.runtime.submit('ses_missing', { parts: text('hi') }))).toBe('SESSION_NOT_FOUND')
    expect(h.types(id)).toEqual(['session.created'])
  })

  it('an unknown model is UNKNOWN_MODEL, nothing appended', async () => {
    h = harness({ models: createModelResolver({}) })
    const id = h.session({ model: null })
    expect(await code(() => h.runtime.submit(id, { parts: text('hi'), model: 'martian:gpt' }))).toBe('UNKNOWN_MODEL')
    expect(await code(() => h.runtime.submit(id, { parts: text('hi'), model: 'scripted:/no/such/file.json' }))).toBe(
      'UNKNOWN_MODEL',
    )
    expect(await code(() => h.runtime.submit(id, { parts: text('hi'), model: 'compatible:qwen3' }))).toBe(
      'UNKNOWN_MODEL',
    ) // no base URL
    expect(h.types(id)).toEqual(['session.created'])
  })

  it('noReply: the input becomes a user message without a run; the next run sends it to the model', async () => {
    const model = createScriptedModel({ steps: [{ text: 'noted both' }] })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('just so you know: the API moved to v2'), noReply: true })
    await h.runtime.idle(id)
    expect(h.types(id)).toEqual(['session.created', 'input.accepted'])
    expect(model.calls).toHaveLength(0)
    expect(getMessages(h.store, id).map((m) => m.role)).toEqual(['user'])

    await h.runtime.submit(id, { parts: text('now update the client') })
    await h.runtime.idle(id)
    const sent = JSON.stringify(model.calls[0]?.prompt)
    expect(sent).toContain('the API moved to v2')
    expect(sent).toContain('now update the client')
  })

  it('steering: input sent mid-run is delivered at the next step boundary, wrapped in a system-reminder', async () => {
    const model = createScriptedModel({
      delayMs: 2,
      steps: [
        { when: { turn: 0, afterToolResult: false }, toolCalls: [{ id: 'c1', name: 'slow', input: { ms: 30 } }] },
        { when: { turn: 1 }, text: 'switching to the new request' },
      ],
    })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('start a slow job') })
    await new Promise<void>((resolve) => {
      const off = h.store.onCommit((events) => {
        if (events.some((e) => e.type === 'tool.called')) {
          off()
          resolve()
        }
      })
    })
    await h.runtime.submit(id, { parts: text('actually, stop and say hi') })
    await h.runtime.idle(id)

    const types = h.types(id)
    expect(types.filter((t) => t === 'run.started')).toHaveLength(1) // one run: the input joined it
    const delivered = h
      .events(id)
      .filter((e) => e.type === 'input.delivered')
      .map((e) => e.data)
    expect(delivered).toEqual([
      expect.not.objectContaining({ steered: true }),
      expect.objectContaining({ steered: true }),
    ])
    // Delivered after the tool finished, before the next model call.
    expect(types.indexOf('input.delivered', types.indexOf('tool.completed'))).toBeGreaterThan(
      types.indexOf('tool.completed'),
    )
    expect(model.calls).toHaveLength(2)
    const last = model.calls[1]?.prompt.at(-1)
    expect(last).toEqual({
      role: 'user',
      content: [
        {
          type: 'text',
          text: '<system-reminder>\nThe user sent the following message:\nactually, stop and say hi\n\nPlease address this message and continue with your tasks.\n</system-reminder>',
        },
      ],
    })
  })

  it('queue: input sent mid-run waits for the run to end, then starts one follow-up run', async () => {
    const model = createScriptedModel({
      delayMs: 2,
      steps: [
        { when: { turn: 0 }, text: 'first answer, streamed slowly over several chunks' },
        { when: {}, text: 'later answer' },
      ],
    })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('one') })
    await new Promise<void>((resolve) => {
      const off = h.store.onCommit((events) => {
        if (events.some((e) => e.type === 'text.started')) {
          off()
          resolve()
        }
      })
    })
    await h.runtime.submit(id, { parts: text('two'), delivery: 'queue' })
    await h.runtime.submit(id, { parts: text('three'), delivery: 'queue' })
    await h.runtime.idle(id)
    const runs = h
      .events(id)
      .filter((e) => e.type === 'run.started' || e.type === 'run.finished' || e.type === 'input.delivered')
      .map((e) => e.type)
    // Queued inputs wait for the run to end, then run one per run, in order.
    expect(runs).toEqual([
      'run.started',
      'input.delivered',
      'run.finished',
      'run.started',
      'input.delivered',
      'run.finished',
      'run.started',
      'input.delivered',
      'run.finished',
    ])
    const users = model.calls.map((c) => c.prompt.filter((m) => m.role === 'user').length)
    expect(users).toEqual([1, 2, 3])
  })

  it('wake-ups during a run coalesce: many steering inputs make one more run at most, not one each', async () => {
    const model = createScriptedModel({ delayMs: 3, steps: [{ when: {}, text: 'answering everything at once' }] })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('a') })
    for (const t of ['b', 'c', 'd']) await h.runtime.submit(id, { parts: text(t) })
    await h.runtime.idle(id)
    // 'a' starts a run; b, c and d, accepted while it answers, go to the model together: at its next step, or
    // in the one run after it (or with 'a', accepted before its first step) — never a run or a call each
    expect(h.types(id).filter((t) => t === 'run.started').length).toBeLessThanOrEqual(2)
    expect(model.calls.length).toBeLessThanOrEqual(2)
    expect(h.types(id).filter((t) => t === 'input.delivered')).toHaveLength(4)
    const users = model.calls.at(-1)?.prompt.filter((m) => m.role === 'user')
    expect(users).toHaveLength(4) // the last run's model call saw every input
  })
})
