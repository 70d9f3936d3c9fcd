import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { doctor } from '../../src/cli/doctor.js'
import { CrashClient } from '../crash/ws-client.js'
import { SLOWER_STEPS, SPEC_TIMING, useCluster } from './use-cluster.js'

/**
 * Nodes of a cluster on one PostgreSQL (docs/CLUSTER.md), as real server processes: a session's run is the
 * node's that created it; when that node is killed with -9, a survivor claims the session once its heartbeat
 * is older than the TTL, settles what was cut off and resumes the run under a new epoch — the fenced appends
 * of the dead node's epoch can no longer land. A node stopped cleanly hands its sessions over at once.
 */
const TOKEN = 'cluster-failover-token-0123456789abcdef'
const { ttlMs: TTL_MS, heartbeatMs: HEARTBEAT_MS } = SPEC_TIMING
const script = {
  chunkSize: 16,
  delayMs: 2,
  uniqueCallIds: true,
  steps: [
    ...SLOWER_STEPS,
    {
      when: { userContains: '#half', afterToolResult: false },
      toolCalls: [
        {
          name: 'bash',
          input: { command: 'echo partial > half.txt && sleep 3 && echo ran >> slow.marker', description: 'half' },
        },
      ],
    },
    { when: { userContains: '#half', afterToolResult: true }, text: 'Cut off, then.' },
    {
      when: { userContains: '#slow', afterToolResult: false },
      text: 'Running the slow job.',
      toolCalls: [{ name: 'bash', input: { command: 'sleep 2 && echo ran >> slow.marker', description: 'slow' } }],
    },
    { when: { userContains: '#slow', afterToolResult: true }, text: 'The job is over.' },
    { when: {}, text: 'Noted.' },
  ],
}

const world = useCluster({ token: TOKEN, ttlMs: TTL_MS, heartbeatMs: HEARTBEAT_MS, script })

describe('a cluster of nodes on one PostgreSQL', () => {
  it('resumes a run on a survivor after its node is killed with -9, under a new epoch', async () => {
    const { root, start, call, logOf, ownerOf, until } = world()
    const a = await start('node-a')
    const b = await start('node-b')
    const work = join(root, 'work-1')
    mkdirSync(work)
    const created = await call(a, '/sessions', { directory: work })
    expect(created.status).toBe(201)
    const id = created.json.session.id as string
    expect(await ownerOf(id)).toMatchObject({ epoch: 1 })
    const accepted = await call(a, `/sessions/${id}/inputs`, { parts: [{ type: 'text', text: '#slow' }] })
    expect(accepted.status).toBeLessThan(300)

    // mid-tool: the bash call has started on node-a
    await until(async () => (await logOf(id)).some((e) => e.type === 'tool.called'), 'the tool called')
    await new Promise((r) => setTimeout(r, 300)) // its 2 s sleep under way
    const killedAt = Date.now()
    await a.kill('SIGKILL')

    const resumed = await until(
      async () => (await logOf(id)).find((e) => e.type === 'run.resumed'),
      'the run resumed on the survivor',
    )
    const failoverMs = Date.now() - killedAt
    expect(resumed.meta.epoch).toBe(2)
    expect(failoverMs).toBeGreaterThanOrEqual(TTL_MS - HEARTBEAT_MS) // not before node-a could be dead
    const owner = await ownerOf(id)
    expect(owner?.epoch).toBe(2)
    const listed = await call(b, '/cluster')
    expect(listed.status).toBe(200)
    expect(owner?.owner).toBe(listed.json.node)

    const events = await until(async () => {
      const log = await logOf(id)
      return log.some((e) => e.type === 'run.finished') && log
    }, 'the resumed run finished')
    // the cut-off call settled interrupted exactly once, never re-run; every event after the claim is epoch 2
    const failed = events.filter((e) => e.type === 'tool.failed')
    expect(failed).toHaveLength(1)
    expect(JSON.stringify(failed[0]?.data)).toContain('interrupted')
    const at = events.findIndex((e) => e.type === 'run.resumed')
    const epochs = events.map((e) => e.meta.epoch)
    expect(new Set(epochs.slice(0, at - 1))).toEqual(new Set([1]))
    expect(new Set(epochs.slice(at))).toEqual(new Set([2]))
    // the run's last word (a title may follow it)
    expect(events.filter((e) => e.type === 'run.finished').at(-1)).toMatchObject({ data: { outcome: 'idle' } })
    // no epoch went backwards: what the dead node had queued did not land after the claim
    for (let i = 1; i < epochs.length; i++) expect(epochs[i]).toBeGreaterThanOrEqual(epochs[i - 1] as number)
    // its sandboxed bash died with it (bubblewrap's --die-with-parent): the job never wrote its marker
    await new Promise((r) => setTimeout(r, Math.max(0, killedAt + 2_500 - Date.now())))
    expect(existsSync(join(work, 'slow.marker'))).toBe(false)
  })

  it('writes a claimed session’s directory from its last recorded tree before the run resumes', async () => {
    const { directory, start, call, logOf, until } = world()
    const a = await start('node-a')
    const b = await start('node-b')
    const work = directory('work-handover')
    writeFileSync(join(work, 'kept.txt'), 'as recorded\n')
    const id = (await call(a, '/sessions', { directory: work })).json.session.id as string
    await call(a, `/sessions/${id}/inputs`, { parts: [{ type: 'text', text: '#half' }] })
    // the step's snapshot is recorded, then the bash writes half.txt and sleeps: node-a dies there
    await until(async () => existsSync(join(work, 'half.txt')), 'the bash half done')
    await a.kill('SIGKILL')

    const events = await until(async () => {
      const log = await logOf(id)
      return log.some((e) => e.type === 'run.finished') && log
    }, 'the resumed run finished')
    const types = events.map((e) => e.type)
    const resumed = types.indexOf('run.resumed')
    const started = events.find((e) => e.type === 'workspace.restore.started')
    expect(started?.data).toMatchObject({ kind: 'handover', messages: [] })
    // the directory as found is recorded, then restored, before the run goes on: all under the claim's epoch
    const at = types.indexOf('workspace.restore.started')
    expect(types.slice(at - 1, at + 2)).toEqual([
      'workspace.snapshotted',
      'workspace.restore.started',
      'workspace.restore.completed',
    ])
    expect(at).toBeLessThan(resumed)
    expect(events[at - 1]?.data).toMatchObject({ reason: 'recovery', changed: [{ path: 'half.txt', status: 'added' }] })
    expect(events[at]?.meta.epoch).toBe(2)
    expect(existsSync(join(work, 'half.txt'))).toBe(false)
    expect(readFileSync(join(work, 'kept.txt'), 'utf8')).toBe('as recorded\n')
    // node-b serves the files node-a recorded: at the step's start, and as the dead node left them
    const before = await call(b, `/sessions/${id}/files?at=${events[at - 2]?.seq}`)
    expect(before.status).toBe(200)
    expect(before.json.files.map((f: { path: string }) => f.path)).toEqual(['kept.txt'])
    const found = await call(b, `/sessions/${id}/files?at=${events[at - 1]?.seq}`)
    expect(found.json.files.map((f: { path: string }) => f.path).sort()).toEqual(['half.txt', 'kept.txt'])
  })

  it('fences a frozen node: what it does after it thaws lands nowhere, and it gives its sessions up', async () => {
    const { root, start, call, logOf, until } = world()
    const a = await start('node-a')
    const b = await start('node-b')
    const work = join(root, 'work-3')
    mkdirSync(work)
    const id = (await call(a, '/sessions', { directory: work })).json.session.id as string
    await call(a, `/sessions/${id}/inputs`, { parts: [{ type: 'text', text: '#slower' }] })
    await until(async () => (await logOf(id)).some((e) => e.type === 'tool.called'), 'the tool called')
    await new Promise((r) => setTimeout(r, 500)) // its 4 s sleep under way
    a.child.kill('SIGSTOP') // a zombie: alive, silent past the TTL
    const frozenAt = Date.now()
    try {
      await until(async () => (await logOf(id)).some((e) => e.type === 'run.resumed'), 'the survivor resumed')
      // frozen until past the time its bash would have written its marker: the node itself can stop nothing
      await new Promise((r) => setTimeout(r, Math.max(0, frozenAt + 4_500 - Date.now())))
      // its bash was killed by its watchdog at node-a's lease deadline: the job never wrote its marker
      expect(existsSync(join(work, 'slow.marker'))).toBe(false)
    } finally {
      a.child.kill('SIGCONT')
    }
    // node-a wakes past its lease: it lets the session go and joins again under a new id
    const nodesNow = await until(async () => {
      const listed = (await call(b, '/cluster')).json.nodes as { name: string; alive: boolean }[]
      const named = listed.filter((n) => n.name === 'node-a')
      return named.some((n) => n.alive) && named.length === 2 && listed
    }, 'node-a joined again')
    expect(nodesNow.filter((n) => n.name === 'node-a' && !n.alive)).toHaveLength(1)
    await until(async () => (await logOf(id)).some((e) => e.type === 'run.finished'), 'the resumed run finished')
    const events = await logOf(id)
    const at = events.findIndex((e) => e.type === 'run.resumed')
    expect(events.slice(at).every((e) => e.meta.epoch === 2)).toBe(true)
    expect(events.filter((e) => e.type === 'tool.completed' && e.meta.epoch === 1)).toEqual([])
    expect(events.filter((e) => e.type === 'run.finished')).toHaveLength(1)
  })

  it('kills a frozen node’s MCP server at its lease deadline, as it kills its tools', async () => {
    const { start, until } = world()
    const everything = join(process.cwd(), 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')
    const mcp = { ev: { type: 'local', command: [process.execPath, everything, 'stdio'] } }
    const a = await start('node-a', { config: { mcp } })
    await start('node-b')
    const node = a.child.pid as number
    // the server node-a started: its child running the reference server
    const server = await until(async () => childRunning(node, 'server-everything'), 'the MCP server started')
    a.child.kill('SIGSTOP')
    try {
      await until(async () => !alive(server), 'the MCP server killed', 10_000)
    } finally {
      a.child.kill('SIGCONT')
    }
  })

  it('delivers every node’s events live to a client on any node: each once, in order', async () => {
    const { root, db, start, call, logOf, until } = world()
    const a = await start('node-a')
    const b = await start('node-b')
    const seen = { a: [] as number[], b: [] as number[] }
    const onA = await CrashClient.connect(a.url, TOKEN, 0, (e) => seen.a.push(e.seq))
    const onB = await CrashClient.connect(b.url, TOKEN, 0, (e) => seen.b.push(e.seq))
    try {
      await onA.subscribeAll()
      await onB.subscribeAll()
      // a session run by each node, at the same time
      const ids = await Promise.all(
        [a, b].map(async (node, i) => {
          const work = join(root, `work-live-${i}`)
          mkdirSync(work)
          const id = (await call(node, '/sessions', { directory: work })).json.session.id as string
          await call(node, `/sessions/${id}/inputs`, { parts: [{ type: 'text', text: `hello ${i}` }] })
          return id
        }),
      )
      for (const id of ids)
        await until(async () => (await logOf(id)).some((e) => e.type === 'run.finished'), 'both runs finished')
      // the whole log as it stands once both have heard it (a title may still be appended after a run ends)
      const head = await until(async () => {
        const now = Number((await db.query('SELECT max(seq) AS head FROM events')).rows[0].head)
        return seen.a.length === now && seen.b.length === now && now
      }, 'both clients heard the whole log')
      const all = Array.from({ length: head }, (_, i) => i + 1)
      expect(seen.a).toEqual(all)
      expect(seen.b).toEqual(all)
      expect([onA.gaps, onA.duplicates, onB.gaps, onB.duplicates]).toEqual([0, 0, 0, 0])
    } finally {
      onA.close()
      onB.close()
    }
    // a token one node makes is known to the others at once
    const made = await call(a, '/tokens', { name: 'auditor', role: 'audit' })
    expect(made.status).toBe(201)
    const whoami = await until(async () => {
      const res = await fetch(`${b.url}/whoami`, { headers: { authorization: `Bearer ${made.json.token}` } })
      return res.status === 200 && ((await res.json()) as { name: string })
    }, 'the token known on node-b')
    expect(whoami).toMatchObject({ name: 'auditor' })
  })

  it('refuses a revert of another live node’s session with NOT_OWNER, and hands sessions over at a clean stop', async () => {
    const { root, url, start, call, logOf, ownerOf, until } = world()
    const a = await start('node-a')
    const b = await start('node-b')
    const work = join(root, 'work-2')
    mkdirSync(work)
    const id = (await call(a, '/sessions', { directory: work })).json.session.id as string

    // a revert writes the session's files: it is the owner's to do (docs/CLUSTER.md "Commands at any node")
    await call(a, `/sessions/${id}/inputs?wait=true`, { parts: [{ type: 'text', text: 'hello' }] })
    await until(
      async () => (await logOf(id)).some((e) => e.type === 'workspace.snapshotted'),
      'a snapshot to revert to',
    )
    const refused = await call(b, `/sessions/${id}/revert`, { to: 1 })
    expect(refused.status, JSON.stringify(refused.json)).toBe(421)
    expect(refused.json.code).toBe('NOT_OWNER')
    expect(refused.json.details.owner).toBe((await call(a, '/cluster')).json.node)
    // nothing of the revert was appended (the session's title may still be)
    expect((await logOf(id)).filter((e) => e.type.startsWith('workspace.restore'))).toEqual([])

    const cluster = await call(a, '/cluster')
    const byName = Object.fromEntries(
      (cluster.json.nodes as { name: string; alive: boolean; sessions: number }[]).map((n) => [n.name, n]),
    )
    expect(byName['node-a']).toMatchObject({ alive: true, sessions: 1 })
    expect(byName['node-b']).toMatchObject({ alive: true })

    const stoppedAt = Date.now()
    await a.kill('SIGTERM') // a clean stop: node-a leaves, node-b need not wait out the TTL
    const owner = await until(async () => {
      const o = await ownerOf(id)
      return o && o.epoch === 2 && o
    }, 'the session handed over')
    expect(Date.now() - stoppedAt).toBeLessThan(TTL_MS)
    expect(owner.owner).toBe((await call(b, '/cluster')).json.node)

    const accepted = await call(b, `/sessions/${id}/inputs`, { parts: [{ type: 'text', text: 'hello again' }] })
    expect(accepted.status).toBeLessThan(300)
    await until(async () => (await logOf(id)).some((e) => e.type === 'run.finished'), 'the new owner answered')

    // chronicle doctor, pointed at node-b, reports the cluster
    const lines: string[] = []
    await doctor({ positionals: [], flags: new Map() }, (l) => lines.push(l), {
      PATH: process.env.PATH ?? '',
      HOME: join(root, 'home'),
      CHRONICLE_DATA_DIR: join(root, 'doctor-data'),
      CHRONICLE_URL: b.url,
      CHRONICLE_TOKEN: TOKEN,
      CHRONICLE_DATABASE_URL: url,
      CHRONICLE_CLUSTER_NODE: 'doctor',
    })
    const line = lines.find((l) => l.includes('  cluster: '))
    expect(line).toMatch(/^ok {2}cluster: node node-b-\S+; 1 of 2 nodes alive — /)
    expect(line).toMatch(/node-a-\S+ \(stopped, 0 sessions/)
    expect(line).toMatch(/node-b-\S+ \(alive, 1 sessions/)
  })
})

/** A child of `parent` whose command line mentions `what`, if one runs. */
function childRunning(parent: number, what: string): number | undefined {
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const ppid = Number(readFileSync(`/proc/${name}/stat`, 'utf8').split(') ')[1]?.split(' ')[1])
      if (ppid === parent && readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(what)) return Number(name)
    } catch {
      // ended while listed
    }
  }
  return undefined
}

/** Whether the process runs (a zombie waiting to be reaped does not). */
function alive(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ')[0] !== 'Z'
  } catch {
    return false
  }
}
