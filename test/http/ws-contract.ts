import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { Client, type StartServer, type TestServer } from './helpers.js'

/** The WebSocket protocol over a real listening server and real `ws` clients (docs/API.md). */
export function describeWebSocket(engine: string, startServer: StartServer): void {
  describe(`the WebSocket protocol on ${engine}`, () => {
    let server: TestServer
    let clients: Client[] = []

    beforeEach(async () => {
      server = await startServer(
        {},
        { config: { limits: { ...(await import('../../src/config.js')).DEFAULT_LIMITS, heartbeatMs: 200 } } },
      )
    })
    afterEach(async () => {
      for (const c of clients) c.close()
      clients = []
      await server.close()
    })

    async function connect(): Promise<Client> {
      const c = await Client.connect(server.wsUrl, server.token)
      clients.push(c)
      return c
    }

    function rename(session: string, title: string) {
      return server.chronicle.ports.log.append(session, [{ type: 'session.renamed', data: { title } }], {
        meta: { actor: 'user' },
      })
    }

    async function createSession(c: Client): Promise<string> {
      const reply = await c.call('session.create', { directory: server.dir, title: 'ws test' })
      return (reply.result as { session: { id: string } }).session.id
    }

    describe('WebSocket protocol', () => {
      it('hello answers the protocol, server version and head', async () => {
        const c = await connect()
        const reply = await c.call('hello', { protocol: 1 })
        expect(reply).toEqual({ id: 'c1', result: { protocol: 1, server: { version: '0.1.0' }, head: 0 } })
      })

      it('subscribe replays stored events, then caught-up, then live events, each once, in seq order', async () => {
        const c = await connect()
        const session = await createSession(c)
        await rename(session, 'one')
        await rename(session, 'two')
        const reply = await c.call('subscribe', { sessions: [session], after: 0 })
        expect(reply.result).toEqual({ sub: 's1', head: 3 })
        const caughtUp = await c.wait((f) => f.type === 'caught-up')
        expect(caughtUp).toEqual({ type: 'caught-up', sub: 's1', seq: 3 })
        await rename(session, 'three')
        await c.wait((f) => f.type === 'event' && f.seq === 4)
        const kinds = c.frames
          .filter((f) => f.id === undefined && f.type !== 'heartbeat')
          .map((f) => `${f.type}:${String(f.seq)}`)
        expect(kinds).toEqual(['event:1', 'event:2', 'event:3', 'caught-up:3', 'event:4'])
        const events = c.events('s1')
        expect(events.map((e) => e.version)).toEqual([1, 2, 3, 4])
        expect(events[3]).toMatchObject({
          type: 'event',
          sub: 's1',
          seq: 4,
          session,
          version: 4,
          event: { type: 'session.renamed', data: { title: 'three' }, meta: { actor: 'user' } },
        })
      })

      it('subscribes to several sessions or all, filtered by type, from a cursor', async () => {
        const c = await connect()
        const a = await createSession(c) // seq 1
        const b = await createSession(c) // seq 2
        const other = await createSession(c) // seq 3
        await rename(a, 'a1') // 4
        await rename(other, 'o1') // 5
        await rename(b, 'b1') // 6
        const two = await c.call('subscribe', {
          sessions: [a, b],
          after: 1,
          types: ['session.renamed', 'session.created'],
        })
        const all = await c.call('subscribe', { sessions: '*', after: 4 })
        expect(two.result).toEqual({ sub: 's1', head: 6 })
        expect(all.result).toEqual({ sub: 's2', head: 6 })
        await c.wait((f) => f.type === 'caught-up' && f.sub === 's1')
        await c.wait((f) => f.type === 'caught-up' && f.sub === 's2')
        expect(c.events('s1').map((e) => e.seq)).toEqual([2, 4, 6])
        expect(c.events('s2').map((e) => e.seq)).toEqual([5, 6])
      })

      it('several clients on one session receive identical streams', async () => {
        const [c1, c2, c3] = [await connect(), await connect(), await connect()]
        const session = await createSession(c1)
        await c1.call('subscribe', { sessions: [session], after: 0 })
        await c2.call('subscribe', { sessions: [session], after: 0 })
        for (let i = 0; i < 30; i++) await rename(session, `t${i}`)
        await c3.call('subscribe', { sessions: [session], after: 0 })
        for (let i = 30; i < 60; i++) await rename(session, `t${i}`)
        for (const c of [c1, c2, c3]) await c.wait((f) => f.type === 'event' && f.seq === 61)
        const strip = (c: Client) => c.events().map(({ sub: _sub, ...rest }) => rest)
        expect(strip(c1)).toHaveLength(61)
        expect(strip(c2)).toEqual(strip(c1))
        expect(strip(c3)).toEqual(strip(c1))
      })

      it('unsubscribe stops the stream', async () => {
        const c = await connect()
        const session = await createSession(c)
        await c.call('subscribe', { sessions: [session], after: 0 })
        await c.wait((f) => f.type === 'caught-up')
        expect(await c.call('unsubscribe', { sub: 's1' })).toEqual({ id: 'c3', result: {} })
        await rename(session, 'after unsubscribe')
        await c.call('hello', { protocol: 1 })
        expect(c.events().map((e) => e.seq)).toEqual([1])
        expect((await c.call('unsubscribe', { sub: 's1' })).error).toMatchObject({ code: 'BAD_REQUEST' })
      })

      it("forks at a seq over the socket: the fork holds the parent's state there, and its subscriber hears the fork alone", async () => {
        const c = await connect()
        const parent = await createSession(c)
        await rename(parent, 'one')
        const [two] = await rename(parent, 'two')
        await rename(parent, 'three') // past the fork point: not the fork's
        const at = two?.seq as number
        const then = (await c.call('session.state', { session: parent, at })).result as { session: { title: string } }
        expect(then.session.title).toBe('two')
        const forked = await c.call('session.fork', { session: parent, at, files: false })
        const child = (forked.result as { session: { id: string } }).session.id
        expect(forked.result).toMatchObject({
          session: { forkedFrom: { sessionId: parent, seq: at }, title: 'two (fork)' },
        })
        const state = (await c.call('session.state', { session: child })).result as { session: { title: string } }
        expect(state.session.title).toBe('two (fork)') // the parent's title at the fork point, not its last
        expect((await c.call('session.state', { session: parent })).result).toMatchObject({
          session: { title: 'three' },
        })

        const sub = (await c.call('subscribe', { sessions: [child], after: 0 })).result as { sub: string }
        await c.wait((f) => f.type === 'caught-up' && f.sub === sub.sub)
        await rename(parent, 'four')
        const [mine] = await rename(child, 'mine')
        await c.wait((f) => f.type === 'event' && f.seq === mine?.seq)
        expect(c.events(sub.sub).map((e) => [e.session, (e.event as { type: string }).type])).toEqual([
          [child, 'session.forked'],
          [child, 'session.renamed'],
        ])
        // and the seq a fork is made at must be one of the parent's
        expect((await c.call('session.fork', { session: parent, at: 999_999, files: false })).error).toMatchObject({
          code: 'SEQ_OUT_OF_RANGE',
        })
      })

      it('bad messages get typed errors and the connection stays usable', async () => {
        const c = await connect()
        c.send('{not json')
        expect(await c.wait((f) => f.id === null)).toEqual({
          id: null,
          error: { code: 'BAD_REQUEST', message: 'malformed JSON' },
        })
        c.send(JSON.stringify({ method: 'hello' }))
        await c.wait((f) => f.id === null && f !== c.frames[0])
        expect(c.frames.filter((f) => f.id === null)).toHaveLength(2)
        expect(await c.call('session.explode', {})).toMatchObject({
          error: { code: 'UNKNOWN_METHOD', message: 'unknown method session.explode' },
        })
        const invalid = await c.call('session.get', { session: 42 })
        expect(invalid.error).toMatchObject({ code: 'BAD_REQUEST', details: { issues: [{ path: 'session' }] } })
        expect((await c.call('session.get', { session: 'ses_missing' })).error).toEqual({
          code: 'SESSION_NOT_FOUND',
          message: 'no session ses_missing',
        })
        expect((await c.call('subscribe', { sessions: '*', after: 99 })).error).toMatchObject({
          code: 'SEQ_OUT_OF_RANGE',
        })
        expect((await c.call('hello', { protocol: 1 })).result).toMatchObject({ protocol: 1 })
        expect(c.closed).toBeUndefined()
      })

      it('sends heartbeats with the head', async () => {
        const c = await connect()
        const session = await createSession(c)
        await rename(session, 'x')
        // the first heartbeat since the rename committed (those before it carry the head then)
        const beat = await c.wait((f) => f.type === 'heartbeat' && (f as { head: number }).head >= 2)
        expect(beat).toEqual({ type: 'heartbeat', head: 2 })
      })

      it('pings with each heartbeat and cuts a peer that answers none (half-open connection)', async () => {
        const live = await connect()
        const silent = await Client.connect(server.wsUrl, server.token, { autoPong: false })
        clients.push(silent)
        expect(await silent.whenClosed).toBe(1006)
        await live.wait((f) => f.type === 'heartbeat' && live.frames.filter((x) => x.type === 'heartbeat').length >= 3)
        expect(live.closed).toBeUndefined()
      })

      it('on shutdown tells each client to resume from its cursor', async () => {
        const c = await connect()
        const session = await createSession(c)
        await c.call('subscribe', { sessions: [session], after: 0 })
        await c.wait((f) => f.type === 'caught-up')
        const closing = c.wait((f) => f.type === 'closing')
        await server.chronicle.stop()
        expect(await closing).toEqual({ type: 'closing', reason: 'shutdown', resume: { after: 1, subs: { s1: 1 } } })
        expect(await c.whenClosed).toBe(1001)
      })
    })
  })
}
