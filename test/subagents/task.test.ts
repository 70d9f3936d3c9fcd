import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { dataOf, subagentHarness, task, until, type SubagentHarness } from './helpers.js'

const PARENT = 'delegate please'
const parentFirst = { userContains: PARENT, afterToolResult: false }
const parentAfter = { userContains: PARENT, afterToolResult: true }
const child = (afterToolResult: boolean) => ({ userContains: 'CHILD:', afterToolResult })

describe('sub-agents through the task tool', () => {
  let h: SubagentHarness
  afterEach(() => h.close())

  it('runs a child session from the task prompt; its final text is the tool result', async () => {
    h = subagentHarness([
      { when: parentFirst, ...task('c_task', 'CHILD: look up x') },
      { when: child(false), toolCalls: [{ id: 'c_look', name: 'lookup', input: { query: 'x' } }] },
      { when: child(true), text: 'child found: result for x' },
      { when: parentAfter, text: 'parent: done' },
    ])
    const id = h.session()
    await h.runtime.submit(id, { parts: [{ type: 'text', text: PARENT }] })
    await h.runtime.idle(id)

    const [childId] = h.children(id)
    expect(childId).toBeDefined()
    const parent = h.events(id)
    const order = parent.map((e) => e.type).filter((t) => t.startsWith('tool.') || t.startsWith('subtask.'))
    expect(order.filter((t) => t !== 'tool.input.delta')).toEqual([
      'tool.input.started',
      'tool.called',
      'subtask.started',
      'subtask.finished',
      'tool.completed',
    ])
    expect(dataOf(parent, 'subtask.finished')).toEqual([
      { partId: expect.any(String), callId: 'c_task', childSessionId: childId, outcome: 'idle' },
    ])
    expect(dataOf(parent, 'tool.completed')[0]).toMatchObject({
      output: `task_id: ${childId} (the sub-agent's session)\n\n<task_result>\nchild found: result for x\n</task_result>`,
      metadata: { sessionId: childId, outcome: 'idle', agent: 'general' },
    })
    expect(dataOf(parent, 'run.finished').at(-1)).toMatchObject({ outcome: 'idle' })

    // The child: linked to the parent call, the general agent, its own run.
    const events = h.events(childId!)
    expect(events[0]).toMatchObject({
      type: 'session.created',
      data: {
        agent: 'general',
        model: 'mock:model',
        directory: h.directory,
        parent: { sessionId: id, callId: 'c_task' },
        title: 'delegated work (@general subagent)',
      },
    })
    expect(dataOf(events, 'run.finished')).toEqual([{ runId: expect.any(String), outcome: 'idle' }])
    // Its prompt is the runtime's input, not the user's; the parent's prompt is the user's.
    expect(events.find((e) => e.type === 'input.accepted')?.meta.actor).toBe('runtime')
    expect(parent.find((e) => e.type === 'input.accepted')?.meta.actor).toBe('user')
    // It started from the task prompt alone, not from the parent's history.
    const childCall = h.model.calls.find((c) => JSON.stringify(c.prompt).includes('CHILD: look up x'))!
    expect(childCall.prompt.map((m) => m.role)).toEqual(['system', 'user'])
    expect(JSON.stringify(childCall.prompt)).not.toContain(PARENT)
  })

  it("a child's events can be subscribed to like any session's", async () => {
    h = subagentHarness([
      { when: parentFirst, ...task('c_task', 'CHILD: answer') },
      { when: child(false), text: 'child answer' },
      { when: parentAfter, text: 'ok' },
    ])
    const id = h.session()
    await h.runtime.submit(id, { parts: [{ type: 'text', text: PARENT }] })
    await h.runtime.idle(id)
    const childId = h.children(id)[0]!
    const expected = h.events(childId).map((e) => e.seq)
    const subscription = h.store.subscribe({ sessions: [childId] }, 0)
    const seen: number[] = []
    for await (const e of subscription) {
      seen.push(e.seq)
      if (seen.length === expected.length) break
    }
    expect(seen).toEqual(expected)
  })

  it("a failed child fails the call with the child's error; the parent carries on", async () => {
    h = subagentHarness([
      { when: parentFirst, ...task('c_task', 'CHILD: fail') },
      { when: child(false), error: { status: 400, message: 'boom' } },
      { when: parentAfter, text: 'the helper failed' },
    ])
    const id = h.session()
    await h.runtime.submit(id, { parts: [{ type: 'text', text: PARENT }] })
    await h.runtime.idle(id)
    const childId = h.children(id)[0]!
    const parent = h.events(id)
    expect(dataOf(parent, 'subtask.finished')[0]).toMatchObject({ childSessionId: childId, outcome: 'error' })
    expect(dataOf(parent, 'tool.failed')).toEqual([
      {
        partId: expect.any(String),
        error: { kind: 'failed', message: `The general sub-agent (session ${childId}) failed: provider: boom` },
      },
    ])
    expect(dataOf(parent, 'run.finished').at(-1)).toMatchObject({ outcome: 'idle' })
    expect(JSON.stringify(h.model.calls.at(-1)!.prompt)).toContain('failed: provider: boom') // the model saw why
  })

  it('an unknown or primary agent is a tool error naming the sub-agents; no child is created', async () => {
    h = subagentHarness([
      {
        when: parentFirst,
        toolCalls: [
          { id: 'c1', name: 'task', input: { description: 'd', prompt: 'CHILD: x', subagent_type: 'wizard' } },
        ],
      },
      { when: parentAfter, text: 'sorry' },
    ])
    const id = h.session()
    await h.runtime.submit(id, { parts: [{ type: 'text', text: PARENT }] })
    await h.runtime.idle(id)
    expect(dataOf(h.events(id), 'tool.failed')[0]).toMatchObject({
      error: {
        kind: 'invalid',
        message: 'Unknown sub-agent "wizard". Available sub-agents: general. Call task again with one of those.',
      },
    })
    expect(h.children(id)).toEqual([])
  })

  it('cancelling the parent cancels the child', async () => {
    h = subagentHarness([
      { when: parentFirst, ...task('c_task', 'CHILD: wait') },
      { when: child(false), toolCalls: [{ id: 'c_slow', name: 'slow', input: { ms: 20_000 } }] },
    ])
    const id = h.session()
    await h.runtime.submit(id, { parts: [{ type: 'text', text: PARENT }] })
    await until(() => h.children(id).length > 0 && h.events(h.children(id)[0]!).some((e) => e.type === 'tool.called'))
    const childId = h.children(id)[0]!
    await h.runtime.cancel(id)
    await h.runtime.idle(id)
    await h.runtime.idle(childId)
    await until(() => dataOf(h.events(id), 'subtask.finished').length > 0)

    const childEvents = h.events(childId)
    expect(childEvents.map((e) => e.type)).toContain('run.cancel.requested')
    expect(dataOf(childEvents, 'tool.failed')[0]).toMatchObject({ error: { kind: 'aborted' } })
    expect(dataOf(childEvents, 'run.finished')).toEqual([{ runId: expect.any(String), outcome: 'cancelled' }])
    const parent = h.events(id)
    expect(dataOf(parent, 'subtask.finished')[0]).toMatchObject({ childSessionId: childId, outcome: 'cancelled' })
    expect(dataOf(parent, 'tool.failed')[0]).toMatchObject({ error: { kind: 'aborted' } })
    expect(dataOf(parent, 'run.finished')).toEqual([{ runId: expect.any(String), outcome: 'cancelled' }])
  })

  it('a plan-mode parent cannot edit through a child: the child inherits the deny', async () => {
    h = subagentHarness([
      { when: parentFirst, ...task('c_task', 'CHILD: write the file') },
      {
        when: child(false),
        toolCalls: [{ id: 'c_write', name: 'write', input: { filePath: 'out.txt', content: 'hi' } }],
      },
      { when: child(true), text: 'could not write' },
      { when: parentAfter, text: 'done' },
    ])
    const id = h.session('plan')
    await h.runtime.submit(id, { parts: [{ type: 'text', text: PARENT }] })
    await h.runtime.idle(id)
    const childId = h.children(id)[0]!
    const created = h.events(childId)[0]!
    expect((created.data as { rules: unknown[] }).rules).toEqual(
      expect.arrayContaining([
        { permission: 'edit', pattern: '*', action: 'deny' },
        { permission: 'task', pattern: '*', action: 'deny' },
      ]),
    )
    // The general agent itself may edit; inside this child it may not.
    expect(
      (await h.gate.evaluate({ sessionId: childId, agent: 'general' }, { permission: 'edit', patterns: ['out.txt'] }))
        .action,
    ).toBe('deny')
    const childCall = h.model.calls.find((c) => JSON.stringify(c.prompt).includes('CHILD: write the file'))!
    expect(childCall.tools).not.toContain('write')
    expect(childCall.tools).not.toContain('edit')
    expect(dataOf(h.events(childId), 'tool.failed')[0]).toMatchObject({ error: { kind: 'invalid' } })
    expect(existsSync(join(h.directory, 'out.txt'))).toBe(false)
  })

  it('children cannot start children: task is hidden and denied in a child session', async () => {
    h = subagentHarness([
      { when: parentFirst, ...task('c_task', 'CHILD: nest') },
      { when: child(false), ...task('c_nested', 'GRANDCHILD: never') },
      { when: child(true), text: 'could not nest' },
      { when: parentAfter, text: 'done' },
    ])
    const id = h.session()
    await h.runtime.submit(id, { parts: [{ type: 'text', text: PARENT }] })
    await h.runtime.idle(id)
    const childId = h.children(id)[0]!
    expect(h.children(childId)).toEqual([])
    const childCall = h.model.calls.find((c) => JSON.stringify(c.prompt).includes('CHILD: nest'))!
    expect(childCall.tools).not.toContain('task')
    expect(dataOf(h.events(childId), 'tool.failed')[0]).toMatchObject({
      error: { kind: 'invalid', message: expect.stringContaining('Unknown tool "task"') },
    })
    // The depth limit holds even if a rule were to allow the call.
    const ctx = {
      sessionId: childId,
      messageId: 'msg_x',
      callId: 'c_direct',
      partId: 'prt_x',
      agent: 'general',
      directory: h.directory,
      abort: new AbortController().signal,
      progress: () => {},
      ask: async () => {},
      check: () => 'allow' as const,
    }
    await expect(h.subagents.run({ description: 'd', prompt: 'p', agent: 'general', ctx })).rejects.toMatchObject({
      kind: 'denied',
      message: expect.stringContaining('nesting limit 1'),
    })
  })
})
