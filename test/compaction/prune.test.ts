import type { LanguageModelV3Prompt } from '@ai-sdk/provider'
import { sqlitePorts } from '../../src/projections/store-ports.js'
import { afterEach, describe, expect, it } from 'vitest'
import type { Message, Part, SessionView, ToolPart } from '../../src/projections/fold/model.js'
import { loadView } from '../../src/projections/queries/read-model.js'
import { prunable } from '../../src/runtime/compaction/prune.js'
import { stateAt } from '../../src/projections/time-travel/time-travel.js'
import { audit } from '../../src/runtime/audit/audit.js'
import { compactionHarness, dataOf, SPEC, type CompactionHarness } from './helpers.js'

/**
 * Lean context (docs/COMPACTION.md "Pruning"): outputs of completed tool calls older than the protected
 * budget, outside the last two turns, are replaced by a marker in what the model is sent — recorded as
 * context.pruned, so the log keeps the outputs and `audit` rebuilds every request.
 *
 * Every turn here: one lookup whose output is ≈ 300 tokens, then an answer. Protect 500 tokens (one
 * output), prune only when that saves 300 (two outputs).
 */
const OUTPUT = 'o'.repeat(1200)
const prune = { protect: 500, minimum: 300 }
const config = { models: { [SPEC]: { contextWindow: 100_000 } }, prune }
const steps = [
  { when: { afterToolResult: false }, toolCalls: [{ name: 'lookup', input: { query: 'the facts' } }] },
  { when: { afterToolResult: true }, text: 'noted' },
]

/** The tool results a request carried, oldest first. */
function results(prompt: LanguageModelV3Prompt): string[] {
  return prompt.flatMap((m) =>
    m.role === 'tool'
      ? m.content.flatMap((p) => (p.type === 'tool-result' && p.output.type === 'text' ? [p.output.value] : []))
      : [],
  )
}

const MARKER = '[Old tool result content cleared: lookup the facts]'
/** What pruning one output saves, in estimated tokens (4 characters each): the output less its marker. */
const SAVED = 1200 / 4 - Math.ceil(MARKER.length / 4)

describe('pruning old tool outputs', () => {
  let h: CompactionHarness
  afterEach(() => h.close())

  it('replaces the outputs older than the protected budget with a marker before the step, once it saves enough', async () => {
    h = compactionHarness(steps, config, { lookup: () => OUTPUT, uniqueCallIds: true })
    const id = h.session()
    for (let t = 1; t <= 4; t++) await h.turn(id, `turn ${t}`)
    expect(dataOf(h.events(id), 'context.pruned')).toEqual([]) // turn 1's output alone would save too little

    await h.turn(id, 'turn 5')
    const events = h.events(id)
    const tools = [...loadView(h.store, id).parts.values()].filter((p): p is ToolPart => p.type === 'tool')
    expect(dataOf(events, 'context.pruned')).toEqual([{ partIds: [tools[0]?.id, tools[1]?.id], tokens: 2 * SAVED }])
    const types = h.types(id)
    expect(types.slice(types.lastIndexOf('input.delivered'), types.lastIndexOf('input.delivered') + 4)).toEqual([
      'input.delivered',
      'context.pruned',
      'message.created',
      'step.started',
    ])
    // turn 5's requests: turns 1 and 2 as markers; 3 (the protected budget) and 4 (a recent turn) whole
    const sent = h.model.calls.map((c) => results(c.prompt))
    expect(sent[7]).toEqual([OUTPUT, OUTPUT, OUTPUT, OUTPUT]) // turn 4's answer
    expect(sent[8]).toEqual([MARKER, MARKER, OUTPUT, OUTPUT])
    expect(sent[9]).toEqual([MARKER, MARKER, OUTPUT, OUTPUT, OUTPUT])
    // the log and the read model keep every output
    expect(tools.map((p) => p.output)).toEqual([OUTPUT, OUTPUT, OUTPUT, OUTPUT, OUTPUT])
    expect(tools.map((p) => p.pruned === true)).toEqual([true, true, false, false, false])

    await h.turn(id, 'turn 6') // turn 3's output alone would save too little: nothing more
    expect(dataOf(h.events(id), 'context.pruned')).toHaveLength(1)
    await h.turn(id, 'turn 7')
    expect(dataOf(h.events(id), 'context.pruned')).toHaveLength(2)
    expect(results(h.model.calls.at(-1)?.prompt ?? [])).toEqual([
      MARKER,
      MARKER,
      MARKER,
      MARKER,
      OUTPUT,
      OUTPUT,
      OUTPUT,
    ])
  })

  it('is replayable: audit rebuilds every request, and the context before the pruning had the outputs', async () => {
    h = compactionHarness(steps, config, { lookup: () => OUTPUT, uniqueCallIds: true })
    const id = h.session()
    for (let t = 1; t <= 7; t++) await h.turn(id, `turn ${t}`)
    const report = await audit(sqlitePorts(h.store), [id])
    expect(report.mismatches).toEqual([])
    expect(report.verified).toBe(14)
    expect(report.steps).toBe(14)

    const pruned = h.events(id).find((e) => e.type === 'context.pruned')
    if (!pruned) throw new Error('no context.pruned')
    const before = await h.runtime.context(id, pruned.seq - 1)
    const after = await h.runtime.context(id, pruned.seq)
    expect(results(before.messages as LanguageModelV3Prompt).slice(0, 2)).toEqual([OUTPUT, OUTPUT])
    expect(results(after.messages as LanguageModelV3Prompt).slice(0, 2)).toEqual([MARKER, MARKER])
    // the step after it sent exactly the context at the seq before its step.started
    const step = h.events(id).find((e) => e.type === 'step.started' && e.seq > pruned.seq)
    if (step?.type !== 'step.started') throw new Error('no step after the pruning')
    expect((await h.runtime.context(id, step.seq - 1)).digest).toBe(step.data.contextDigest)
    // time travel shows the parts as they were: unpruned before, pruned after, the output kept in both
    const parts = (seq: number) =>
      [...stateAt(h.store, id, seq).parts.values()].filter((p): p is ToolPart => p.type === 'tool').slice(0, 2)
    expect(parts(pruned.seq - 1).map((p) => [p.pruned === true, p.output])).toEqual([
      [false, OUTPUT],
      [false, OUTPUT],
    ])
    expect(parts(pruned.seq).map((p) => [p.pruned === true, p.output])).toEqual([
      [true, OUTPUT],
      [true, OUTPUT],
    ])
  })

  it('never prunes the last two turns, however small the budget', async () => {
    h = compactionHarness(
      [
        { when: { afterToolResult: false }, toolCalls: [{ name: 'lookup', input: { query: 'the facts' } }] },
        { when: { afterToolResult: true }, text: 'noted' },
      ],
      { models: { [SPEC]: { contextWindow: 100_000 } }, prune: { protect: 0, minimum: 0 } },
      { lookup: () => OUTPUT, uniqueCallIds: true },
    )
    const id = h.session()
    await h.turn(id, 'turn 1')
    await h.turn(id, 'turn 2')
    expect(dataOf(h.events(id), 'context.pruned')).toEqual([])
    await h.turn(id, 'turn 3')
    expect(results(h.model.calls.at(-2)?.prompt ?? [])).toEqual([MARKER, OUTPUT])
  })

  it('is off when the configuration says so: the outputs are sent until a compaction', async () => {
    h = compactionHarness(
      steps,
      { models: config.models, prune: { enabled: false, protect: 0, minimum: 0 } },
      {
        lookup: () => OUTPUT,
        uniqueCallIds: true,
      },
    )
    const id = h.session()
    for (let t = 1; t <= 5; t++) await h.turn(id, `turn ${t}`)
    expect(dataOf(h.events(id), 'context.pruned')).toEqual([])
    expect(results(h.model.calls.at(-1)?.prompt ?? [])).toEqual([OUTPUT, OUTPUT, OUTPUT, OUTPUT, OUTPUT])
  })

  it('a usage counted before the pruning does not trigger a compaction after it', async () => {
    // window 4000, usable 3600; turn 4's answer reports 3610 tokens: without pruning, turn 5 would compact
    h = compactionHarness(
      [
        { when: { turn: 3, afterToolResult: true }, text: 'noted', usage: { input: 3590, output: 20 } },
        { when: { afterToolResult: false }, toolCalls: [{ name: 'lookup', input: { query: 'the facts' } }] },
        { when: { afterToolResult: true }, text: 'noted', usage: { input: 100, output: 10 } },
      ],
      { models: { [SPEC]: { contextWindow: 4000, reserved: 400 } }, prune },
      { lookup: () => OUTPUT, uniqueCallIds: true },
    )
    const id = h.session()
    for (let t = 1; t <= 5; t++) await h.turn(id, `turn ${t}`)
    const events = h.events(id)
    expect(dataOf(events, 'context.pruned')).toHaveLength(1)
    expect(dataOf(events, 'compaction.requested')).toEqual([])
  })

  it('never prunes what the skill tool loaded (instructions, not data), nor a failed call', () => {
    const view = history([
      ['user', []],
      ['assistant', [tool('skill', 'completed'), tool('lookup', 'completed'), tool('lookup', 'error')]],
      ['user', []],
      ['assistant', []],
      ['user', []],
    ])
    expect(prunable(view, { protect: 0, minimum: 0 })).toEqual({ partIds: ['prt_2'], tokens: SAVED })
  })
})

/** A hand-made history: messages in order, with their tool parts. */
function history(messages: [Message['role'], Omit<ToolPart, 'id' | 'sessionId' | 'messageId'>[]][]): SessionView {
  const view: SessionView = { session: null, messages: new Map(), parts: new Map<string, Part>() }
  let part = 0
  messages.forEach(([role, tools], i) => {
    const id = `msg_${i}`
    view.messages.set(id, { id, sessionId: 's', role, agent: 'build', model: null, createdAt: '' })
    for (const t of tools) {
      const partId = `prt_${++part}`
      view.parts.set(partId, Object.assign({ id: partId, sessionId: 's', messageId: id }, t))
    }
  })
  return view
}

function tool(name: string, state: 'completed' | 'error'): Omit<ToolPart, 'id' | 'sessionId' | 'messageId'> {
  return {
    type: 'tool',
    callId: name,
    tool: name,
    state,
    rawInput: '{}',
    title: 'the facts',
    ...(state === 'completed' ? { output: OUTPUT } : { error: { kind: 'failed', message: OUTPUT } }),
  }
}
