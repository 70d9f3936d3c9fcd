import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { renderTranscript } from '../../src/cli/render.js'
import { NEEDS } from '../../src/http/authorize.js'
import { Client, quietHead, type StartServer, type TestServer } from '../http/helpers.js'

/**
 * Principals, roles and attribution (docs/SECURITY.md "Principals and
 * tokens"). Every HTTP route and WebSocket method × each role, a
 * session-limited token, a revoked and an expired token: allowed, or
 * FORBIDDEN (401 for a token that no longer speaks) with nothing appended.
 */
/** What a store wrote, as bytes to search: the data directory's files, and on PostgreSQL a dump of its database. */
export type StoredBytes = (server: TestServer) => Promise<{ name: string; bytes: Buffer }[]>

export function describeRoles(engine: string, startServer: StartServer, storedBytes: StoredBytes): void {
  describe(`principals and roles on ${engine}`, () => {
    let server: TestServer
    let A: string // the session limited tokens reach
    let B: string // one they do not
    const tokens: Record<string, { token: string; tokenId: string }> = {}
    let names = 0

    const RANK = { audit: 0, operate: 1, admin: 2 } as const
    type Who = 'owner' | 'admin' | 'operate' | 'audit' | 'limitedAudit' | 'limitedOperate' | 'revoked' | 'expired'
    const ROLE: Record<Who, 'admin' | 'operate' | 'audit'> = {
      owner: 'admin',
      admin: 'admin',
      operate: 'operate',
      audit: 'audit',
      limitedAudit: 'audit',
      limitedOperate: 'operate',
      revoked: 'operate',
      expired: 'operate',
    }

    const tokenOf = (who: Who) => (who === 'owner' ? server.token : (tokens[who]?.token as string))
    const http = (who: Who, method: string, url: string, body?: unknown) =>
      server.chronicle.app.inject({
        method: method as 'GET',
        url,
        headers: { authorization: `Bearer ${tokenOf(who)}` },
        ...(body !== undefined && { payload: body as object }),
      })

    async function createToken(name: string, role: string, extra: Record<string, unknown> = {}) {
      const res = await http('owner', 'POST', '/tokens', { name, role, ...extra })
      expect(res.statusCode).toBe(201)
      return res.json() as { token: string; tokenId: string }
    }

    beforeAll(async () => {
      server = await startServer({ CHRONICLE_LOG_LEVEL: 'warn' }, { listen: true })
      const create = async () =>
        (
          (await http('owner', 'POST', '/sessions', { directory: server.dir })).json() as {
            session: { id: string }
          }
        ).session.id
      A = await create()
      B = await create()
      for (const s of [A, B])
        await http('owner', 'POST', `/sessions/${s}/inputs`, { parts: [{ type: 'text', text: 'note' }], noReply: true })
      tokens.admin = await createToken('ada', 'admin')
      tokens.operate = await createToken('otto', 'operate')
      tokens.audit = await createToken('aude', 'audit')
      tokens.limitedAudit = await createToken('lia', 'audit', { sessions: [A] })
      tokens.limitedOperate = await createToken('lio', 'operate', { sessions: [A] })
      tokens.revoked = await createToken('rev', 'operate')
      expect((await http('owner', 'DELETE', `/tokens/${tokens.revoked.tokenId}`)).statusCode).toBe(200)
      tokens.expired = await createToken('exp', 'operate', { expires: new Date(Date.now() + 1500).toISOString() })
      await new Promise((r) => setTimeout(r, 1600))
    })
    afterAll(async () => {
      await server.close()
    })

    /** Each HTTP route with the protocol method it calls, aimed at a session. */
    const routes = (s: string): [string, string, string, unknown?][] => [
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
      ['session.update', 'PATCH', `/sessions/${s}`, { title: 'renamed by the table' }],
      ['input.submit', 'POST', `/sessions/${s}/inputs`, { parts: [{ type: 'text', text: 'hi' }], noReply: true }],
      ['run.cancel', 'POST', `/sessions/${s}/cancel`],
      ['permission.reply', 'POST', `/sessions/${s}/permissions/per_none`, { reply: 'once' }],
      ['elicitation.answer', 'POST', `/sessions/${s}/elicitations/eli_none`, { action: 'decline' }],
      ['session.fork', 'POST', `/sessions/${s}/fork`, { at: 1, files: false }],
      ['session.compact', 'POST', `/sessions/${s}/compact`],
      ['session.revert', 'POST', `/sessions/${s}/revert`, { to: 1 }],
      ['session.unrevert', 'POST', `/sessions/${s}/unrevert`, {}],
      ['permission.revoke', 'DELETE', `/sessions/${s}/rules/rul_none`],
      ['token.list', 'GET', '/tokens'],
      ['token.create', 'POST', '/tokens', { name: 'x', role: 'audit' }],
      ['token.revoke', 'DELETE', '/tokens/tok_none'],
      ['share.create', 'POST', `/sessions/${s}/shares`, { name: 'x' }],
      ['share.list', 'GET', '/shares'],
      ['share.revoke', 'DELETE', '/shares/shr_none'],
      ['store.backup', 'POST', '/admin/backup', { out: join(server.dir, `backup-${names++}`) }],
      ['session.archive', 'DELETE', `/sessions/${s}`],
    ]

    function expected(who: Who, method: keyof typeof NEEDS, session: string): 'allowed' | 'forbidden' | 'unauthorized' {
      if (who === 'revoked' || who === 'expired') return 'unauthorized'
      if (RANK[ROLE[who]] < RANK[NEEDS[method]]) return 'forbidden'
      if (who.startsWith('limited')) {
        if (method === 'session.create' || method === 'mcp.servers' || method === 'store.backup') return 'forbidden' // the whole server's
        const named = ![
          'session.list',
          'whoami',
          'search',
          'token.list',
          'token.create',
          'token.revoke',
          'store.backup',
          'share.list',
          'share.revoke',
        ].includes(method)
        if (named && session !== A) return 'forbidden'
      }
      return 'allowed'
    }

    const WHO: Who[] = ['owner', 'admin', 'operate', 'audit', 'limitedAudit', 'limitedOperate', 'revoked', 'expired']

    describe('every HTTP route × every principal', () => {
      it('the table covers every protocol method', () => {
        const covered = new Set(routes('x').map(([m]) => m))
        expect([...covered].sort()).toEqual(
          Object.keys(NEEDS)
            .filter((m) => !m.includes('subscribe'))
            .sort(),
        )
      })

      it.each(WHO)('%s: allowed, or refused with nothing appended', async (who) => {
        // session.archive last: it ends the session for the calls after it
        for (const session of [B, A]) {
          for (const [method, verb, url, body] of routes(session)) {
            if (method === 'session.archive') continue
            const payload =
              method === 'token.create'
                ? { name: `t${names++}`, role: 'audit' }
                : method === 'share.create'
                  ? { name: `s${names++}` }
                  : (body as object | undefined)
            const head = await quietHead(server)
            const res = await http(who, verb, url, payload)
            const want = expected(who, method as keyof typeof NEEDS, session)
            const label = `${who} ${method} on ${session === A ? 'A' : 'B'} → ${res.statusCode} ${res.body.slice(0, 120)}`
            if (want === 'allowed') expect([401, 403], label).not.toContain(res.statusCode)
            else {
              expect(res.statusCode, label).toBe(want === 'forbidden' ? 403 : 401)
              expect((res.json() as { code: string }).code, label).toBe(
                want === 'forbidden' ? 'FORBIDDEN' : 'UNAUTHORIZED',
              )
              expect(await quietHead(server), `${label}: appended`).toBe(head)
            }
          }
        }
      })
    })

    describe('archiving, which ends a session: on a fresh one each time', () => {
      it.each(WHO)('%s', async (who) => {
        const fresh = async (body: object, url = '/sessions') =>
          ((await http('owner', 'POST', url, body)).json() as { session: { id: string } }).session.id
        const outside = await fresh({ directory: server.dir }) // reached by no limited token
        const forkOfA = await fresh({ at: 1, files: false }, `/sessions/${A}/fork`) // reached through A
        for (const [session, reached] of [
          [outside, B],
          [forkOfA, A],
        ] as const) {
          const head = await quietHead(server)
          const res = await http(who, 'DELETE', `/sessions/${session}`)
          const want = expected(who, 'session.archive', reached)
          const label = `${who} archive → ${res.statusCode}`
          if (want === 'allowed') expect(res.statusCode, label).toBe(200)
          else {
            expect(res.statusCode, label).toBe(want === 'forbidden' ? 403 : 401)
            expect(await quietHead(server), label).toBe(head)
          }
        }
      })
    })

    describe('every WebSocket method × every principal', () => {
      const params = (method: string, s: string): unknown => {
        const [, , url, body] = routes(s).find(([m]) => m === method) ?? []
        const query = Object.fromEntries(new URLSearchParams((url as string | undefined)?.split('?')[1] ?? ''))
        const numeric = Object.fromEntries(Object.entries(query).map(([k, v]) => [k, Number(v)]))
        if (method === 'token.create') return { name: `w${names++}`, role: 'audit' }
        if (method === 'token.revoke') return { tokenId: 'tok_none' }
        if (method === 'share.create') return { session: s, name: `ws${names++}` }
        if (method === 'share.revoke') return { shareId: 'shr_none' }
        if (method === 'share.list') return {}
        if (method === 'permission.reply') return { session: s, requestId: 'per_none', reply: 'once' }
        if (method === 'permission.revoke') return { session: s, ruleId: 'rul_none' }
        if (method === 'elicitation.answer') return { session: s, elicitationId: 'eli_none', action: 'decline' }
        if (['session.list', 'whoami', 'token.list', 'mcp.servers'].includes(method)) return {}
        if (method === 'search') return { q: 'note' }
        if (method === 'session.create') return { directory: '/tmp' }
        if (method === 'store.backup') return { out: join(server.dir, `backup-ws-${names++}`) }
        return { session: s, ...numeric, ...(body as object | undefined) }
      }

      it.each(WHO.filter((w) => w !== 'revoked' && w !== 'expired'))('%s', async (who) => {
        const c = await Client.connect(server.wsUrl, tokenOf(who))
        try {
          for (const session of [B, A])
            for (const method of Object.keys(NEEDS) as (keyof typeof NEEDS)[]) {
              if (method === 'session.archive' || method === 'unsubscribe') continue
              const p = method === 'subscribe' ? { sessions: [session], after: 0 } : params(method, session)
              const head = await quietHead(server)
              const reply = await c.call(method, p)
              const want = expected(who, method, session)
              const code = (reply.error as { code?: string } | undefined)?.code
              const label = `${who} ${method} on ${session === A ? 'A' : 'B'} → ${JSON.stringify(reply).slice(0, 160)}`
              if (want === 'allowed') expect(code, label).not.toBe('FORBIDDEN')
              else {
                expect(code, label).toBe('FORBIDDEN')
                expect(await quietHead(server), `${label}: appended`).toBe(head)
              }
            }
        } finally {
          c.close()
        }
      })

      it('a revoked or expired token cannot open a socket', async () => {
        for (const who of ['revoked', 'expired'] as const)
          await expect(Client.connect(server.wsUrl, tokenOf(who))).rejects.toThrow(/401/)
      })

      it('a token limited to one session hears only it, even subscribed to every session', async () => {
        const c = await Client.connect(server.wsUrl, tokenOf('limitedAudit'))
        try {
          const sub = await c.call('subscribe', { sessions: '*', after: 0 })
          expect(sub.error).toBeUndefined()
          await c.wait((f) => f.type === 'caught-up')
          await http('owner', 'POST', `/sessions/${B}/inputs`, {
            parts: [{ type: 'text', text: 'to B' }],
            noReply: true,
          })
          await http('owner', 'POST', `/sessions/${A}/inputs`, {
            parts: [{ type: 'text', text: 'to A' }],
            noReply: true,
          })
          await c.wait((f) => f.type === 'event' && JSON.stringify(f).includes('to A'))
          // A and the forks taken of it above: never B, nor the token store
          const sessions = new Set(c.events().map((e) => (e as { session: string }).session))
          expect(sessions.has(A)).toBe(true)
          expect(sessions.has(B)).toBe(false)
          for (const id of sessions)
            if (id !== A) expect((await server.chronicle.ports.readModels.session(id))?.forkedFrom?.sessionId).toBe(A)
        } finally {
          c.close()
        }
      })
    })

    describe('revocation', () => {
      it('closes the open sockets of the token within a second, with code 4401', async () => {
        const t = await createToken(`short-${names++}`, 'audit')
        const c = await Client.connect(server.wsUrl, t.token)
        const started = Date.now()
        await http('owner', 'DELETE', `/tokens/${t.tokenId}`)
        const code = await c.whenClosed
        expect(code).toBe(4401)
        expect(Date.now() - started).toBeLessThan(1000)
      })

      it.each([
        ['an unknown role', { name: 'r1', role: 'root' }, 400, 'BAD_REQUEST'],
        ['an expiry in the past', { name: 'r2', role: 'audit', expires: '2020-01-01T00:00:00Z' }, 400, 'BAD_REQUEST'],
        ['a name in use', { name: 'ada', role: 'audit' }, 409, 'TOKEN_NAME_TAKEN'],
      ])('refuses to create a token with %s, appending nothing', async (_, body, status, code) => {
        const head = await quietHead(server)
        const res = await http('owner', 'POST', '/tokens', body)
        expect([res.statusCode, (res.json() as { code: string }).code]).toEqual([status, code])
        expect(await quietHead(server)).toBe(head)
      })

      it.each([
        ['an unknown token', 'tok_nope', 404, 'TOKEN_NOT_FOUND'],
        ['a revoked token', () => tokens.revoked?.tokenId as string, 409, 'TOKEN_REVOKED'],
        ["the owner's token", 'owner', 403, 'FORBIDDEN'],
      ])('refuses to revoke %s, appending nothing', async (_, id, status, code) => {
        const head = await quietHead(server)
        const res = await http('owner', 'DELETE', `/tokens/${typeof id === 'function' ? id() : id}`)
        expect([res.statusCode, (res.json() as { code: string }).code]).toEqual([status, code])
        expect(await quietHead(server)).toBe(head)
      })
    })

    describe('attribution', () => {
      it('names the principal, the connection and the command id on what a client caused', async () => {
        const c = await Client.connect(server.wsUrl, tokenOf('operate'))
        try {
          const submitted = await c.call('input.submit', {
            session: A,
            parts: [{ type: 'text', text: 'by otto' }],
            noReply: true,
          })
          expect(submitted.error).toBeUndefined()
          const forked = await c.call('session.fork', { session: A, at: 1, files: false })
          const child = (forked.result as { session: { id: string } }).session.id
          await c.call('run.cancel', { session: child })
          const accepted = (await server.chronicle.ports.log.readSession(A)).find(
            (e) => e.type === 'input.accepted' && JSON.stringify(e.data).includes('by otto'),
          )
          expect(accepted?.meta).toMatchObject({
            actor: 'user',
            by: { id: tokens.operate?.tokenId, name: 'otto' },
            connection: expect.stringMatching(/^conn_/),
            commandId: String(submitted.id),
          })
          expect((await server.chronicle.ports.log.readSession(child))[0]?.meta).toMatchObject({
            by: { name: 'otto' },
            command: 'fork',
          })
        } finally {
          c.close()
        }
        // over HTTP: the client's X-Command-Id
        const res = await server.chronicle.app.inject({
          method: 'POST',
          url: `/sessions/${A}/inputs`,
          headers: { authorization: `Bearer ${tokenOf('admin')}`, 'x-command-id': 'cmd-42' },
          payload: { parts: [{ type: 'text', text: 'by ada' }], noReply: true },
        })
        expect(res.statusCode).toBe(202)
        const byAda = (await server.chronicle.ports.log.readSession(A)).find(
          (e) => e.type === 'input.accepted' && JSON.stringify(e.data).includes('by ada'),
        )
        expect(byAda?.meta).toMatchObject({ by: { name: 'ada' }, commandId: 'cmd-42' })
        // and `chronicle show` says who: the transcript names the submitter of each user message
        const state = (await http('owner', 'GET', `/sessions/${A}/state`)).json() as Parameters<
          typeof renderTranscript
        >[0]
        const shown = renderTranscript(state)
        expect(shown).toContain('> user otto\n  by otto')
        expect(shown).toContain('> user ada\n  by ada')
        // token management is in the log too: who granted what
        const granted = (await server.chronicle.ports.log.readSession('sys_tokens')).find(
          (e) => e.type === 'token.created',
        )
        expect(granted?.meta).toMatchObject({ by: { id: 'owner', name: 'owner' }, command: 'token.create' })
      })

      it('the token store holds no secret in clear: not in anything the store wrote', async () => {
        await quietHead(server) // every append committed, so what the store wrote holds all there is
        const secrets = Object.values(tokens).flatMap(({ token }) => [token, token.split('.')[1] as string])
        const stored = await storedBytes(server)
        expect(stored.length).toBeGreaterThan(0)
        for (const { name, bytes } of stored)
          for (const secret of secrets) expect(bytes.includes(secret), `${secret.slice(0, 6)}… in ${name}`).toBe(false)
      })
    })
  })
}
