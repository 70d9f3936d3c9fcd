import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import { DEFAULT_LIMITS } from '../../src/config.js'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import { createIdSource } from '../../src/events/ids.js'
import type { PostgresEventLog } from '../../src/events/postgres/log.js'
import { type App, buildApp } from '../../src/http/app.js'
import type { AppDeps } from '../../src/http/deps.js'
import { TOKENS_STREAM } from '../../src/http/principals.js'
import { openPostgresStore } from '../../src/projections/postgres/open.js'
import { MCP_STREAM } from '../../src/projections/queries/mcp-servers.js'
import { postgresPorts } from '../../src/projections/store-ports.js'
import { usePostgres } from '../support/use-postgres.js'
import { Client, type Frame } from './helpers.js'

/**
 * The HTTP and WebSocket layer on PostgreSQL (docs/ARCHITECTURE.md "What the
 * server still needs to run on PostgreSQL"): the real app (buildApp), on a
 * real listening server with a real `ws` client, over PostgreSQL's ports
 * alone — no SQLite anywhere. Subscriptions catch up and resume by seq with
 * no gap and no duplicate, a limited token hears only what it reaches (a fork
 * or sub-agent child made after it subscribed included), tokens are created
 * and revoked through the log, and export and the MCP servers' state read
 * through it.
 */

const server = usePostgres()
const OWNER = 'owner-token-for-the-postgres-app'
const meta = { actor: 'user' as const }
const renamed = (title: string): ChronicleEvent => ({ type: 'session.renamed', data: { title } })

interface World {
  readonly log: PostgresEventLog
  readonly app: App
  readonly url: string
  readonly wsUrl: string
  connect(token?: string): Promise<Client>
  http(method: string, path: string, token?: string, body?: unknown): Promise<{ status: number; body: any }>
}

const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

async function world(database?: string): Promise<World> {
  const log = await openPostgresStore(database ?? (await server().database()))
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-pg-app-'))
  const ports = postgresPorts(log)
  const deps: AppDeps = {
    ports,
    ids: createIdSource(),
    logger: pino({ level: 'silent' }),
    security: { token: OWNER, allowedHosts: [], allowedOrigins: [] },
    limits: DEFAULT_LIMITS,
    defaults: { directory: dir, agent: 'build', model: null },
    version: 'test',
    timeTravel: ports.timeTravel,
    dataDir: join(dir, 'data'),
  }
  const app = await buildApp(deps)
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  const clients: Client[] = []
  cleanups.push(async () => {
    for (const c of clients) c.close()
    await app.close()
    await log.close()
    rmSync(dir, { recursive: true, force: true })
  })
  return {
    log,
    app,
    url,
    wsUrl: `${url.replace(/^http/, 'ws')}/ws`,
    async connect(token = OWNER) {
      const client = await Client.connect(`${url.replace(/^http/, 'ws')}/ws`, token)
      clients.push(client)
      return client
    },
    async http(method, path, token = OWNER, body) {
      const res = await fetch(`${url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body !== undefined && { 'content-type': 'application/json' }),
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      })
      const text = await res.text()
      const json = res.headers.get('content-type')?.match(/^application\/(problem\+)?json/)
      return { status: res.status, body: json ? JSON.parse(text) : text }
    },
  }
}

async function created(client: Client, title: string): Promise<string> {
  const reply = await client.call('session.create', { title })
  expect(reply.error).toBeUndefined()
  return (reply.result as { session: { id: string } }).session.id
}

/** Waits for the subscription's event at `seq` (events come in seq order: nothing before it is still to come). */
function until(client: Client, sub: string, seq: number): Promise<Frame> {
  return client.wait((f) => f.type === 'event' && f.sub === sub && (f.seq as number) >= seq, 20_000)
}

describe('the app on PostgreSQL', () => {
  it('subscribes from a seq through a catch-up of several pages while commits land, then resumes with no gap and no duplicate', async () => {
    const w = await world()
    const owner = await w.connect()
    const id = await created(owner, 'busy')
    const other = await created(owner, 'other')
    // more than a page of the log (500) behind, interleaved with another session
    for (let i = 0; i < 12; i++) {
      await w.log.append(
        id,
        Array.from({ length: 60 }, (_, j) => renamed(`t${i}.${j}`)),
        { meta },
      )
      await w.log.append(other, [renamed(`o${i}`)], { meta })
    }
    const reply = await owner.call('subscribe', { sessions: [id], after: 0 })
    const { sub, head } = reply.result as { sub: string; head: number }
    expect(head).toBe(await w.log.head())
    // commits while it catches up: heard live or read from the log, each exactly once
    const writes = (async () => {
      for (let i = 0; i < 20; i++) await w.log.append(id, [renamed(`live${i}`)], { meta })
    })()
    await writes
    const last = (await w.log.readSession(id)).at(-1)?.seq as number
    await until(owner, sub, last)
    const own = (await w.log.readSession(id)).map((e) => e.seq)
    expect(owner.events(sub).map((e) => e.seq)).toEqual(own)
    expect(owner.events(sub).map((e) => e.version)).toEqual(own.map((_, i) => i + 1))
    const caughtUp = owner.frames.find((f) => f.type === 'caught-up' && f.sub === sub)
    expect(caughtUp?.seq).toBeGreaterThanOrEqual(head)

    // disconnected at some seq; what was missed meanwhile comes back exactly, from any seq
    const cursor = own[300] as number
    owner.close()
    await w.log.append(id, [renamed('missed1'), renamed('missed2')], { meta })
    const again = await w.connect()
    const resumed = (await again.call('subscribe', { sessions: [id], after: cursor })).result as { sub: string }
    const now = (await w.log.readSession(id)).map((e) => e.seq)
    await until(again, resumed.sub, now.at(-1) as number)
    expect(again.events(resumed.sub).map((e) => e.seq)).toEqual(now.filter((s) => s > cursor))
    expect((await again.call('subscribe', { sessions: [id], after: (await w.log.head()) + 1 })).error).toMatchObject({
      code: 'SEQ_OUT_OF_RANGE',
    })
    expect((await again.call('subscribe', { sessions: ['ses_missing'] })).error).toMatchObject({
      code: 'SESSION_NOT_FOUND',
    })
  })

  it('a limited token subscribed to everything hears its session, a fork and a sub-agent child made after it subscribed, and nothing else', async () => {
    const w = await world()
    const owner = await w.connect()
    const mine = await created(owner, 'mine')
    const before = await created(owner, 'not mine, older')
    await w.log.append(mine, [renamed('mine, renamed')], { meta })
    const grant = await w.http('POST', '/tokens', OWNER, { name: 'watcher', role: 'audit', sessions: [mine] })
    expect(grant.status).toBe(201)
    const limited = await w.connect(grant.body.token)
    const all = await w.connect()
    const seen = (await limited.call('subscribe', { sessions: '*', after: 0 })).result as { sub: string }
    const everything = (await all.call('subscribe', { sessions: '*', after: 0 })).result as { sub: string }

    // made after the subscription: a fork of mine, a fork of that fork, a sub-agent child of mine;
    // and an unrelated session with a fork and a child of its own
    const at = (await w.log.readSession(mine)).at(-1)?.seq as number
    const fork = (await owner.call('session.fork', { session: mine, at })).result as { session: { id: string } }
    const forkAt = (await w.log.readSession(fork.session.id)).at(-1)?.seq as number
    const grand = (await owner.call('session.fork', { session: fork.session.id, at: forkAt })).result as {
      session: { id: string }
    }
    const child = 'ses_child_of_mine'
    await w.log.append(
      child,
      [
        {
          type: 'session.created',
          data: { directory: '/tmp', agent: 'general', model: null, parent: { sessionId: mine, callId: 'call_1' } },
        },
      ],
      { meta },
    )
    const stranger = await created(owner, 'not mine, newer')
    const strangerAt = (await w.log.readSession(stranger)).at(-1)?.seq as number
    const strangerFork = (await owner.call('session.fork', { session: stranger, at: strangerAt })).result as {
      session: { id: string }
    }
    await w.log.append(
      'ses_child_of_stranger',
      [
        {
          type: 'session.created',
          data: { directory: '/tmp', agent: 'general', model: null, parent: { sessionId: stranger, callId: 'c' } },
        },
      ],
      { meta },
    )
    await w.log.append(before, [renamed('still not mine')], { meta })
    await w.log.append(child, [renamed('child, renamed')], { meta })
    await w.log.append(grand.session.id, [renamed('grandchild, renamed')], { meta })
    const lastOfMine = (await w.log.append(mine, [renamed('the last')], { meta }))[0]?.seq as number

    await until(limited, seen.sub, lastOfMine)
    await until(all, everything.sub, lastOfMine)
    const reached = new Set([mine, fork.session.id, grand.session.id, child])
    const expected = all.events(everything.sub).filter((e) => reached.has(e.session))
    expect(limited.events(seen.sub).map((e) => [e.seq, e.session])).toEqual(expected.map((e) => [e.seq, e.session]))
    // the unreached sessions were there to be heard: the owner heard them
    const unreached = [before, stranger, strangerFork.session.id, 'ses_child_of_stranger']
    for (const id of unreached) expect(all.events(everything.sub).some((e) => e.session === id)).toBe(true)
    expect(limited.events(seen.sub).filter((e) => unreached.includes(e.session))).toEqual([])
    for (const id of reached) expect(limited.events(seen.sub).some((e) => e.session === id)).toBe(true)
    // and asked by name, an unreached session is refused
    expect((await limited.call('subscribe', { sessions: [stranger] })).error).toMatchObject({ code: 'FORBIDDEN' })
  })

  it('creates and revokes tokens through the log: a revoked token stops at once, and another server reads them', async () => {
    const database = await server().database()
    const w = await world(database)
    const made = await w.http('POST', '/tokens', OWNER, { name: 'ci', role: 'operate' })
    expect(made.status).toBe(201)
    expect((await w.http('GET', '/sessions', made.body.token)).status).toBe(200)
    expect((await w.http('POST', '/tokens', OWNER, { name: 'ci', role: 'audit' })).body).toMatchObject({
      code: 'TOKEN_NAME_TAKEN',
    })
    const socket = await w.connect(made.body.token)
    const revoked = await w.http('DELETE', `/tokens/${made.body.tokenId}`, OWNER)
    expect(revoked.status).toBe(200)
    expect(await socket.whenClosed).toBe(4401)
    expect((await w.http('GET', '/sessions', made.body.token)).status).toBe(401)
    expect((await w.log.readSession(TOKENS_STREAM)).map((e) => e.type)).toEqual(['token.created', 'token.revoked'])

    // a second server on the same database reads the stream at its start
    const second = await world(database)
    const listed = await second.http('GET', '/tokens', OWNER)
    expect(
      listed.body.tokens.map((t: { name: string; revokedAt?: string }) => [t.name, t.revokedAt !== undefined]),
    ).toEqual([['ci', true]])
    expect((await second.http('GET', '/sessions', made.body.token)).status).toBe(401)
  })

  it('exports a fork as chronicle export writes it: the inherited prefix, then its own events, each with its hash', async () => {
    const w = await world()
    const owner = await w.connect()
    const parent = await created(owner, 'parent')
    await w.log.append(parent, [renamed('one'), renamed('two'), renamed('three')], { meta })
    const cut = (await w.log.readSession(parent))[2]?.seq as number
    const fork = (await owner.call('session.fork', { session: parent, at: cut })).result as { session: { id: string } }
    await w.log.append(fork.session.id, [renamed('forked')], { meta })

    const res = await w.http('GET', `/sessions/${fork.session.id}/export`)
    expect(res.status).toBe(200)
    const lines = (res.body as string)
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l))
    const inherited = (await w.log.readSession(parent, { upTo: cut })).map((e) => [e.seq, parent, true])
    const own = (await w.log.readSession(fork.session.id)).map((e) => [e.seq, fork.session.id, false])
    expect(lines[0]).toEqual({ chronicle: 'session-export', format: expect.any(Number), sessionId: fork.session.id })
    expect(lines.slice(1).map((l) => [l.seq, l.sessionId, l.inherited ?? false])).toEqual([...inherited, ...own])
    const hashes = (await w.log.chainOf(fork.session.id)).map((l) => l.hash?.toString('hex'))
    expect(lines.slice(1 + inherited.length).map((l) => l.hash)).toEqual(hashes)
    for (const l of lines.slice(1)) expect(l.hash).toMatch(/^[0-9a-f]{32}$/)
    // ATIF reads the read models: a session without a message has nothing to export
    expect((await w.http('GET', `/sessions/${parent}/export?format=atif`)).body).toMatchObject({
      code: 'NOTHING_TO_EXPORT',
    })
    expect((await w.http('GET', '/sessions/ses_missing/export')).status).toBe(404)
  })

  it('reads the MCP servers at any seq of the log, and health from the ports alone', async () => {
    const w = await world()
    expect((await w.http('GET', '/health')).body).toEqual({ status: 'ok', version: 'test' })
    const [connecting] = await w.log.append(
      MCP_STREAM,
      [{ type: 'mcp.server.connecting', data: { server: 'files', attempt: 1 } }],
      { meta: { actor: 'system' } },
    )
    const [disconnected] = await w.log.append(
      MCP_STREAM,
      [{ type: 'mcp.server.disconnected', data: { server: 'files' } }],
      {
        meta: { actor: 'system' },
      },
    )
    const at = async (seq?: number) =>
      (await w.http('GET', `/mcp/servers${seq === undefined ? '' : `?at=${seq}`}`)).body as {
        seq: number
        servers: { name: string; state: string }[]
      }
    expect(await at((connecting?.seq as number) - 1)).toEqual({ seq: (connecting?.seq as number) - 1, servers: [] })
    expect((await at(connecting?.seq)).servers.map((s) => [s.name, s.state])).toEqual([['files', 'connecting']])
    const now = await at()
    expect([now.seq, now.servers.map((s) => s.state)]).toEqual([disconnected?.seq, ['disconnected']])
    expect((await w.http('GET', `/mcp/servers?at=${(disconnected?.seq as number) + 1}`)).body).toMatchObject({
      code: 'SEQ_OUT_OF_RANGE',
    })
  })
})
