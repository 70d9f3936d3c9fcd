import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import { isChronicleError } from '../../src/events/errors.js'
import { claimSessions, heartbeatAndClaim, joinCluster, leaveCluster } from '../../src/events/postgres/cluster-nodes.js'
import { Fence } from '../../src/events/postgres/fence.js'
import { PG_TYPES, PostgresEventLog } from '../../src/events/postgres/log.js'
import { Recorder } from '../../src/runtime/loop/recorder.js'
import { usePostgres } from '../support/use-postgres.js'

/**
 * The fence (docs/CLUSTER.md "Ownership and the fence"), on a real PostgreSQL server: two logs on one
 * database are two nodes. A session belongs to the node that created it, at epoch 1; a survivor that claims
 * it raises the epoch; from then on the deposed owner's appends insert nothing, whatever they carry.
 */
const server = usePostgres()

const meta = { actor: 'user' as const }
const created: ChronicleEvent = { type: 'session.created', data: { directory: '/w', agent: 'build', model: null } }
const renamed = (title: string): ChronicleEvent => ({ type: 'session.renamed', data: { title } })
const TTL = 60_000

describe('the fence: an append from a node that does not own the session inserts nothing', () => {
  const closing: (() => Promise<void>)[] = []
  afterEach(async () => {
    for (const close of closing.splice(0)) await close()
  })

  const cluster = async () => {
    const url = await server().database()
    const db = new pg.Pool({ connectionString: url, max: 2, types: PG_TYPES })
    const node = async (id: string) => {
      const fence = new Fence(id)
      const log = await PostgresEventLog.open(url, { fence })
      await joinCluster(db, { id, name: id })
      closing.push(() => log.close())
      return { fence, log }
    }
    closing.push(() => db.end())
    return { db, node }
  }

  it('makes a new session its creator’s at epoch 1, recorded in every event’s meta', async () => {
    const { db, node } = await cluster()
    const a = await node('node-a')
    const events = await a.log.append('ses_1', [created, renamed('one')], { meta, expectedVersion: 0 })
    expect(events.map((e) => e.meta.epoch)).toEqual([1, 1])
    expect(a.fence.epochOf('ses_1')).toBe(1)
    const { rows } = await db.query('SELECT owner, epoch FROM streams WHERE id = $1', ['ses_1'])
    expect(rows).toEqual([{ owner: 'node-a', epoch: 1 }])
    // the meta as stored, which the hash chain covers
    const stored = await a.log.readSession('ses_1')
    expect(stored.map((e) => e.meta)).toEqual([
      { actor: 'user', epoch: 1 },
      { actor: 'user', epoch: 1 },
    ])
  })

  it('refuses another live node’s append with NOT_OWNER naming the owner, and appends nothing', async () => {
    const { node } = await cluster()
    const a = await node('node-a')
    const b = await node('node-b')
    await a.log.append('ses_1', [created], { meta })
    const err = await b.log.append('ses_1', [renamed('intruder')], { meta }).catch((e: unknown) => e)
    expect(isChronicleError(err, 'NOT_OWNER')).toBe(true)
    expect((err as { details?: unknown }).details).toEqual({ sessionId: 'ses_1', owner: 'node-a' })
    expect(await a.log.version('ses_1')).toBe(1)
    // the owner goes on
    await a.log.append('ses_1', [renamed('mine')], { meta, expectedVersion: 1 })
    expect(await b.log.version('ses_1')).toBe(2)
  })

  it('deposes the owner once a survivor claims its session: the old owner’s appends fail, and it lets go', async () => {
    const { db, node } = await cluster()
    const a = await node('node-a')
    const b = await node('node-b')
    await a.log.append('ses_1', [created], { meta })
    const lost: string[] = []
    a.fence.onLost((id) => lost.push(id))

    await leaveCluster(db, 'node-a') // dead at once, as a clean stop
    const claimed = await claimSessions(db, 'node-b', TTL, 100)
    expect(claimed).toEqual([{ sessionId: 'ses_1', epoch: 2 }])
    for (const c of claimed) b.fence.hold(c.sessionId, c.epoch)

    // a late append of the deposed owner: refused in the transaction, however it was queued
    const late = await a.log.append('ses_1', [renamed('late')], { meta, expectedVersion: 1 }).catch((e: unknown) => e)
    expect(isChronicleError(late, 'NOT_OWNER')).toBe(true)
    expect(lost).toEqual(['ses_1'])
    expect(a.fence.epochOf('ses_1')).toBeUndefined()

    const next = await b.log.append('ses_1', [renamed('survivor')], { meta, expectedVersion: 1 })
    expect(next.map((e) => [e.version, e.meta.epoch])).toEqual([[2, 2]])
    const titles = (await b.log.readSession('ses_1')).map((e) => [e.type, e.meta.epoch])
    expect(titles).toEqual([
      ['session.created', 1],
      ['session.renamed', 2],
    ])
  })

  it('refuses what a run it let go of records after the node claimed the session back; the new epoch stays held', async () => {
    const { db, node } = await cluster()
    const a = await node('node-a')
    await a.log.append('ses_1', [created], { meta })
    expect(a.log.heldAt('ses_1')).toBe(1)
    const run = new Recorder(a.log, 'ses_1') // a run begins under epoch 1

    // the lease lapsed: every session let go, the node a new member, which claims its own session back
    a.fence.renew('node-a2')
    await leaveCluster(db, 'node-a')
    await joinCluster(db, { id: 'node-a2', name: 'node-a2' })
    const claimed = await claimSessions(db, 'node-a2', TTL, 100)
    expect(claimed).toEqual([{ sessionId: 'ses_1', epoch: 2 }])
    for (const c of claimed) a.fence.hold(c.sessionId, c.epoch)

    // the run let go of, still stopping, records a call's end: refused, as a plain append under epoch 1 is
    run.emit(renamed('late'), meta)
    const late = await run.settle().catch((e: unknown) => e)
    expect(isChronicleError(late, 'NOT_OWNER')).toBe(true)
    expect((late as { details?: unknown }).details).toEqual({ sessionId: 'ses_1', epoch: 1, held: 2 })
    const plain = await a.log.append('ses_1', [renamed('late')], { meta, epoch: 1 }).catch((e: unknown) => e)
    expect(isChronicleError(plain, 'NOT_OWNER')).toBe(true)
    expect(await a.log.version('ses_1')).toBe(1)

    // the session stays this node's: the run that resumes it records under epoch 2
    expect(a.fence.epochOf('ses_1')).toBe(2)
    const resumed = new Recorder(a.log, 'ses_1')
    resumed.emit(renamed('resumed'), meta)
    await resumed.settle()
    expect((await a.log.readSession('ses_1')).map((e) => [e.type, e.meta.epoch])).toEqual([
      ['session.created', 1],
      ['session.renamed', 2],
    ])
  })

  it('sinks only the fenced append of a batch: the other sessions queued with it commit', async () => {
    const { db, node } = await cluster()
    const a = await node('node-a')
    const b = await node('node-b')
    await b.log.append('ses_b', [created], { meta })
    await a.log.append('ses_a', [created], { meta })
    const results = await Promise.allSettled([
      a.log.enqueue('ses_a', [renamed('a')], { meta }),
      a.log.enqueue('ses_b', [renamed('not mine')], { meta }),
      a.log.enqueue('ses_c', [created], { meta }),
    ])
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled'])
    const { rows } = await db.query('SELECT id, version FROM streams ORDER BY id')
    expect(rows).toEqual([
      { id: 'ses_a', version: 2 },
      { id: 'ses_b', version: 1 },
      { id: 'ses_c', version: 1 },
    ])
  })

  it('takes a client’s command decided on a version from any node, under the session’s epoch; the run’s appends stay the owner’s', async () => {
    const { db, node } = await cluster()
    const a = await node('node-a')
    const b = await node('node-b')
    await a.log.append('ses_1', [created], { meta })
    const [e] = await b.log.append('ses_1', [renamed('from b')], { meta, anyNode: true, expectedVersion: 1 })
    expect(e).toMatchObject({ version: 2, meta: { epoch: 1 } })
    // b appended for a's session: it holds nothing, and a still owns it at epoch 1
    expect(b.fence.epochOf('ses_1')).toBeUndefined()
    expect((await db.query('SELECT owner, epoch FROM streams WHERE id = $1', ['ses_1'])).rows).toEqual([
      { owner: 'node-a', epoch: 1 },
    ])
    // not decided on a version, or not a command: the owner's alone
    for (const options of [
      { meta, anyNode: true },
      { meta, expectedVersion: 2 },
    ]) {
      const err = await b.log.append('ses_1', [renamed('intruder')], options).catch((x: unknown) => x)
      expect(isChronicleError(err, 'NOT_OWNER')).toBe(true)
    }
    // queued with a fenced append of the same session, the command does not lift the fence from it
    const results = await Promise.allSettled([
      b.log.enqueue('ses_1', [renamed('run')], { meta }),
      b.log.enqueue('ses_1', [renamed('command')], { meta, anyNode: true, expectedVersion: 2 }),
    ])
    expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled'])
    expect((await a.log.readSession('ses_1')).map((x) => x.data)).toEqual([
      created.data,
      { title: 'from b' },
      { title: 'command' },
    ])
  })

  it('keeps an inputId to one acceptance per session, whichever node takes it: the second is a conflict', async () => {
    const { node } = await cluster()
    const a = await node('node-a')
    const b = await node('node-b')
    await a.log.append('ses_1', [created], { meta })
    const accepted = (inputId: string): ChronicleEvent => ({
      type: 'input.accepted',
      // text PostgreSQL's json would refuse (a NUL, a lone surrogate): the index must not read it as json
      data: {
        inputId,
        parts: [{ type: 'text', text: 'hi \u0000 \ud800' }],
        delivery: 'steer',
        noReply: false,
        digest: 'd',
      },
    })
    await a.log.append('ses_1', [accepted('in_1')], { meta, anyNode: true, expectedVersion: 1 })
    const err = await b.log
      .append('ses_1', [accepted('in_1')], { meta, anyNode: true, expectedVersion: 2 })
      .catch((x: unknown) => x)
    expect(isChronicleError(err, 'VERSION_CONFLICT')).toBe(true)
    // another inputId, or the same one in another session, is accepted
    await b.log.append('ses_1', [accepted('in_2')], { meta, anyNode: true, expectedVersion: 2 })
    await b.log.append('ses_2', [created, accepted('in_1')], { meta })
    expect(await a.log.version('ses_1')).toBe(3)
  })

  it('leaves system streams unfenced: every node appends to them', async () => {
    const { node } = await cluster()
    const a = await node('node-a')
    const b = await node('node-b')
    const token = (name: string): ChronicleEvent => ({
      type: 'token.created',
      data: { tokenId: `tok_${name}`, name, role: 'audit', salt: 's', hash: 'h' },
    })
    await a.log.append('sys_tokens', [token('one')], { meta: { actor: 'system' } })
    const [e] = await b.log.append('sys_tokens', [token('two')], { meta: { actor: 'system' } })
    expect(e?.version).toBe(2)
    expect(e?.meta.epoch).toBeUndefined()
  })

  it('claims a dead node’s sessions once, between survivors claiming at the same time, each with a new epoch', async () => {
    const { db, node } = await cluster()
    const a = await node('node-a')
    await node('node-b')
    await node('node-c')
    for (let i = 0; i < 30; i++) await a.log.append(`ses_${String(i).padStart(2, '0')}`, [created], { meta })
    await leaveCluster(db, 'node-a')
    const [byB, byC] = await Promise.all([claimSessions(db, 'node-b', TTL, 7), claimSessions(db, 'node-c', TTL, 7)])
    const rest = [...(await claimSessions(db, 'node-b', TTL, 100)), ...(await claimSessions(db, 'node-c', TTL, 100))]
    const all = [...(byB ?? []), ...(byC ?? []), ...rest]
    expect(all).toHaveLength(30)
    expect(new Set(all.map((c) => c.sessionId)).size).toBe(30)
    expect(new Set(all.map((c) => c.epoch))).toEqual(new Set([2]))
    // a live node's sessions are not claimed
    expect(await claimSessions(db, 'node-c', TTL, 100)).toEqual([])
  })

  it('lets each node hear every node’s commits, in seq order among its own, the others’ marked elsewhere', async () => {
    const url = await server().database()
    const open = async (id: string) => {
      const log = await PostgresEventLog.open(url, { fence: new Fence(id), follow: true })
      closing.push(() => log.close())
      return log
    }
    const a = await open('node-a')
    const b = await open('node-b')
    const heard: { seq: number; elsewhere: boolean }[] = []
    b.onCommit((events, elsewhere) => {
      for (const e of events) heard.push({ seq: e.seq, elsewhere: elsewhere === true })
    })
    for (let i = 0; i < 20; i++) {
      await Promise.all([
        a.append(`ses_a${i}`, [created, renamed('a')], { meta }),
        b.append(`ses_b${i}`, [created], { meta }),
      ])
    }
    const head = await a.head()
    expect(head).toBe(60)
    const end = Date.now() + 5_000
    while (heard.length < head && Date.now() < end) await new Promise((r) => setTimeout(r, 10))
    expect(heard.map((h) => h.seq)).toEqual(Array.from({ length: head }, (_, i) => i + 1))
    const own = new Set((await b.readAll(0, 100)).filter((e) => e.sessionId.startsWith('ses_b')).map((e) => e.seq))
    expect(heard.every((h) => h.elsewhere === !own.has(h.seq))).toBe(true)
  })

  it('hears every commit once and in order while it commits itself: three nodes appending at once, unpaced', async () => {
    const url = await server().database()
    const names = ['node-a', 'node-b', 'node-c']
    // no poll within the spec: a node that misses a wake would miss the events it should have read then
    const open = (id: string) =>
      PostgresEventLog.open(url, { fence: new Fence(id), follow: true, followPollMs: 60_000 })
    const logs = await Promise.all(names.map(open))
    for (const log of logs) closing.push(() => log.close())
    const heard = logs.map((log) => {
      const seen: { seq: number; sessionId: string; elsewhere: boolean }[] = []
      log.onCommit((events, elsewhere) => {
        for (const e of events) seen.push({ seq: e.seq, sessionId: e.sessionId, elsewhere: elsewhere === true })
      })
      return seen
    })
    // each node streams into sessions of its own, with no pause between appends: commits overlap the reads
    await Promise.all(
      logs.map(async (log, n) => {
        const mine = Array.from({ length: 4 }, (_, k) => `ses_${n}_${k}`)
        for (const id of mine) await log.append(id, [created], { meta })
        const pending: Promise<unknown>[] = []
        for (let i = 0; i < 150; i++) pending.push(log.append(mine[i % 4] as string, [renamed(`t${i}`)], { meta }))
        await Promise.all(pending)
      }),
    )
    const head = await (logs[0] as PostgresEventLog).head()
    expect(head).toBe(3 * (4 + 150))
    for (const [n, seen] of heard.entries()) {
      const end = Date.now() + 5_000
      while (seen.length < head && Date.now() < end) await new Promise((r) => setTimeout(r, 10))
      expect(seen.map((h) => h.seq)).toEqual(Array.from({ length: head }, (_, i) => i + 1))
      expect(seen.filter((h) => h.elsewhere !== !h.sessionId.startsWith(`ses_${n}_`))).toEqual([])
    }
  })

  it('heartbeats and claims in one statement; a node recorded as stopped is told so and claims nothing', async () => {
    const { db, node } = await cluster()
    const a = await node('node-a')
    await node('node-b')
    await a.log.append('ses_1', [created], { meta })
    expect(await heartbeatAndClaim(db, 'node-b', TTL, 100)).toEqual({ alive: true, claimed: [], stranded: [] })
    await leaveCluster(db, 'node-a')
    expect(await heartbeatAndClaim(db, 'node-a', TTL, 100)).toEqual({ alive: false, claimed: [], stranded: [] })
    expect(await heartbeatAndClaim(db, 'node-b', TTL, 100)).toEqual({
      alive: true,
      claimed: [{ sessionId: 'ses_1', epoch: 2 }],
      stranded: [],
    })
  })

  it('claims the sessions of a node whose heartbeat is older than the TTL, not before', async () => {
    const { db, node } = await cluster()
    const a = await node('node-a')
    await node('node-b')
    await a.log.append('ses_1', [created], { meta })
    expect(await claimSessions(db, 'node-b', 500, 100)).toEqual([])
    await new Promise((resolve) => setTimeout(resolve, 700)) // node-a's heartbeat (at join) is now 700 ms old
    expect(await claimSessions(db, 'node-b', 500, 100)).toEqual([{ sessionId: 'ses_1', epoch: 2 }])
  })
})
