import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { NEEDS } from '../../src/http/authorize.js'
import { Client, quietHead, type StartServer, type TestServer } from '../http/helpers.js'

/**
 * Share links played by an attacker (docs/SECURITY.md "Shares"): a link's
 * visitor of each role against every HTTP route and WebSocket method, on the
 * shared session, a fork of it, a sub-agent session of it, the session it was
 * forked from and an unrelated one — allowed, or FORBIDDEN with nothing
 * appended; a revoked or expired link refused with its own code; revocation
 * closing the visitor's socket at once; bad input refused with nothing
 * appended; the visitor's events attributed to the share.
 */
export function describeShares(engine: string, startServer: StartServer): void {
  describe(`share links on ${engine}`, () => {
    let server: TestServer
    let P: string // the session A was forked from: not reached from A
    let A: string // the shared session
    let F: string // a fork of A
    let C: string // a sub-agent's session of A
    let B: string // unrelated
    let names = 0

    type Visitor = 'audit' | 'operate'
    const visitors: Record<Visitor, { cookie: string; shareId: string; name: string }> = {} as never

    const owner = (method: string, url: string, body?: unknown) =>
      fetch(`${server.url}${url}`, {
        method,
        headers: {
          authorization: `Bearer ${server.token}`,
          ...(body !== undefined && { 'content-type': 'application/json' }),
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      })

    /** What the page sends: the cookie, and its own Origin. */
    const visit = (cookie: string, method: string, url: string, body?: unknown) =>
      fetch(`${server.url}${url}`, {
        method,
        headers: { cookie, origin: server.url, ...(body !== undefined && { 'content-type': 'application/json' }) },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      })

    async function share(session: string, body: Record<string, unknown> = {}) {
      const res = await owner('POST', `/sessions/${session}/shares`, { name: `share-${names++}`, ...body })
      expect(res.status, await res.clone().text()).toBe(201)
      return (await res.json()) as { shareId: string; name: string; code: string; url: string; role: string }
    }

    /** Opens a share link as the page does: POSTs the fragment's code to /login, keeps the cookie. */
    async function open(code: string): Promise<{ status: number; code?: string; cookie: string }> {
      const res = await fetch(`${server.url}/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: server.url },
        body: JSON.stringify({ code }),
      })
      const cookie = (res.headers.get('set-cookie') ?? '').split(';')[0] ?? ''
      const body = res.status === 204 ? {} : ((await res.json()) as { code?: string })
      return { status: res.status, cookie, ...(body.code && { code: body.code }) }
    }

    const sessionOf = async (res: Response) => ((await res.json()) as { session: { id: string } }).session.id
    /** A fork of a session at its latest event. */
    async function forkOf(session: string): Promise<string> {
      const { lastSeq } = (
        (await (await owner('GET', `/sessions/${session}`)).json()) as { session: { lastSeq: number } }
      ).session
      return sessionOf(await owner('POST', `/sessions/${session}/fork`, { at: lastSeq, files: false }))
    }

    beforeAll(async () => {
      server = await startServer({ CHRONICLE_LOG_LEVEL: 'warn' }, { listen: true })
      P = await sessionOf(await owner('POST', '/sessions', { directory: server.dir }))
      B = await sessionOf(await owner('POST', '/sessions', { directory: server.dir }))
      for (const s of [P, B])
        await owner('POST', `/sessions/${s}/inputs`, { parts: [{ type: 'text', text: 'note' }], noReply: true })
      A = await forkOf(P)
      await owner('POST', `/sessions/${A}/inputs`, { parts: [{ type: 'text', text: 'in A' }], noReply: true })
      F = await forkOf(A)
      // a sub-agent's session, as the task tool's runtime starts one (src/runtime/subagents)
      C = 'ses_subagent_of_a'
      await server.chronicle.ports.log.append(
        C,
        [
          {
            type: 'session.created',
            data: { directory: server.dir, agent: 'explore', model: null, parent: { sessionId: A, callId: 'call_1' } },
          },
        ],
        { meta: { actor: 'runtime' }, durability: 'full' },
      )
      for (const role of ['audit', 'operate'] as const) {
        const made = await share(A, { role })
        const opened = await open(made.code)
        expect(opened.status).toBe(204)
        visitors[role] = { cookie: opened.cookie, shareId: made.shareId, name: made.name }
      }
    })
    afterAll(async () => {
      await server.close()
    })

    /** Each HTTP route with the protocol method it calls, aimed at a session. */
    const routes = (s: string): [keyof typeof NEEDS, string, string, unknown?][] => [
      ['session.list', 'GET', '/sessions'],
      ['session.get', 'GET', `/sessions/${s}`],
      ['session.state', 'GET', `/sessions/${s}/state?at=1`],
      ['session.context', 'GET', `/sessions/${s}/context`],
      ['session.history', 'GET', `/sessions/${s}/events`],
      ['session.export', 'GET', `/sessions/${s}/export`],
      ['session.files', 'GET', `/sessions/${s}/files`],
      ['session.diff', 'GET', `/sessions/${s}/diff?from=1&to=2`],
      ['permission.rules', 'GET', `/sessions/${s}/rules`],
      ['whoami', 'GET', '/whoami'],
      ['search', 'GET', '/search?q=note'],
      ['mcp.servers', 'GET', '/mcp/servers'],
      ['session.create', 'POST', '/sessions', { directory: '/tmp' }],
      ['input.submit', 'POST', `/sessions/${s}/inputs`, { parts: [{ type: 'text', text: 'hi' }], noReply: true }],
      ['run.cancel', 'POST', `/sessions/${s}/cancel`, {}],
      ['permission.reply', 'POST', `/sessions/${s}/permissions/per_none`, { reply: 'once' }],
      ['elicitation.answer', 'POST', `/sessions/${s}/elicitations/eli_none`, { action: 'decline' }],
      ['session.fork', 'POST', `/sessions/${s}/fork`, { at: 1, files: false }],
      ['session.compact', 'POST', `/sessions/${s}/compact`, {}],
      ['session.revert', 'POST', `/sessions/${s}/revert`, { to: 1 }],
      ['session.unrevert', 'POST', `/sessions/${s}/unrevert`, {}],
      ['permission.revoke', 'DELETE', `/sessions/${s}/rules/rul_none`],
      ['token.list', 'GET', '/tokens'],
      ['token.create', 'POST', '/tokens', { name: 'x', role: 'audit' }],
      ['token.revoke', 'DELETE', '/tokens/tok_none'],
      ['share.create', 'POST', `/sessions/${s}/shares`, { name: 'from a visitor' }],
      ['share.list', 'GET', '/shares'],
      ['share.revoke', 'DELETE', `/shares/${visitors.audit?.shareId ?? 'shr_none'}`],
      ['store.backup', 'POST', '/admin/backup', { out: '/tmp/chronicle-share-backup' }],
      ['session.update', 'PATCH', `/sessions/${s}`, { title: 'renamed by a visitor' }],
      ['session.archive', 'DELETE', `/sessions/${s}`],
    ]

    /** The whole server's, or beyond what a share may do, whatever the session. */
    const NEVER = new Set([
      'session.create',
      'mcp.servers',
      'store.backup',
      'share.create',
      'share.list',
      'share.revoke',
    ])
    /** Answered for what the share reaches, whichever session the table aims at (search finds only in those). */
    const UNNAMED = new Set(['session.list', 'whoami', 'search', 'token.list', 'token.create', 'token.revoke'])
    const RANK = { audit: 0, operate: 1, admin: 2 } as const

    function expected(role: Visitor, method: keyof typeof NEEDS, session: string): 'allowed' | 'forbidden' {
      if (RANK[role] < RANK[NEEDS[method]] || NEVER.has(method)) return 'forbidden'
      if (UNNAMED.has(method)) return 'allowed'
      return session === B || session === P ? 'forbidden' : 'allowed'
    }

    const label = (s: string) =>
      ({ [P]: 'P (A forked from it)', [A]: 'A', [F]: 'F (fork of A)', [C]: 'C (sub-agent of A)', [B]: 'B' })[s]

    describe('a share visitor × every HTTP route', () => {
      it('the table covers every protocol method', () => {
        expect(
          routes('x')
            .map(([m]) => m)
            .sort(),
        ).toEqual(
          Object.keys(NEEDS)
            .filter((m) => !m.includes('subscribe'))
            .sort(),
        )
      })

      it.each(['audit', 'operate'] as const)('%s: allowed, or FORBIDDEN with nothing appended', async (role) => {
        for (const session of [B, P, C, F, A])
          for (const [method, verb, url, body] of routes(session)) {
            if (method === 'session.archive') continue
            const head = await quietHead(server)
            const res = await visit(visitors[role].cookie, verb, url, body)
            const text = await res.text()
            const want = expected(role, method, session)
            const what = `${role} ${method} on ${label(session)} → ${res.status} ${text.slice(0, 160)}`
            if (want === 'allowed') expect([401, 403], what).not.toContain(res.status)
            else {
              expect(res.status, what).toBe(403)
              expect((JSON.parse(text) as { code: string }).code, what).toBe('FORBIDDEN')
              expect(await quietHead(server), `${what}: appended`).toBe(head)
            }
          }
      })

      it('the session list shows only what the share reaches: A, its forks and its sub-agent sessions', async () => {
        const res = await visit(visitors.audit.cookie, 'GET', '/sessions')
        const ids = ((await res.json()) as { sessions: { id: string }[] }).sessions.map((s) => s.id)
        expect(ids).toContain(A)
        expect(ids).toContain(F)
        expect(ids).not.toContain(B)
        expect(ids).not.toContain(P)
      })

      it('whoami answers the banner: the shared session, who shared it, the role and the expiry', async () => {
        const me = (await (await visit(visitors.audit.cookie, 'GET', '/whoami')).json()) as Record<string, unknown>
        expect(me).toEqual({
          id: visitors.audit.shareId,
          name: visitors.audit.name,
          role: 'audit',
          sessions: [A],
          share: { session: A, by: 'owner', expiresAt: expect.any(String) },
        })
      })

      it('an operate visitor forks only into the forks directory, never one it names', async () => {
        const head = await quietHead(server)
        const res = await visit(visitors.operate.cookie, 'POST', `/sessions/${A}/fork`, {
          at: 1,
          directory: join(server.dir, 'chosen'),
        })
        expect(res.status).toBe(403)
        expect(await quietHead(server)).toBe(head)
      })

      it("an operate visitor's input is attributed to the share in meta.by", async () => {
        const res = await visit(visitors.operate.cookie, 'POST', `/sessions/${A}/inputs`, {
          parts: [{ type: 'text', text: 'from the visitor' }],
          noReply: true,
        })
        expect(res.status).toBe(202)
        const accepted = (await server.chronicle.ports.log.readSession(A))
          .filter((e) => e.type === 'input.accepted')
          .at(-1)
        expect(accepted?.meta.by).toEqual({ id: visitors.operate.shareId, name: visitors.operate.name })
      })
    })

    describe('a share visitor × every WebSocket method', () => {
      const params = (method: string, s: string): unknown => {
        const [, , url, body] = routes(s).find(([m]) => m === method) ?? []
        const query = Object.fromEntries(new URLSearchParams((url as string | undefined)?.split('?')[1] ?? ''))
        const numeric = Object.fromEntries(Object.entries(query).map(([k, v]) => [k, Number(v)]))
        if (method === 'token.create') return { name: `w${names++}`, role: 'audit' }
        if (method === 'token.revoke') return { tokenId: 'tok_none' }
        if (method === 'share.revoke') return { shareId: visitors.audit.shareId }
        if (method === 'share.create') return { session: s }
        if (method === 'permission.reply') return { session: s, requestId: 'per_none', reply: 'once' }
        if (method === 'permission.revoke') return { session: s, ruleId: 'rul_none' }
        if (method === 'elicitation.answer') return { session: s, elicitationId: 'eli_none', action: 'decline' }
        if (['session.list', 'whoami', 'token.list', 'mcp.servers', 'share.list'].includes(method)) return {}
        if (method === 'search') return { q: 'note' }
        if (method === 'session.create') return { directory: '/tmp' }
        if (method === 'store.backup') return { out: '/tmp/chronicle-share-backup' }
        return { session: s, ...numeric, ...(body as object | undefined) }
      }

      it.each(['audit', 'operate'] as const)('%s', async (role) => {
        const c = await Client.connect(server.wsUrl, undefined, {
          headers: { cookie: visitors[role].cookie, origin: server.url },
        })
        try {
          for (const session of [B, P, C, F, A])
            for (const method of Object.keys(NEEDS) as (keyof typeof NEEDS)[]) {
              if (method === 'session.archive' || method === 'unsubscribe') continue
              const p = method === 'subscribe' ? { sessions: [session], after: 0 } : params(method, session)
              const head = await quietHead(server)
              const reply = await c.call(method, p)
              const code = (reply.error as { code?: string } | undefined)?.code
              const what = `${role} ${method} on ${label(session)} → ${JSON.stringify(reply).slice(0, 160)}`
              if (expected(role, method, session) === 'allowed') expect(code, what).not.toBe('FORBIDDEN')
              else {
                expect(code, what).toBe('FORBIDDEN')
                expect(await quietHead(server), `${what}: appended`).toBe(head)
              }
            }
        } finally {
          c.close()
        }
      })

      it('subscribed to every session, a visitor hears only what its share reaches', async () => {
        const c = await Client.connect(server.wsUrl, undefined, {
          headers: { cookie: visitors.audit.cookie, origin: server.url },
        })
        try {
          expect((await c.call('subscribe', { sessions: '*', after: 0 })).error).toBeUndefined()
          await c.wait((f) => f.type === 'caught-up')
          await owner('POST', `/sessions/${B}/inputs`, { parts: [{ type: 'text', text: 'to B' }], noReply: true })
          await owner('POST', `/sessions/${A}/inputs`, { parts: [{ type: 'text', text: 'to A' }], noReply: true })
          await c.wait((f) => f.type === 'event' && JSON.stringify(f).includes('to A'))
          const heard = new Set(c.events().map((e) => (e as { session: string }).session))
          expect(heard.has(A)).toBe(true)
          for (const outside of [B, P, 'sys_tokens']) expect(heard.has(outside)).toBe(false)
        } finally {
          c.close()
        }
      })
    })

    describe('revocation and expiry', () => {
      it('revoking closes every open socket of the share within a second (4401); its pages and link stop working', async () => {
        const made = await share(A)
        const first = await open(made.code)
        const second = await open(made.code) // a link works for many visitors
        expect([first.status, second.status]).toEqual([204, 204])
        const sockets = await Promise.all(
          [first, second].map((v) =>
            Client.connect(server.wsUrl, undefined, { headers: { cookie: v.cookie, origin: server.url } }),
          ),
        )
        const started = Date.now()
        const revoked = await owner('DELETE', `/shares/${made.shareId}`)
        expect(revoked.status).toBe(200)
        expect(await Promise.all(sockets.map((c) => c.whenClosed))).toEqual([4401, 4401])
        expect(Date.now() - started).toBeLessThan(1000)
        for (const v of [first, second]) expect((await visit(v.cookie, 'GET', '/whoami')).status).toBe(401)
        expect(await open(made.code)).toMatchObject({ status: 410, code: 'SHARE_REVOKED' })
        const again = await owner('DELETE', `/shares/${made.shareId}`)
        expect([again.status, ((await again.json()) as { code: string }).code]).toEqual([410, 'SHARE_REVOKED'])
      })

      it('an expired link is refused with SHARE_EXPIRED; its open sockets are closed (4401) and its pages stop', async () => {
        const expiresAt = Date.now() + 1500
        const made = await share(A, { expires: new Date(expiresAt).toISOString() })
        const visitor = await open(made.code)
        expect(visitor.status).toBe(204)
        const socket = await Client.connect(server.wsUrl, undefined, {
          headers: { cookie: visitor.cookie, origin: server.url },
        })
        expect((await socket.call('subscribe', { sessions: [A], after: 0 })).error).toBeUndefined()
        expect(await socket.whenClosed).toBe(4401)
        expect(Date.now() - expiresAt).toBeGreaterThanOrEqual(0)
        expect(Date.now() - expiresAt).toBeLessThan(1000)
        expect(await open(made.code)).toMatchObject({ status: 410, code: 'SHARE_EXPIRED' })
        expect((await visit(visitor.cookie, 'GET', '/whoami')).status).toBe(401)
      })

      it('a wrong secret for a real share is LOGIN_INVALID, telling nothing of the share', async () => {
        const made = await share(A)
        const forged = `${made.shareId}.${'A'.repeat(43)}`
        expect(await open(forged)).toMatchObject({ status: 401, code: 'LOGIN_INVALID' })
      })

      it('a share link is no bearer token: the API refuses it', async () => {
        const made = await share(A)
        const res = await fetch(`${server.url}/whoami`, { headers: { authorization: `Bearer ${made.code}` } })
        expect(res.status).toBe(401)
      })
    })

    describe('bad input: a clear error, nothing appended', () => {
      it.each([
        ['a missing session', (): string => `/sessions/ses_missing/shares`, {}, 404, 'SESSION_NOT_FOUND'],
        ['an unknown role', (): string => `/sessions/${A}/shares`, { role: 'admin' }, 400, 'BAD_REQUEST'],
        [
          'an expiry in the past',
          (): string => `/sessions/${A}/shares`,
          { expires: '2020-01-01T00:00:00Z' },
          400,
          'BAD_REQUEST',
        ],
        ['an expiry that is no time', (): string => `/sessions/${A}/shares`, { expires: 'soon' }, 400, 'BAD_REQUEST'],
        [
          'a name in use by a share',
          (): string => `/sessions/${A}/shares`,
          { name: 'share-0' },
          409,
          'SHARE_NAME_TAKEN',
        ],
        ['the owner’s name', (): string => `/sessions/${A}/shares`, { name: 'owner' }, 409, 'SHARE_NAME_TAKEN'],
      ] as const)('%s', async (_what, url, body, status, code) => {
        const head = await quietHead(server)
        const res = await owner('POST', url(), body)
        expect([res.status, ((await res.json()) as { code: string }).code]).toEqual([status, code])
        expect(await quietHead(server)).toBe(head)
      })

      it('an archived session', async () => {
        const gone = await sessionOf(await owner('POST', '/sessions', { directory: server.dir }))
        expect((await owner('DELETE', `/sessions/${gone}`)).status).toBe(200)
        const head = await quietHead(server)
        const res = await owner('POST', `/sessions/${gone}/shares`, {})
        expect([res.status, ((await res.json()) as { code: string }).code]).toEqual([409, 'SESSION_ARCHIVED'])
        expect(await quietHead(server)).toBe(head)
      })

      it('revoking a share that does not exist', async () => {
        const res = await owner('DELETE', '/shares/shr_none')
        expect([res.status, ((await res.json()) as { code: string }).code]).toEqual([404, 'SHARE_NOT_FOUND'])
      })
    })
  })
}
