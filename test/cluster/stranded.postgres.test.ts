import { describe, expect, it } from 'vitest'
import { SLOWER_STEPS, SPEC_TIMING, useCluster } from './use-cluster.js'

/**
 * A pinned session is not moved silently (docs/CLUSTER.md "Workspaces that move"): when its node dies and its
 * directory is on that node's machine only, no survivor on another machine takes it over; one of them records
 * that its work waits for a node there (session.stranded), once, and a node that starts on that machine claims
 * it and resumes the run, which clears the mark.
 */
const TOKEN = 'cluster-stranded-token-0123456789abcdef'
const { ttlMs: TTL_MS, heartbeatMs: HEARTBEAT_MS } = SPEC_TIMING
const script = {
  chunkSize: 16,
  delayMs: 2,
  uniqueCallIds: true,
  steps: [...SLOWER_STEPS, { when: {}, text: 'Noted.' }],
}
const world = useCluster({ token: TOKEN, ttlMs: TTL_MS, heartbeatMs: HEARTBEAT_MS, script })
const on = (host: string) => ({ config: { cluster: { host } } })

describe('a session pinned to the machine of a dead node', () => {
  it('says its work waits for that machine, once, and goes on when a node starts there', async () => {
    const { directory, start, call, logOf, ownerOf, until } = world()
    const a = await start('node-a', on('machine-1'))
    const b = await start('node-b', on('machine-2'))
    const running = (await call(a, '/sessions', { directory: directory('pinned-run') })).json.session.id as string
    const idle = (await call(a, '/sessions', { directory: directory('pinned-idle') })).json.session.id as string
    expect((await call(a, `/sessions/${running}/inputs`, { parts: [{ type: 'text', text: '#slower' }] })).status).toBe(
      202,
    )
    await until(async () => (await logOf(running)).some((e) => e.type === 'tool.called'), 'the tool called')
    const deadNode = (await ownerOf(running))?.owner as string
    await a.kill('SIGKILL')

    const stranded = await until(
      async () => (await logOf(running)).find((e) => e.type === 'session.stranded'),
      'the run said to be stranded',
    )
    expect(stranded.data).toEqual({ node: deadNode, host: 'machine-1' })
    // recorded at another node, under the dead owner's epoch: node-b took nothing over
    expect(await ownerOf(running)).toEqual({ owner: deadNode, epoch: 1 })
    const seen = (await call(b, `/sessions/${running}`)).json.session
    expect(seen.stranded).toMatchObject({ node: deadNode, host: 'machine-1' })
    expect(seen.run).not.toBeNull()

    // an idle session has no work to wait: nothing is said of it, until an input is taken for it elsewhere
    expect((await logOf(idle)).some((e) => e.type === 'session.stranded')).toBe(false)
    expect((await call(b, `/sessions/${idle}/inputs`, { parts: [{ type: 'text', text: 'hello' }] })).status).toBe(202)
    await until(
      async () => (await logOf(idle)).some((e) => e.type === 'session.stranded'),
      'the waiting input said to be stranded',
    )

    // said once, however many heartbeats look again
    await new Promise((r) => setTimeout(r, 12 * HEARTBEAT_MS))
    const before = await logOf(running)
    expect(before.filter((e) => e.type === 'session.stranded')).toHaveLength(1)
    expect(before.some((e) => e.type === 'run.resumed')).toBe(false)

    // a node on machine-1 claims both: the run resumes, the input runs, and neither is stranded any more
    const c = await start('node-c', on('machine-1'))
    const resumed = await until(
      async () => (await logOf(running)).find((e) => e.type === 'run.resumed'),
      'the run resumed on machine-1',
    )
    expect(resumed.meta.epoch).toBe(2)
    await until(async () => (await logOf(idle)).some((e) => e.type === 'run.finished'), 'the waiting input answered')
    for (const id of [running, idle]) {
      const session = await until(async () => {
        const s = (await call(c, `/sessions/${id}`)).json.session
        return s.stranded === undefined && s
      }, 'the mark cleared')
      expect(session.stranded).toBeUndefined()
    }
    expect((await logOf(running)).filter((e) => e.type === 'session.stranded')).toHaveLength(1)
  })
})
