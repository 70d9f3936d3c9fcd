import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { PG_TYPES } from '../src/events/postgres/log.js'
import type { ServerProcess } from '../test/crash/server-process.js'
import { startNode } from '../test/cluster/node-process.js'
import { type PostgresServer, startPostgres } from '../test/support/postgres.js'
import WebSocket from 'ws'

/**
 * `npm run bench -- cluster [--nodes 3] [--failovers 10] [--ttl-ms 5000] [--heartbeat-ms 1000] [--streams 8]
 * [--seconds 10]`: nodes on one PostgreSQL (docs/CLUSTER.md), real server processes on this machine.
 *
 * 1. Failover: a session on one node runs a long bash call; the node is killed with -9 while it runs, and the
 *    time from the kill to the survivor's `run.resumed` (its commit time) is measured; the node is started
 *    again before the next. Targets (issue #35, default TTL): p50 ≤ 6 s, p99 ≤ 10 s.
 * 2. Live delivery: `streams` new sessions every quarter second stream text, spread over the nodes in turn;
 *    a WebSocket client on each node subscribes to every session, and each event frame's arrival is timed
 *    against the event's commit time (`at`, one clock: one machine): same-node when that node runs the
 *    session, cross-node otherwise; p50 / p99 at the events per second the cluster committed in total.
 *    Target: cross-node p50 ≤ 10 ms, p99 ≤ 50 ms at 2,000 events/s.
 * 3. Idle cost, measured first on the fresh database (later, autovacuum of what the workload wrote would
 *    count): the transactions the database commits over 10 s with every node idle (heartbeats with their
 *    claims, the follower's poll), per node per second. Target: one heartbeat and one follower query a second.
 */

const TOKEN = 'cluster-bench-token-0123456789abcdef'

export default async function (args: string[]): Promise<object> {
  const nodesWanted = flag(args, '--nodes', 3)
  const failovers = flag(args, '--failovers', 10)
  const ttlMs = flag(args, '--ttl-ms', 5000)
  const heartbeatMs = flag(args, '--heartbeat-ms', 1000)
  const streams = flag(args, '--streams', 8)
  const seconds = flag(args, '--seconds', 10)
  const root = mkdtempSync(join(tmpdir(), 'chronicle-bench-cluster-'))
  const script = {
    chunkSize: 8,
    delayMs: 4,
    uniqueCallIds: true,
    steps: [
      {
        when: { userContains: '#slow', afterToolResult: false },
        toolCalls: [{ name: 'bash', input: { command: 'sleep 60', description: 'slow' } }],
      },
      { when: { userContains: '#stream' }, text: 'streamed words '.repeat(400) },
      { when: {}, text: 'ok' },
    ],
  }
  writeFileSync(join(root, 'script.json'), JSON.stringify(script))
  const server: PostgresServer = await startPostgres()
  const url = await server.database()
  const db = new pg.Pool({ connectionString: url, max: 2, types: PG_TYPES })
  const nodes: ServerProcess[] = []
  const start = async (i: number) => {
    const script = join(root, 'script.json')
    nodes[i] = await startNode({ root, url, name: `node-${i}`, token: TOKEN, script, ttlMs, heartbeatMs })
    return nodes[i] as ServerProcess
  }
  try {
    for (let i = 0; i < nodesWanted; i++) await start(i)
    const post = async (node: ServerProcess, path: string, body: object) => {
      const res = await fetch(`${node.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
      if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`)
      return (await res.json()) as { session: { id: string } }
    }
    const session = async (node: ServerProcess, text: string) => {
      const work = mkdtempSync(join(root, 'work-'))
      const id = (await post(node, '/sessions', { directory: work })).session.id
      await post(node, `/sessions/${id}/inputs`, { parts: [{ type: 'text', text }] })
      return id
    }
    const firstAt = async (id: string, type: string) => {
      const { rows } = await db.query('SELECT at FROM events WHERE session_id = $1 AND type = $2 LIMIT 1', [id, type])
      return rows[0]?.at as number | undefined
    }
    const until = async <T>(check: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> => {
      const end = Date.now() + timeoutMs
      for (;;) {
        const v = await check()
        if (v !== undefined) return v
        if (Date.now() > end) throw new Error('timed out')
        await new Promise((r) => setTimeout(r, 10))
      }
    }

    // 3. idle cost first, on a fresh database: no autovacuum of what a workload wrote counts in it
    const idle = await idleCost(db, nodes.length)

    // 2. live delivery
    const delivery = await liveDelivery(nodes, streams, seconds, session)

    // 1. failover
    const failoverMs: number[] = []
    for (let f = 0; f < failovers; f++) {
      const i = f % nodes.length
      const victim = nodes[i] as ServerProcess
      const id = await session(victim, '#slow')
      await until(async () => firstAt(id, 'tool.called'))
      await new Promise((r) => setTimeout(r, 200)) // the bash call under way
      const killedAt = Date.now()
      await victim.kill('SIGKILL')
      const resumedAt = await until(async () => firstAt(id, 'run.resumed'))
      failoverMs.push(resumedAt - killedAt)
      await start(i)
    }
    return {
      nodes: nodes.length,
      ttlMs,
      heartbeatMs,
      failover: { runs: failoverMs.length, p50Ms: pct(failoverMs, 50), p99Ms: pct(failoverMs, 99), all: failoverMs },
      delivery,
      idle,
    }
  } finally {
    for (const node of nodes) await node?.kill('SIGKILL')
    await db.end()
    await server.stop()
    rmSync(root, { recursive: true, force: true })
  }
}

/**
 * Sessions streaming on every node in turn; a socket on each node subscribed to every session times each frame
 * against its commit: same-node when the socket's node runs the session, cross-node otherwise. The rate is the
 * events the cluster committed per second in total (each socket sees every one).
 */
async function liveDelivery(
  nodes: readonly ServerProcess[],
  streams: number,
  seconds: number,
  session: (node: ServerProcess, text: string) => Promise<string>,
): Promise<object> {
  const same: number[] = []
  const cross: number[] = []
  const ownerOf = new Map<string, number>()
  const sockets = await Promise.all(nodes.map((_, i) => listen(nodes[i] as ServerProcess, i, ownerOf, same, cross)))
  const began = Date.now()
  for (let n = 0; Date.now() - began < seconds * 1000; ) {
    for (let k = 0; k < streams; k++, n++) {
      const i = n % nodes.length
      ownerOf.set(await session(nodes[i] as ServerProcess, '#stream'), i)
    }
    await new Promise((r) => setTimeout(r, 250)) // new sessions keep the streams going (each answers once)
  }
  await new Promise((r) => setTimeout(r, 1000))
  for (const ws of sockets) ws.terminate()
  const elapsed = (Date.now() - began) / 1000
  return {
    eventsPerSec: Math.round((same.length + cross.length) / nodes.length / elapsed),
    sameNode: { frames: same.length, p50Ms: pct(same, 50), p99Ms: pct(same, 99) },
    crossNode: { frames: cross.length, p50Ms: pct(cross, 50), p99Ms: pct(cross, 99) },
  }
}

async function listen(
  node: ServerProcess,
  index: number,
  ownerOf: ReadonlyMap<string, number>,
  same: number[],
  cross: number[],
): Promise<WebSocket> {
  const ws = new WebSocket(`${node.url.replace(/^http/, 'ws')}/ws`, { headers: { authorization: `Bearer ${TOKEN}` } })
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve())
    ws.once('error', reject)
  })
  let counting = false
  ws.on('message', (data) => {
    const frame = JSON.parse(String(data)) as { type?: string; session?: string; event?: { at?: string } }
    if (!counting || frame.type !== 'event' || !frame.event?.at) return
    const owner = ownerOf.get(frame.session as string)
    if (owner === undefined) return // a session whose creation has not answered yet: its node is not known
    ;(owner === index ? same : cross).push(Date.now() - Date.parse(frame.event.at))
  })
  ws.send(JSON.stringify({ id: 's', method: 'subscribe', params: { sessions: '*', after: 0 } }))
  await new Promise((r) => setTimeout(r, 300))
  counting = true
  return ws
}

/** Transactions the database commits per second with every node idle, per node (heartbeats, polls, claims). */
async function idleCost(db: pg.Pool, nodes: number): Promise<object> {
  // every run ended first
  const open = async () =>
    Number(
      (
        await db.query(
          "SELECT count(*) FILTER (WHERE type = 'run.started') - count(*) FILTER (WHERE type = 'run.finished') AS n FROM events",
        )
      ).rows[0]?.n,
    )
  while ((await open()) > 0) await new Promise((r) => setTimeout(r, 200))
  await new Promise((r) => setTimeout(r, 2000))
  const read = async () =>
    Number(
      (await db.query('SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()')).rows[0]
        ?.xact_commit,
    )
  const before = await read()
  await new Promise((r) => setTimeout(r, 10_000))
  const after = await read()
  return { transactionsPerNodePerSec: Math.round(((after - before) / 10 / nodes) * 10) / 10 }
}

function pct(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number
}

function flag(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name)
  return i >= 0 ? Number(args[i + 1]) : fallback
}
