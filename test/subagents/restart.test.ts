import { afterEach, describe, expect, it } from 'vitest'
import { recoverSessions } from '../../src/runtime/recovery/recovery.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'
import { watchOrphanedSubtasks, type OrphanWatcher } from '../../src/runtime/subagents/orphans.js'
import { dataOf, subagentHarness, task, until, type SubagentHarness } from './helpers.js'

const PARENT = 'delegate please'

describe('a sub-agent across a restart', () => {
  let h: SubagentHarness
  let watcher: OrphanWatcher | undefined
  afterEach(async () => {
    watcher?.close()
    await h.close()
  })

  /** A parent whose task call a restart cut off, its child resumed; the watcher started on the new runtime. */
  async function restarted(): Promise<{
    id: string
    childId: string
    resume: () => void
    runtime: ReturnType<SubagentHarness['restart']>
  }> {
    h = subagentHarness([
      { when: { userContains: PARENT, afterToolResult: false }, ...task('c_task', 'CHILD: wait, then answer') },
      {
        when: { userContains: 'CHILD:', afterToolResult: false },
        toolCalls: [{ id: 'c_slow', name: 'slow', input: { ms: 20_000 } }],
      },
      { when: { userContains: 'CHILD:', afterToolResult: true }, text: 'child answer after restart' },
      { when: { userContains: 'whose task call was interrupted' }, text: 'parent got the child result' },
      {
        when: { userContains: PARENT, afterToolResult: true },
        text: 'the task was interrupted; waiting for its report',
      },
    ])
    const id = h.session()
    await h.runtime.submit(id, { parts: [{ type: 'text', text: PARENT }] })
    await until(() => h.children(id).length > 0 && h.events(h.children(id)[0]!).some((e) => e.type === 'tool.called'))
    const childId = h.children(id)[0]!

    await h.runtime.stop() // the server goes down: both runs stay open
    expect(h.store.readSession(childId).map((e) => e.type)).not.toContain('run.cancel.requested') // a shutdown is no cancel

    const recovery = await recoverSessions(sqlitePorts(h.store))
    expect(recovery.resumed.map((r) => r.sessionId).sort()).toEqual([id, childId].sort())
    const runtime = h.restart()
    watcher = watchOrphanedSubtasks({ ports: sqlitePorts(h.store), subagents: h.subagents, runtime: () => runtime })
    expect(await watcher.sweep()).toBe(0) // the child is still running
    return {
      id,
      childId,
      runtime,
      resume: async () => {
        for (const r of recovery.resumed) await runtime.resume(r.sessionId, r.runId)
      },
    }
  }

  it('the child resumes as a normal session and its outcome reaches the waiting parent as a queued report', async () => {
    const { id, childId, runtime, resume } = await restarted()
    await resume()

    await until(() => dataOf(h.events(id), 'run.finished').length === 2)
    await runtime.idle(id)

    const child = h.events(childId)
    expect(child.map((e) => e.type)).toContain('run.resumed')
    expect(dataOf(child, 'run.finished')).toEqual([{ runId: expect.any(String), outcome: 'idle' }])

    const parent = h.events(id)
    // Recovery settled the link as cancelled; the watcher records the child's real outcome over it.
    expect(dataOf(parent, 'subtask.finished').map((d) => d.outcome)).toEqual(['cancelled', 'idle'])
    expect(dataOf(parent, 'tool.failed')[0]).toMatchObject({ error: { kind: 'interrupted' } })
    const report = parent.find((e) => e.type === 'input.accepted' && e.data.inputId === `subtask:${childId}`)
    expect(report?.data).toMatchObject({ delivery: 'queue' })
    expect(report?.meta.actor).toBe('runtime') // the runtime reports it, not the user
    const reportText = JSON.stringify(report?.data)
    expect(reportText).toContain('<task_result>\\nchild answer after restart\\n</task_result>')
    // The parent's loop ran again with the report and answered it.
    expect(JSON.stringify(h.model.calls.at(-1)!.prompt)).toContain('child answer after restart')
    expect(dataOf(parent, 'run.finished').at(-1)).toMatchObject({ outcome: 'idle' })
    expect(await watcher?.sweep()).toBe(0) // reported once
  })

  it('a sweep among some sessions (a cluster node’s claimed ones) reports only their children and their parents’', async () => {
    const { id, childId, runtime, resume } = await restarted()
    watcher?.close() // nobody hears the child finish: the report waits for a sweep
    await resume()
    await until(() => dataOf(h.events(childId), 'run.finished').length === 1)
    await runtime.idle(id)
    watcher = watchOrphanedSubtasks({ ports: sqlitePorts(h.store), subagents: h.subagents, runtime: () => runtime })
    expect(await watcher.sweep(new Set(['ses_elsewhere']))).toBe(0)
    expect(h.events(id).some((e) => e.type === 'input.accepted' && e.data.inputId === `subtask:${childId}`)).toBe(false)
    expect(await watcher.sweep(new Set([id]))).toBe(1) // the parent was claimed: its child's report is made
    expect(await watcher.sweep(new Set([childId]))).toBe(0) // once
  })

  it('two reporters at once (a second server, a sweep): the parent hears the child’s outcome once', async () => {
    const { id, childId, runtime, resume } = await restarted()
    // The first report's append finds the parent changed under it: the same report, made meanwhile elsewhere.
    const enqueue = h.store.enqueue.bind(h.store)
    let raced = false
    // the other reporter: its subtask.finished commits at once, in the middle of this append; its input follows
    let other: Promise<number> | undefined
    h.store.enqueue = ((session, events, options) => {
      if (!raced && events.some((e) => e.type === 'subtask.finished' && e.data.outcome === 'idle')) {
        raced = true
        other = watcher?.sweep()
      }
      return enqueue(session, events, options)
    }) as typeof h.store.enqueue
    await resume()
    await until(() => dataOf(h.events(id), 'run.finished').length === 2)
    await runtime.idle(id)
    expect(raced).toBe(true)
    expect(await other).toBe(1)
    const parent = h.events(id)
    expect(dataOf(parent, 'subtask.finished').map((d) => d.outcome)).toEqual(['cancelled', 'idle'])
    expect(parent.filter((e) => e.type === 'input.accepted' && e.data.inputId === `subtask:${childId}`)).toHaveLength(1)
  })
})
