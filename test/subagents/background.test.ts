import { afterEach, describe, expect, it } from 'vitest'
import type { StoredEvent } from '../../src/events/envelope.js'
import { STEER_PREFIX } from '../../src/runtime/loop/chat-messages.js'
import { recoverSessions } from '../../src/runtime/recovery/recovery.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'
import { dataOf, subagentHarness, task, until, type SubagentHarness } from './helpers.js'

/**
 * Background sub-agents (docs/COMPACTION.md "Background sub-agents"): `task {background: true}` returns
 * with the child's id at once, the parent goes on, and the child's result reaches the parent once, as a
 * recorded input — at the parent's next step, or starting a run when it is idle.
 */

const PARENT = 'delegate in the background'
const REPORT = { userContains: 'background sub-agent session' }
const childWork = (ms: number) => [
  {
    when: { userContains: 'CHILD:', afterToolResult: false },
    toolCalls: [{ id: 'c_child', name: 'slow', input: { ms } }],
  },
  { when: { userContains: 'CHILD:', afterToolResult: true }, text: 'child report: 42' },
]
const reportOf = (events: StoredEvent[], childId: string) =>
  events.filter((e) => e.type === 'input.accepted' && e.data.inputId === `subtask:${childId}`)
const seqOf = (events: StoredEvent[], type: string) => events.find((e) => e.type === type)?.seq ?? -1

describe('a background sub-agent', () => {
  let h: SubagentHarness
  afterEach(() => h.close())

  it('returns at once; the parent works on; the result reaches it once, at its next step', async () => {
    h = subagentHarness(
      [
        { when: REPORT, text: 'parent: the child said 42' },
        { when: { userContains: PARENT, afterToolResult: false }, ...task('c_bg', 'CHILD: work', 'general', true) },
        // the parent's own work outlasts the child's
        {
          when: { userContains: PARENT, afterToolResult: true },
          toolCalls: [{ id: 'c_own', name: 'slow', input: { ms: 1500 } }],
        },
        ...childWork(50),
      ],
      { watch: true },
    )
    const id = h.session()
    await h.runtime.submit(id, { parts: [{ type: 'text', text: PARENT }] })
    await until(() => dataOf(h.events(id), 'run.finished').length === 1, 10_000)

    const [childId] = h.children(id)
    if (!childId) throw new Error('no child')
    const parent = h.events(id)
    const child = h.events(childId)
    // the task call completed before the child's run ended: it did not wait
    const completed = parent.find((e) => e.type === 'tool.completed')
    expect(completed?.data).toMatchObject({
      output: expect.stringMatching(
        new RegExp(`^task_id: ${childId} \\(the sub-agent's session, running in the background\\)`),
      ),
      metadata: { sessionId: childId, agent: 'general', background: true },
    })
    expect(completed?.seq).toBeLessThan(seqOf(child, 'run.finished'))
    // one parent run: the report was steered into it at the step after the child ended
    expect(dataOf(parent, 'run.started')).toHaveLength(1)
    expect(dataOf(parent, 'subtask.finished')).toEqual([
      { partId: expect.any(String), callId: 'c_bg', childSessionId: childId, outcome: 'idle' },
    ])
    const reports = reportOf(parent, childId)
    expect(reports).toHaveLength(1)
    expect(reports[0]?.data).toMatchObject({ delivery: 'steer' })
    expect(reports[0]?.meta.actor).toBe('runtime')
    expect(dataOf(parent, 'input.delivered').at(-1)).toMatchObject({ inputId: `subtask:${childId}`, steered: true })
    expect(dataOf(parent, 'run.finished')).toEqual([{ runId: expect.any(String), outcome: 'idle' }])
    // the model got the child's answer as the runtime's reminder, not as a message from the user
    const last = JSON.stringify(h.model.calls.at(-1)?.prompt)
    expect(last).toContain('<task_result>\\nchild report: 42\\n</task_result>')
    expect(last).not.toContain(JSON.stringify(STEER_PREFIX).slice(1, 30))
    expect(reportOf(h.events(id), childId)).toHaveLength(1)
  })

  it('an idle parent is woken by the result: a second run answers it', async () => {
    h = subagentHarness(
      [
        { when: REPORT, text: 'parent: the child said 42' },
        { when: { userContains: PARENT, afterToolResult: false }, ...task('c_bg', 'CHILD: work', 'general', true) },
        { when: { userContains: PARENT, afterToolResult: true }, text: 'parent: started it, waiting' },
        ...childWork(300),
      ],
      { watch: true },
    )
    const id = h.session()
    await h.runtime.submit(id, { parts: [{ type: 'text', text: PARENT }] })
    await until(() => dataOf(h.events(id), 'run.finished').length === 2, 10_000)
    const parent = h.events(id)
    const [childId] = h.children(id)
    expect(dataOf(parent, 'run.finished').map((d) => d.outcome)).toEqual(['idle', 'idle'])
    // the first run ended before the child did; the report started the second
    expect(parent.filter((e) => e.type === 'run.finished')[0]?.seq).toBeLessThan(
      seqOf(h.events(childId ?? ''), 'run.finished'),
    )
    expect(reportOf(parent, childId ?? '')).toHaveLength(1)
    const texts = parent.filter((e) => e.type === 'text.delta').map((e) => (e.data as { text: string }).text)
    expect(texts.join('')).toContain('parent: the child said 42')
  })

  it('cancelling the parent cancels its running background child; the end is recorded, no run starts', async () => {
    h = subagentHarness(
      [
        { when: { userContains: PARENT, afterToolResult: false }, ...task('c_bg', 'CHILD: work', 'general', true) },
        {
          when: { userContains: PARENT, afterToolResult: true },
          toolCalls: [{ id: 'c_own', name: 'slow', input: { ms: 20_000 } }],
        },
        ...childWork(20_000),
      ],
      { watch: true },
    )
    const id = h.session()
    await h.runtime.submit(id, { parts: [{ type: 'text', text: PARENT }] })
    await until(
      () => h.children(id).length === 1 && h.events(h.children(id)[0] ?? '').some((e) => e.type === 'tool.called'),
    )
    const childId = h.children(id)[0] ?? ''
    await h.runtime.cancel(id)
    await until(() => reportOf(h.events(id), childId).length === 1, 10_000)
    await h.runtime.idle(id)

    expect(dataOf(h.events(childId), 'run.finished')).toEqual([{ runId: expect.any(String), outcome: 'cancelled' }])
    const parent = h.events(id)
    expect(dataOf(parent, 'run.finished')).toEqual([{ runId: expect.any(String), outcome: 'cancelled' }])
    expect(dataOf(parent, 'subtask.finished')).toEqual([
      { partId: expect.any(String), callId: 'c_bg', childSessionId: childId, outcome: 'cancelled' },
    ])
    // recorded for the model's next turn, without a run of its own
    expect(reportOf(parent, childId)[0]?.data).toMatchObject({ noReply: true })
    expect(dataOf(parent, 'run.started')).toHaveLength(1)
  })

  it('task_status shows a child of the session and cancels it; another session cannot name it', async () => {
    h = subagentHarness(
      [
        { when: { userContains: PARENT, afterToolResult: false }, ...task('c_bg', 'CHILD: work', 'general', true) },
        { when: { userContains: PARENT, afterToolResult: true }, text: 'parent: started it' },
        {
          when: { userContains: 'peek', afterToolResult: false },
          toolCalls: [{ id: 'c_peek', name: 'task_status', input: { task_id: 'ses_nobody' } }],
        },
        { when: { userContains: 'peek', afterToolResult: true }, text: 'no such task' },
        ...childWork(20_000),
      ],
      { watch: true },
    )
    const id = h.session()
    const other = h.session()
    await h.runtime.submit(id, { parts: [{ type: 'text', text: PARENT }] })
    await until(
      () => h.children(id).length === 1 && h.events(h.children(id)[0] ?? '').some((e) => e.type === 'tool.called'),
    )
    const childId = h.children(id)[0] ?? ''

    expect(await h.subagents.status(id, childId, false)).toEqual({
      childSessionId: childId,
      title: 'delegated work (@general subagent)',
      running: true,
      cancelling: false,
      text: '',
    })
    await expect(h.subagents.status(other, childId, true)).rejects.toThrow(
      `No sub-agent task ${childId} was started by this session.`,
    )
    expect(h.events(childId).some((e) => e.type === 'run.cancel.requested')).toBe(false) // the refusal cancelled nothing

    expect(await h.subagents.status(id, childId, true)).toMatchObject({ running: true, cancelling: true })
    await h.runtime.idle(childId)
    expect(await h.subagents.status(id, childId, false)).toMatchObject({ running: false, outcome: 'cancelled' })

    // the model naming a session that is not its child gets a tool error it can read
    await h.runtime.idle(id)
    await h.runtime.submit(id, { parts: [{ type: 'text', text: 'peek' }] })
    await until(() => h.events(id).some((e) => e.type === 'tool.failed'))
    expect(dataOf(h.events(id), 'tool.failed').at(-1)).toMatchObject({
      error: { kind: 'invalid', message: 'No sub-agent task ses_nobody was started by this session.' },
    })
  })

  it('across a restart: the child resumes and its result reaches the parent once', async () => {
    h = subagentHarness(
      [
        { when: REPORT, text: 'parent: the child said 42' },
        { when: { userContains: PARENT, afterToolResult: false }, ...task('c_bg', 'CHILD: work', 'general', true) },
        { when: { userContains: PARENT, afterToolResult: true }, text: 'parent: started it, waiting' },
        {
          when: { userContains: 'CHILD:', afterToolResult: false },
          toolCalls: [{ id: 'c_child', name: 'slow', input: { ms: 20_000 } }],
        },
        { when: { userContains: 'CHILD:', afterToolResult: true }, text: 'child report: 42' },
      ],
      { watch: true },
    )
    const id = h.session()
    await h.runtime.submit(id, { parts: [{ type: 'text', text: PARENT }] })
    await until(
      () => h.children(id).length === 1 && h.events(h.children(id)[0] ?? '').some((e) => e.type === 'tool.called'),
    )
    await h.runtime.idle(id) // the parent answered and is idle; its child is mid-tool
    const childId = h.children(id)[0] ?? ''
    await h.runtime.stop() // the server goes down mid-child

    const recovery = await recoverSessions(sqlitePorts(h.store))
    expect(recovery.resumed.map((r) => r.sessionId)).toEqual([childId]) // the idle parent has nothing to resume
    const runtime = h.restart()
    for (const r of recovery.resumed) await runtime.resume(r.sessionId, r.runId)
    await until(() => dataOf(h.events(id), 'run.finished').length === 2, 10_000)

    const child = h.events(childId)
    expect(dataOf(child, 'tool.failed')).toEqual([
      { partId: expect.any(String), error: { kind: 'interrupted', message: expect.any(String) } },
    ])
    expect(dataOf(child, 'run.finished')).toEqual([{ runId: expect.any(String), outcome: 'idle' }])
    const parent = h.events(id)
    expect(reportOf(parent, childId)).toHaveLength(1)
    expect(dataOf(parent, 'subtask.finished').map((d) => d.outcome)).toEqual(['idle'])
    expect(JSON.stringify(h.model.calls.at(-1)?.prompt)).toContain('child report: 42')
  })
})
