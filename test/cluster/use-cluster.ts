import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest'
import { PG_TYPES } from '../../src/events/postgres/log.js'
import type { ServerProcess } from '../crash/server-process.js'
import { usePostgres } from '../support/use-postgres.js'
import { type NodeOptions, startNode } from './node-process.js'

/**
 * What the cluster specs share: a throwaway PostgreSQL server for the file, each test's own database (a
 * cluster of its own), node processes started on it (test/cluster/node-process.ts) and killed after each
 * test, and reads of the log and the streams' owners straight from the database.
 */
/** The specs' nodes: dead after 1.5 s, heartbeating four times a second. */
export const SPEC_TIMING = { ttlMs: 1_500, heartbeatMs: 250 } as const

/** A scripted model's steps for `#slower`: a 4 s bash job that writes slow.marker, then the run's answer. */
export const SLOWER_STEPS = [
  {
    when: { userContains: '#slower', afterToolResult: false },
    toolCalls: [{ name: 'bash', input: { command: 'sleep 4 && echo ran >> slow.marker', description: 'slower' } }],
  },
  { when: { userContains: '#slower', afterToolResult: true }, text: 'The job is over.' },
]

export interface ClusterSettings {
  readonly token: string
  readonly ttlMs: number
  readonly heartbeatMs: number
  /** the scripted model's script, written once for the file */
  readonly script: object
}

export interface LoggedEvent {
  readonly seq: number
  readonly type: string
  readonly data: Record<string, unknown>
  readonly meta: { epoch?: number; actor?: string }
}

export interface ClusterWorld {
  readonly root: string
  readonly url: string
  readonly db: pg.Pool
  start(name: string, options?: Pick<NodeOptions, 'permission' | 'config'>): Promise<ServerProcess>
  /** a new directory under the file's root */
  directory(name: string): string
  call(node: ServerProcess, path: string, body?: object): Promise<{ status: number; json: any }>
  logOf(sessionId: string): Promise<LoggedEvent[]>
  ownerOf(sessionId: string): Promise<{ owner: string; epoch: number } | undefined>
  /** polls `check` until it gives something, failing with the nodes' stderr after `timeoutMs` */
  until<T>(check: () => Promise<T | undefined | false>, what: string, timeoutMs?: number): Promise<T>
}

export function useCluster(settings: ClusterSettings): () => ClusterWorld {
  const server = usePostgres()
  const nodes: ServerProcess[] = []
  let root = ''
  let world: ClusterWorld | undefined

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'chronicle-cluster-'))
    writeFileSync(join(root, 'script.json'), JSON.stringify(settings.script))
  })
  beforeEach(async () => {
    const url = await server().database()
    const db = new pg.Pool({ connectionString: url, max: 2, types: PG_TYPES })
    world = {
      root,
      url,
      db,
      async start(name, options = {}) {
        const node = await startNode({
          root,
          url,
          name,
          token: settings.token,
          script: join(root, 'script.json'),
          ttlMs: settings.ttlMs,
          heartbeatMs: settings.heartbeatMs,
          ...options,
        })
        nodes.push(node)
        return node
      },
      directory(name) {
        const dir = join(root, name)
        mkdirSync(dir)
        return dir
      },
      async call(node, path, body) {
        const res = await fetch(`${node.url}${path}`, {
          method: body ? 'POST' : 'GET',
          headers: { authorization: `Bearer ${settings.token}`, ...(body && { 'content-type': 'application/json' }) },
          ...(body && { body: JSON.stringify(body) }),
        })
        return { status: res.status, json: await res.json() }
      },
      async logOf(sessionId) {
        const { rows } = await db.query('SELECT seq, type, data, meta FROM events WHERE session_id = $1 ORDER BY seq', [
          sessionId,
        ])
        return rows.map((r: { seq: number; type: string; data: string; meta: string }) => ({
          seq: Number(r.seq),
          type: r.type,
          data: JSON.parse(r.data) as Record<string, unknown>,
          meta: JSON.parse(r.meta) as LoggedEvent['meta'],
        }))
      },
      async ownerOf(sessionId) {
        return (await db.query('SELECT owner, epoch FROM streams WHERE id = $1', [sessionId])).rows[0]
      },
      async until(check, what, timeoutMs = 30_000) {
        const end = Date.now() + timeoutMs
        for (;;) {
          const found = await check()
          if (found) return found
          if (Date.now() > end)
            throw new Error(`${what}: not reached in ${timeoutMs} ms\n${nodes.map((n) => n.stderr()).join('\n')}`)
          await new Promise((r) => setTimeout(r, 25))
        }
      },
    }
  })
  afterEach(async () => {
    for (const node of nodes.splice(0)) await node.kill('SIGKILL')
    await world?.db.end()
    world = undefined
  })
  afterAll(() => {
    rmSync(root, { recursive: true, force: true })
  })
  return () => {
    if (!world) throw new Error('the cluster is not set up yet (use it inside a test)')
    return world
  }
}
