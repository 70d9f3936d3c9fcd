import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { SLOWER_STEPS, SPEC_TIMING, useCluster } from './use-cluster.js'

/**
 * Commands at any node (docs/CLUSTER.md): a client may reach any node of the cluster with an input, a cancel,
 * a permission reply or an elicitation answer for any session. The node that takes it makes it durable in
 * the session's log — decided on the session as it stands, so it is acknowledged as on one node — and the node
 * that runs the session acts on it when it hears it: no forwarding, and nothing lost when that node dies.
 */
const TOKEN = 'cluster-commands-token-0123456789abcdef'
const { ttlMs: TTL_MS, heartbeatMs: HEARTBEAT_MS } = SPEC_TIMING
const script = {
  chunkSize: 16,
  delayMs: 2,
  uniqueCallIds: true,
  steps: [
    ...SLOWER_STEPS,
    {
      when: { userContains: '#ask', afterToolResult: false },
      toolCalls: [{ name: 'bash', input: { command: 'echo asked >> asked.marker', description: 'asked' } }],
    },
    { when: { userContains: '#ask', afterToolResult: true }, text: 'Done as asked.' },
    { when: {}, text: 'Noted.' },
  ],
}
const world = useCluster({ token: TOKEN, ttlMs: TTL_MS, heartbeatMs: HEARTBEAT_MS, script })

const text = (t: string, inputId?: string) => ({ ...(inputId && { inputId }), parts: [{ type: 'text', text: t }] })

describe('commands at any node of a cluster', () => {
  it('answers an input taken by a node that does not run the session: the owner runs it, the taker waits for it', async () => {
    const { start, call, logOf, ownerOf } = world()
    const a = await start('node-a')
    const b = await start('node-b')
    const id = (await call(a, '/sessions', { directory: world().directory('work-input') })).json.session.id as string

    const answered = await call(b, `/sessions/${id}/inputs?wait=true`, text('hello from b', 'in_b1'))
    expect(answered.status).toBe(200)
    expect(answered.json).toMatchObject({ inputId: 'in_b1', duplicate: false, outcome: 'idle' })
    expect(answered.json.text).toBe('Noted.')
    // node-a ran it, and still owns the session at epoch 1; node-b holds nothing
    expect(await ownerOf(id)).toEqual({ owner: (await call(a, '/cluster')).json.node, epoch: 1 })
    const events = await logOf(id)
    expect(events.filter((e) => e.type === 'input.accepted')).toHaveLength(1)
    expect(events.filter((e) => e.type === 'run.started')).toHaveLength(1)
    expect(new Set(events.map((e) => e.meta.epoch))).toEqual(new Set([1]))
    // the same input again, at either node: the original acceptance, nothing appended
    for (const node of [a, b]) {
      const again = await call(node, `/sessions/${id}/inputs`, text('hello from b', 'in_b1'))
      expect(again.json).toMatchObject({ inputId: 'in_b1', duplicate: true })
    }
    expect((await logOf(id)).filter((e) => e.type === 'input.accepted')).toHaveLength(1)
  })

  it('lets a permission reply taken by another node release the owner’s parked tool call', async () => {
    const { start, call, logOf, until } = world()
    const ask = [{ permission: 'bash', pattern: '*', action: 'ask' as const }]
    const a = await start('node-a', { permission: ask })
    const b = await start('node-b', { permission: ask })
    const work = world().directory('work-ask')
    const id = (await call(a, '/sessions', { directory: work })).json.session.id as string
    await call(a, `/sessions/${id}/inputs`, text('#ask'))
    const asked = await until(
      async () => (await logOf(id)).find((e) => e.type === 'permission.requested'),
      'the owner asked',
    )
    const replied = await call(b, `/sessions/${id}/permissions/${asked.data.requestId}`, { reply: 'once' })
    expect(replied.status).toBe(200)
    await until(async () => (await logOf(id)).some((e) => e.type === 'run.finished'), 'the run finished')
    expect(existsSync(join(work, 'asked.marker'))).toBe(true)
    const events = await logOf(id)
    expect(events.filter((e) => e.type === 'tool.completed')).toHaveLength(1)
    expect(events.filter((e) => e.type === 'run.finished').at(-1)).toMatchObject({ data: { outcome: 'idle' } })
  })

  it('lets a cancel taken by another node abort the owner’s run and its tool', async () => {
    const { start, call, logOf, until } = world()
    const a = await start('node-a')
    const b = await start('node-b')
    const work = world().directory('work-cancel')
    const id = (await call(a, '/sessions', { directory: work })).json.session.id as string
    await call(a, `/sessions/${id}/inputs`, text('#slower'))
    await until(async () => (await logOf(id)).some((e) => e.type === 'tool.called'), 'the tool called')
    const cancelledAt = Date.now()
    const cancelled = await call(b, `/sessions/${id}/cancel`, {})
    expect(cancelled.json).toEqual({ cancelled: true })
    const finished = await until(
      async () => (await logOf(id)).find((e) => e.type === 'run.finished'),
      'the run finished',
    )
    expect(finished.data).toMatchObject({ outcome: 'cancelled' })
    expect(Date.now() - cancelledAt).toBeLessThan(3_000) // not the bash's 4 s: it was killed
    await new Promise((r) => setTimeout(r, Math.max(0, cancelledAt + 4_500 - Date.now())))
    expect(existsSync(join(work, 'slow.marker'))).toBe(false)
  })

  it('delivers an input acknowledged by one node once, though the owner dies right after', async () => {
    const { start, call, logOf, ownerOf, until } = world()
    const a = await start('node-a')
    const b = await start('node-b')
    const id = (await call(a, '/sessions', { directory: world().directory('work-kill') })).json.session.id as string
    await call(a, `/sessions/${id}/inputs`, text('#slower'))
    await until(async () => (await logOf(id)).some((e) => e.type === 'tool.called'), 'the tool called')
    // queued behind the run at node-b, acknowledged once durable; then node-a is killed
    const queued = await call(b, `/sessions/${id}/inputs`, { ...text('after the job', 'in_q'), delivery: 'queue' })
    expect(queued.status).toBe(202)
    await a.kill('SIGKILL')

    await until(async () => (await ownerOf(id))?.epoch === 2, 'node-b claimed the session')
    const events = await until(async () => {
      const log = await logOf(id)
      const delivered = log.findIndex((e) => e.type === 'input.delivered' && e.data.inputId === 'in_q')
      return delivered >= 0 && log.slice(delivered).some((e) => e.type === 'run.finished') && log
    }, 'the queued input answered')
    expect(events.filter((e) => e.type === 'input.accepted' && e.data.inputId === 'in_q')).toHaveLength(1)
    expect(events.filter((e) => e.type === 'input.delivered' && e.data.inputId === 'in_q')).toHaveLength(1)
    // a retry of the acknowledged input at the survivor is the original acceptance
    const again = await call(b, `/sessions/${id}/inputs`, { ...text('after the job', 'in_q'), delivery: 'queue' })
    expect(again.json).toMatchObject({ duplicate: true, seq: queued.json.seq })
  })
})
