import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SearchPage } from '../../src/projections/search/port.js'
import { Client, type StartServer, type TestServer } from './helpers.js'

/**
 * Search through the real server, on each engine (search.test.ts: SQLite; search.postgres.test.ts) (docs/SEARCH.md): `GET /search` and the
 * WebSocket `search` answer the same, a token limited to some sessions finds
 * only in those, their forks and their sub-agents — never another session's
 * text, not even in a snippet — archived sessions only on request, and a
 * malformed query is 400 BAD_QUERY with where it failed.
 */

export function describeSearchRoutes(engine: string, start: StartServer): void {
  let server: TestServer
  let A: string // a limited token's session
  let fork: string // A's fork
  let child: string // a sub-agent's session under A
  let B: string // a session the limited token does not reach
  let archived: string
  let limited: string

  const get = (token: string, url: string) =>
    server.chronicle.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } })
  const post = async (url: string, body: unknown) => {
    const res = await server.chronicle.app.inject({
      method: 'POST',
      url,
      headers: { authorization: `Bearer ${server.token}` },
      payload: body as object,
    })
    expect(res.statusCode).toBeLessThan(300)
    return res.json() as Record<string, unknown>
  }
  const note = (session: string, text: string) =>
    post(`/sessions/${session}/inputs`, { parts: [{ type: 'text', text }], noReply: true })
  const search = async (token: string, query: string, extra = ''): Promise<SearchPage> => {
    const res = await get(token, `/search?q=${encodeURIComponent(query)}${extra}`)
    expect(res.statusCode).toBe(200)
    return res.json() as SearchPage
  }
  const where = (page: SearchPage) => page.hits.map((h) => h.session).sort()

  beforeAll(async () => {
    server = await start({ CHRONICLE_LOG_LEVEL: 'warn' }, { listen: true })
    const create = async (title: string) =>
      ((await post('/sessions', { directory: server.dir, title })) as { session: { id: string } }).session.id
    A = await create('Alpha')
    B = await create('Bravo')
    archived = await create('Old')
    const accepted = (await note(A, 'the pelican deploy is flaky')) as { seq: number }
    await note(B, 'the pelican secret plan of bravo')
    await note(archived, 'the pelican that was archived')
    fork = ((await post(`/sessions/${A}/fork`, { at: accepted.seq, files: false })) as { session: { id: string } })
      .session.id
    await note(fork, 'the pelican in the fork')
    // a sub-agent's session, as the task tool makes one: created under A's call, its prompt its first input
    child = 'ses_child_of_a'
    await server.chronicle.ports.log.append(
      child,
      [
        {
          type: 'session.created',
          data: { directory: server.dir, agent: 'general', model: null, parent: { sessionId: A, callId: 'call_1' } },
        },
        {
          type: 'input.accepted',
          data: {
            inputId: 'in_child',
            parts: [{ type: 'text', text: 'a pelican for the sub-agent' }],
            delivery: 'queue',
            noReply: true,
            digest: 'd',
          },
        },
      ],
      { meta: { actor: 'runtime' } },
    )
    await server.chronicle.app.inject({
      method: 'DELETE',
      url: `/sessions/${archived}`,
      headers: { authorization: `Bearer ${server.token}` },
    })
    limited = ((await post('/tokens', { name: 'lia', role: 'audit', sessions: [A] })) as { token: string }).token
  }, 60_000)
  afterAll(() => server.close())

  describe(`GET /search on ${engine}`, () => {
    it('finds in every session, newest first, and says how far the index has read', async () => {
      const page = await search(server.token, 'pelican')
      expect(page.hits.map((h) => h.session)).toEqual([child, fork, B, A])
      expect(page.indexedThrough).toBe(page.head)
      expect(page.head).toBe(await server.chronicle.ports.log.head())
      expect(page.hits[3]).toMatchObject({
        session: A,
        title: 'Alpha',
        type: 'input',
        event: 'input.accepted',
        by: 'owner',
        snippet: 'the pelican deploy is flaky',
        highlights: [[4, 11]],
      })
    })

    it('a limited token finds only in its sessions, their forks and sub-agents', async () => {
      expect(where(await search(limited, 'pelican'))).toEqual([A, child, fork].sort())
      // nothing of B, not in a hit nor in a snippet, whatever the query names
      for (const q of ['bravo', 'secret plan', `session:${B}`, `pelican session:${B}`, 'type:title']) {
        const page = await search(limited, q)
        expect(page.hits.every((h) => h.session !== B)).toBe(true)
        expect(JSON.stringify(page)).not.toContain('bravo')
        expect(JSON.stringify(page)).not.toContain('Bravo')
      }
      expect((await search(limited, 'type:title')).hits.map((h) => h.title)).toEqual(['Alpha'])
    })

    it('archived sessions only on request', async () => {
      expect(where(await search(server.token, 'archived'))).toEqual([])
      expect(where(await search(server.token, 'archived', '&archived=true'))).toEqual([archived])
    })

    it('pages with the cursor it gives', async () => {
      const first = await search(server.token, 'pelican', '&limit=3')
      expect(first.hits).toHaveLength(3)
      const rest = await search(server.token, 'pelican', `&limit=3&cursor=${first.cursor}`)
      expect([...first.hits, ...rest.hits].map((h) => h.session)).toEqual([child, fork, B, A])
      expect(rest.cursor).toBeUndefined()
    })

    it('a malformed query is 400 BAD_QUERY with the offset where it failed', async () => {
      const res = await get(server.token, `/search?q=${encodeURIComponent('pelican "unclosed')}`)
      expect(res.statusCode).toBe(400)
      expect(res.headers['content-type']).toContain('application/problem+json')
      expect(res.json()).toMatchObject({
        code: 'BAD_QUERY',
        detail: 'this quote is never closed (at character 9)',
        details: { position: 8 },
      })
    })
  })

  describe(`WebSocket search on ${engine}`, () => {
    it('answers as the HTTP route does; a limited token the same as over HTTP', async () => {
      const owner = await Client.connect(server.wsUrl, server.token)
      const lia = await Client.connect(server.wsUrl, limited)
      try {
        const reply = await owner.call('search', { q: 'pelican flaky' })
        expect(reply.result).toEqual(await search(server.token, 'pelican flaky'))
        const theirs = (await lia.call('search', { q: 'pelican' })).result as SearchPage
        expect(theirs.hits.map((h) => h.session).sort()).toEqual([A, child, fork].sort())
        const bad = await owner.call('search', { q: 'type:nothing' })
        expect(bad.error).toMatchObject({ code: 'BAD_QUERY', details: { position: 0 } })
      } finally {
        owner.close()
        lia.close()
      }
    })
  })
}
