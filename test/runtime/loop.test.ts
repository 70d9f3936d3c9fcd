import { afterEach, describe, expect, it } from 'vitest'
import { createScriptedModel, type ScriptedModel } from '../../src/runtime/model/scripted-model.js'
import { createModelResolver } from '../../src/runtime/model/providers.js'
import { streamed } from '../events/fixtures/store.js'
import { autoReply, collapse, harness, text, type Harness } from './helpers.js'

const data = (h: Harness, id: string, type: string) =>
  h
    .events(id)
    .filter((e) => e.type === type)
    .map((e) => e.data as Record<string, unknown>)

describe('the agent loop', () => {
  let h: Harness
  afterEach(() => h.close())

  it('invalid tool arguments fail as invalid with a message the model can act on, and the model corrects itself', async () => {
    const model = createScriptedModel({
      steps: [
        { toolCalls: [{ id: 'c1', name: 'lookup', input: { query: 42 } }] },
        { toolCalls: [{ id: 'c2', name: 'lookup', input: { query: 'rome' } }] },
        { text: 'Rome.' },
      ],
    })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('rome?') })
    await h.runtime.idle(id)

    const failed = data(h, id, 'tool.failed')
    expect(failed).toHaveLength(1)
    expect(failed[0]?.error).toMatchObject({
      kind: 'invalid',
      message: expect.stringContaining('Invalid arguments for lookup'),
    })
    expect(data(h, id, 'tool.called').map((d) => d.input)).toEqual([{ query: 'rome' }]) // the invalid call never ran
    expect(data(h, id, 'tool.completed').map((d) => d.output)).toEqual(['result for rome'])
    // The second request showed the model its mistake under its own call id.
    const tool = model.calls[1]?.prompt.at(-1)
    expect(tool).toMatchObject({
      role: 'tool',
      content: [
        { toolCallId: 'c1', output: { type: 'error-text', value: expect.stringContaining('Fix the arguments') } },
      ],
    })
    expect(data(h, id, 'run.finished')).toEqual([{ runId: expect.any(String), outcome: 'idle' }])
  })

  it('a run’s start and its input’s delivery commit together: one commit, not two', async () => {
    h = harness({ model: createScriptedModel({ steps: [{ text: 'hi' }] }) })
    const id = h.session()
    const commits: string[][] = []
    h.store.onCommit((events) => commits.push(events.filter((e) => e.sessionId === id).map((e) => e.type)))
    await h.runtime.submit(id, { parts: text('go') })
    await h.runtime.idle(id)
    const start = commits.find((types) => types.includes('run.started'))
    expect(start?.slice(0, 2)).toEqual(['run.started', 'input.delivered'])
    expect(data(h, id, 'run.finished')[0]).toMatchObject({ outcome: 'idle' })
  })

  it('a quick call’s start and end commit together: its permission check reads no queue out', async () => {
    h = harness({
      model: createScriptedModel({
        steps: [{ toolCalls: [{ id: 'c1', name: 'lookup', input: { query: 'rome' } }] }, { text: 'Rome.' }],
      }),
    })
    const id = h.session()
    const commits: string[][] = []
    h.store.onCommit((events) => commits.push(events.filter((e) => e.sessionId === id).map((e) => e.type)))
    await h.runtime.submit(id, { parts: text('rome?') })
    await h.runtime.idle(id)
    // the check reads the rules as committed (only commands change them): tool.called waits for its end
    expect(commits.find((types) => types.includes('tool.called'))).toEqual(['tool.called', 'tool.completed'])
    expect(data(h, id, 'tool.completed').map((d) => d.output)).toEqual(['result for rome'])
  })

  it('under load, a run waits out no interval: its start, last step and end commit at once, its own appends only', async () => {
    // 64 other sessions streaming keep the store loaded (docs/EVENTS.md "Deltas"); they go on sharing commits
    h = harness({ model: createScriptedModel({ steps: [{ text: 'hi' }] }) })
    const id = h.session()
    const others = Array.from({ length: 64 }, () => h.session())
    const load = () =>
      others.map((o, i) =>
        streamed(h.store, o, [{ type: 'session.renamed', data: { title: `t${i}` } }], { meta: { actor: 'user' } }),
      )
    await Promise.all(load())
    const loading = setInterval(load, 10)
    const commits: { own: string[]; shared: boolean }[] = []
    h.store.onCommit((events) =>
      commits.push({
        own: events.filter((e) => e.sessionId === id).map((e) => e.type),
        shared: events.some((e) => e.sessionId !== id),
      }),
    )
    try {
      expect(h.store.loaded()).toBe(true)
      await h.runtime.submit(id, { parts: text('go') })
      await h.runtime.idle(id)
    } finally {
      clearInterval(loading)
    }
    // Each committed alone: one that waited out the loaded interval would have gone with the others' renames.
    const committing = (type: string) => commits.find((c) => c.own.includes(type))
    expect(committing('run.started')).toMatchObject({ shared: false }) // the time to first delta waits on nobody
    expect(committing('step.finished')).toMatchObject({ shared: false })
    expect(committing('run.finished')).toMatchObject({ shared: false })
    expect(data(h, id, 'run.finished')[0]).toMatchObject({ outcome: 'idle' })
  })

  it('arguments that are not JSON are invalid too', async () => {
    const model = createScriptedModel({
      steps: [{ toolCalls: [{ id: 'c1', name: 'lookup', rawInput: '{"query": ' }] }, { text: 'sorry' }],
    })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('go') })
    await h.runtime.idle(id)
    expect(data(h, id, 'tool.failed')[0]?.error).toMatchObject({ kind: 'invalid' })
    expect(data(h, id, 'run.finished')[0]).toMatchObject({ outcome: 'idle' })
  })

  it('an unknown tool fails as invalid, naming the tools that exist', async () => {
    const model = createScriptedModel({
      steps: [{ toolCalls: [{ id: 'c1', name: 'teleport', input: {} }] }, { text: 'ok' }],
    })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('beam me up') })
    await h.runtime.idle(id)
    expect(collapse(h.types(id))).toEqual([
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
      'tool.failed',
      'message.created',
      'step.started',
      'text.started',
      'text.delta',
      'text.ended',
      'step.finished',
      'message.completed',
      'run.finished',
    ])
    expect(data(h, id, 'tool.failed')[0]?.error).toEqual({
      kind: 'invalid',
      message: 'Unknown tool "teleport". Available tools: lookup, slow, broken. Call one of those instead.',
    })
  })

  it('a tool that throws fails as failed; the run goes on', async () => {
    const model = createScriptedModel({
      steps: [{ toolCalls: [{ id: 'c1', name: 'broken', input: {} }] }, { text: 'it broke' }],
    })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('try') })
    await h.runtime.idle(id)
    expect(data(h, id, 'tool.failed')[0]?.error).toEqual({ kind: 'failed', message: 'disk on fire' })
    expect(data(h, id, 'run.finished')[0]).toMatchObject({ outcome: 'idle' })
  })

  it('max steps: the last step has tools off and a note asking for text; still not done → max_steps', async () => {
    // A model that keeps finishing with tool-calls, even when tools are off.
    const model = createScriptedModel({
      steps: [{ when: {}, toolCalls: [{ name: 'lookup', input: { query: 'again' } }], finish: 'tool-calls' }],
    })
    h = harness({ model, limits: { maxSteps: 2 } })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('loop forever') })
    await h.runtime.idle(id)
    expect(model.calls).toHaveLength(2)
    expect(model.calls[0]?.toolChoice).toBe('auto')
    expect(model.calls[1]?.toolChoice).toBe('none')
    const note = model.calls[1]?.prompt.at(-1)
    expect(note).toMatchObject({
      role: 'user',
      content: [{ type: 'text', text: expect.stringContaining('MAXIMUM STEPS REACHED') }],
    })
    expect(data(h, id, 'run.finished')).toEqual([{ runId: expect.any(String), outcome: 'max_steps' }])
  })

  it('max steps: a text answer on the last step ends the run idle', async () => {
    const model = createScriptedModel({
      steps: [{ toolCalls: [{ name: 'lookup', input: { query: 'a' } }] }, { text: 'summary' }],
    })
    h = harness({ model, limits: { maxSteps: 2 } })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('go') })
    await h.runtime.idle(id)
    expect(data(h, id, 'run.finished')[0]).toMatchObject({ outcome: 'idle' })
  })

  /** One input, every ask rejected ('stop looping'): the third of three identical calls is asked about and denied. */
  async function expectThirdCallDenied(model: ScriptedModel): Promise<string> {
    h = harness({ model })
    const asked = autoReply(h, 'reject', 'stop looping')
    const id = h.session()
    await h.runtime.submit(id, { parts: text('go') })
    await h.runtime.idle(id)
    expect(asked).toEqual(['doom_loop'])
    expect(data(h, id, 'tool.completed')).toHaveLength(2)
    expect(data(h, id, 'tool.failed').map((d) => d.error)).toEqual([{ kind: 'denied', message: 'stop looping' }])
    return id
  }

  it('doom loop: the third identical call asks the doom_loop permission; a reject fails the call as denied', async () => {
    const same = { when: { afterToolResult: true }, toolCalls: [{ name: 'lookup', input: { query: 'same' } }] }
    const model = createScriptedModel({
      steps: [
        { when: { afterToolResult: false }, toolCalls: [{ name: 'lookup', input: { query: 'same' } }] },
        { ...same, times: 2 },
        { when: { afterToolResult: true }, text: 'giving up' },
      ],
    })
    const id = await expectThirdCallDenied(model)
    expect(data(h, id, 'permission.requested')[0]).toMatchObject({ permission: 'doom_loop', patterns: ['lookup'] })
    expect(data(h, id, 'run.finished')[0]).toMatchObject({ outcome: 'idle' })
  })

  it('doom loop: the same call once in each of three turns is no loop (repeats count within one run)', async () => {
    const model = createScriptedModel({
      steps: [
        { when: { afterToolResult: false }, toolCalls: [{ name: 'lookup', input: { query: 'notes' } }], times: 3 },
        { when: { afterToolResult: true }, text: 'read it', times: 3 },
      ],
    })
    h = harness({ model })
    const asked = autoReply(h, 'reject')
    const id = h.session()
    for (const turn of ['one', 'two', 'three']) {
      await h.runtime.submit(id, { parts: text(`read notes, ${turn}`) })
      await h.runtime.idle(id)
    }
    expect(asked).toEqual([])
    expect(data(h, id, 'tool.completed')).toHaveLength(3)
  })

  it('doom loop: three identical calls in one step ask for the third (each sees the calls before it)', async () => {
    const same = { name: 'lookup', input: { query: 'same' } }
    const model = createScriptedModel({
      steps: [
        { when: { afterToolResult: false }, toolCalls: [same, same, same].map((c, i) => ({ ...c, id: `c${i}` })) },
        { when: { afterToolResult: true }, text: 'done' },
      ],
    })
    await expectThirdCallDenied(model)
  })

  it('doom loop: allowing once lets the third call run', async () => {
    const scripted = createScriptedModel({
      steps: [
        { toolCalls: [{ name: 'lookup', input: { query: 'x' } }] },
        { toolCalls: [{ name: 'lookup', input: { query: 'x' } }] },
        { toolCalls: [{ name: 'lookup', input: { query: 'x' } }] },
        { text: 'done' },
      ],
    })
    h = harness({ model: scripted })
    const asked = autoReply(h, 'once')
    const id = h.session()
    await h.runtime.submit(id, { parts: text('go') })
    await h.runtime.idle(id)
    expect(asked).toEqual(['doom_loop'])
    expect(data(h, id, 'tool.completed')).toHaveLength(3)
  })

  it('with no model configured the run ends with a NO_MODEL_CONFIGURED error', async () => {
    h = harness({ models: createModelResolver({}) })
    const id = h.session({ model: null })
    await h.runtime.submit(id, { parts: text('hello?') })
    await h.runtime.idle(id)
    expect(h.types(id)).toEqual(['session.created', 'input.accepted', 'run.started', 'input.delivered', 'run.finished'])
    expect(data(h, id, 'run.finished')[0]).toEqual({
      runId: expect.any(String),
      outcome: 'error',
      error: { kind: 'NO_MODEL_CONFIGURED', message: expect.stringContaining('CHRONICLE_MODEL') },
    })
  })

  it('a non-retryable model error ends the run with the error; text and messages stay consistent', async () => {
    const model = createScriptedModel({ steps: [{ error: { kind: 'context_overflow' } }] })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('a very long story') })
    await h.runtime.idle(id)
    expect(collapse(h.types(id)).slice(4)).toEqual([
      'message.created',
      'step.started',
      'step.finished',
      'message.completed',
      'run.finished',
    ])
    expect(data(h, id, 'run.finished')[0]).toMatchObject({ outcome: 'error', error: { kind: 'context_overflow' } })
  })

  it('reasoning streams as its own part before the text', async () => {
    const model = createScriptedModel({ chunkSize: 100, steps: [{ reasoning: 'think', text: 'answer' }] })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('q') })
    await h.runtime.idle(id)
    expect(h.types(id).slice(6, 12)).toEqual([
      'reasoning.started',
      'reasoning.delta',
      'reasoning.ended',
      'text.started',
      'text.delta',
      'text.ended',
    ])
  })
})

describe('the agent loop: configuration errors', () => {
  let h: Harness
  afterEach(() => h.close())

  it('a session whose model cannot be built ends its run with UNKNOWN_MODEL; the runtime keeps serving', async () => {
    h = harness({ models: createModelResolver({}) })
    const id = h.session({ model: 'martian:gpt' })
    await h.runtime.submit(id, { parts: text('hi') })
    await h.runtime.idle(id)
    expect(data(h, id, 'run.finished')).toEqual([
      { runId: expect.any(String), outcome: 'error', error: { kind: 'UNKNOWN_MODEL', message: expect.any(String) } },
    ])
  })
})
