import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type StartServer, type TestServer, writeHelloScript } from './helpers.js'

/** The HTTP mirror (docs/API.md), through app.inject against a real composed server. */
export function describeRoutes(engine: string, startServer: StartServer): void {
  describe(`the HTTP routes on ${engine}`, () => {
    let server: TestServer
    let headers: Record<string, string>

    beforeAll(async () => {
      const { mkdtempSync } = await import('node:fs')
      const { tmpdir } = await import('node:os')
      const dir = mkdtempSync(join(tmpdir(), 'chronicle-routes-'))
      const script = join(dir, 'script.json')
      writeHelloScript(script, 'Hi.')
      server = await startServer({ CHRONICLE_LOG_LEVEL: 'warn' }, { listen: false })
      writeFileSync(join(server.dir, 'hello.txt'), 'hello from the file\n') // inside the sessions' directory: no permission needed
      headers = { authorization: `Bearer ${server.token}` }
      // sessions in this file use the script explicitly; the server has no default model
      scriptSpec = `scripted:${script}`
    })
    afterAll(async () => {
      await server.close()
    })
    let scriptSpec = ''

    const inject = (method: string, url: string, payload?: unknown) =>
      server.chronicle.app.inject({
        method: method as 'GET',
        url,
        headers,
        ...(payload !== undefined && { payload: payload as object }),
      })

    async function create(body: Record<string, unknown> = {}): Promise<string> {
      const res = await inject('POST', '/sessions', { directory: server.dir, ...body })
      expect(res.statusCode).toBe(201)
      return (res.json() as { session: { id: string } }).session.id
    }

    describe('sessions', () => {
      it('create, get, list and archive', async () => {
        const id = await create({ title: 'first' })
        const got = await inject('GET', `/sessions/${id}`)
        expect(got.json()).toMatchObject({
          session: {
            id,
            title: 'first',
            status: 'idle',
            agent: 'build',
            model: null,
            directory: server.dir,
            version: 1,
          },
        })
        const listed = (await inject('GET', '/sessions?limit=500')).json() as { sessions: { id: string }[] }
        expect(listed.sessions.map((s) => s.id)).toContain(id)
        expect((await inject('DELETE', `/sessions/${id}`)).json()).toEqual({})
        const archived = (await inject('GET', '/sessions?archived=true')).json() as {
          sessions: { id: string; archived: boolean }[]
        }
        expect(archived.sessions.find((s) => s.id === id)).toMatchObject({ archived: true })
      })

      it('PATCH renames, unarchives and archives in one call, each an event; a blank title is refused, nothing appended', async () => {
        const id = await create({ title: 'draft' })
        await inject('DELETE', `/sessions/${id}`)
        const patched = await inject('PATCH', `/sessions/${id}`, { title: 'The parser fix', archived: false })
        expect(patched.statusCode).toBe(200)
        expect(patched.json()).toMatchObject({ session: { id, title: 'The parser fix', archived: false } })
        const listed = (await inject('GET', '/sessions?limit=500')).json() as { sessions: { id: string }[] }
        expect(listed.sessions.map((s) => s.id)).toContain(id)
        const events = async () =>
          ((await inject('GET', `/sessions/${id}/events`)).json() as { events: { type: string }[] }).events.map(
            (e) => e.type,
          )
        expect(await events()).toEqual(['session.created', 'session.archived', 'session.renamed', 'session.unarchived'])
        // the same again changes nothing and appends nothing
        expect(
          (await inject('PATCH', `/sessions/${id}`, { title: 'The parser fix', archived: false })).statusCode,
        ).toBe(200)
        const blank = await inject('PATCH', `/sessions/${id}`, { title: '   ' })
        expect([blank.statusCode, blank.json().code]).toEqual([400, 'BAD_REQUEST'])
        expect((await inject('PATCH', '/sessions/ses_nope', { archived: true })).statusCode).toBe(404)
        expect(await events()).toEqual(['session.created', 'session.archived', 'session.renamed', 'session.unarchived'])
      })

      it('a request without a body is one with no parameters, with or without a JSON content type', async () => {
        const bare = await server.chronicle.app.inject({ method: 'POST', url: '/sessions', headers })
        expect(bare.statusCode).toBe(201)
        const json = { ...headers, 'content-type': 'application/json' }
        const empty = await server.chronicle.app.inject({
          method: 'POST',
          url: '/sessions',
          headers: json,
          payload: '',
        })
        expect(empty.statusCode).toBe(201)
        const id = (empty.json() as { session: { id: string } }).session.id
        expect(
          (
            await server.chronicle.app.inject({
              method: 'POST',
              url: `/sessions/${id}/cancel`,
              headers: json,
              payload: '',
            })
          ).json(),
        ).toEqual({ cancelled: false })
        // …but a route that needs a body still says so, and bad JSON is still refused
        const noInput = await server.chronicle.app.inject({
          method: 'POST',
          url: `/sessions/${id}/inputs`,
          headers: json,
          payload: '',
        })
        expect(noInput.json()).toMatchObject({ status: 400, code: 'BAD_REQUEST' })
        const poisoned = await server.chronicle.app.inject({
          method: 'POST',
          url: '/sessions',
          headers: json,
          payload: '{"__proto__":{"admin":true}}',
        })
        expect(poisoned.json()).toMatchObject({ status: 400, code: 'BAD_REQUEST' })
        const malformed = await server.chronicle.app.inject({
          method: 'POST',
          url: '/sessions',
          headers: json,
          payload: '{"title":',
        })
        expect(malformed.json()).toMatchObject({ status: 400, code: 'BAD_REQUEST' })
      })

      it('refuses an unknown agent, a relative or missing directory, and unknown sessions', async () => {
        expect((await inject('POST', '/sessions', { agent: 'nobody' })).json()).toMatchObject({
          status: 422,
          code: 'UNKNOWN_AGENT',
        })
        expect((await inject('POST', '/sessions', { directory: 'relative/dir' })).json()).toMatchObject({
          status: 400,
          code: 'BAD_REQUEST',
        })
        expect((await inject('POST', '/sessions', { directory: '/definitely/not/here' })).json()).toMatchObject({
          code: 'BAD_REQUEST',
        })
        const missing = await inject('GET', '/sessions/ses_nope')
        expect(missing.statusCode).toBe(404)
        expect(missing.json()).toEqual({
          type: 'https://chronicle.dev/errors/session-not-found',
          title: 'SESSION_NOT_FOUND',
          status: 404,
          code: 'SESSION_NOT_FOUND',
          detail: 'no session ses_nope',
          instance: '/sessions/ses_nope',
        })
        expect((await inject('GET', '/no/such/route')).json()).toMatchObject({ status: 404, code: 'NOT_FOUND' })
      })
    })

    describe('inputs', () => {
      it('without a model: accepted at once, and the run ends NO_MODEL_CONFIGURED (the server keeps going)', async () => {
        const id = await create()
        const res = await inject('POST', `/sessions/${id}/inputs?wait=true`, {
          inputId: 'in_a',
          parts: [{ type: 'text', text: 'hi' }],
        })
        expect(res.statusCode).toBe(200)
        expect(res.json()).toMatchObject({
          inputId: 'in_a',
          duplicate: false,
          outcome: 'error',
          error: { kind: 'NO_MODEL_CONFIGURED' },
          message: null,
          text: '',
        })
        expect((await inject('GET', '/health')).statusCode).toBe(200)
      })

      it('?wait=true returns the final assistant message of a read-then-answer run', async () => {
        const id = await create({ model: scriptSpec })
        const res = await inject('POST', `/sessions/${id}/inputs?wait=true`, {
          parts: [{ type: 'text', text: 'what is in hello.txt?' }],
        })
        expect(res.statusCode).toBe(200)
        const body = res.json() as {
          outcome: string
          text: string
          message: { role: string; finish: string }
          parts: { type: string }[]
        }
        expect(body).toMatchObject({
          outcome: 'idle',
          text: 'It says hello.',
          message: { role: 'assistant', finish: 'stop' },
        })
        expect(body.parts.map((p) => p.type)).toEqual(['step-start', 'text', 'step-finish'])
      })

      it('without wait: 202 once durable; the same inputId again is a duplicate; different content is INPUT_CONFLICT', async () => {
        const id = await create({ model: scriptSpec })
        const first = await inject('POST', `/sessions/${id}/inputs`, {
          inputId: 'in_same',
          parts: [{ type: 'text', text: 'say hi' }],
        })
        expect(first.statusCode).toBe(202)
        const { seq } = first.json() as { seq: number }
        const again = await inject('POST', `/sessions/${id}/inputs`, {
          inputId: 'in_same',
          parts: [{ type: 'text', text: 'say hi' }],
        })
        expect(again.json()).toEqual({ inputId: 'in_same', seq, duplicate: true })
        const conflict = await inject('POST', `/sessions/${id}/inputs`, {
          inputId: 'in_same',
          parts: [{ type: 'text', text: 'something else' }],
        })
        expect(conflict.json()).toMatchObject({ status: 409, code: 'INPUT_CONFLICT' })
        expect((await inject('POST', `/sessions/${id}/inputs`, { parts: [] })).json()).toMatchObject({
          code: 'BAD_REQUEST',
        })
        await server.chronicle.app.inject({ method: 'POST', url: `/sessions/${id}/cancel`, headers })
      })

      it('cancel answers whether a run was cancelled', async () => {
        const id = await create()
        expect((await inject('POST', `/sessions/${id}/cancel`)).json()).toEqual({ cancelled: false })
      })
    })

    describe('time travel', () => {
      it('state at a seq, events paged, context, and a fork', async () => {
        const id = await create({ model: scriptSpec })
        await inject('POST', `/sessions/${id}/inputs?wait=true`, {
          parts: [{ type: 'text', text: 'what is in hello.txt?' }],
        })
        const page1 = (await inject('GET', `/sessions/${id}/events?limit=5`)).json() as {
          events: { seq: number; type: string }[]
          next: number
        }
        expect(page1.events.map((e) => e.type)).toEqual([
          'session.created',
          'input.accepted',
          'run.started',
          'input.delivered',
          'message.created',
        ])
        const page2 = (await inject('GET', `/sessions/${id}/events?after=${page1.next}&limit=5000`)).json() as {
          events: { seq: number; type: string }[]
          next?: number
        }
        expect(page2.next).toBeUndefined()
        const all = [...page1.events, ...page2.events]
        const completed = all.find((e) => e.type === 'tool.completed')?.seq as number

        const then = (await inject('GET', `/sessions/${id}/state?at=${completed}`)).json() as {
          seq: number
          messages: unknown[]
          parts: { type: string; state?: string }[]
        }
        expect(then.seq).toBe(completed)
        expect(then.messages).toHaveLength(2)
        expect(then.parts.filter((p) => p.type === 'tool').map((p) => p.state)).toEqual(['completed'])
        const now = (await inject('GET', `/sessions/${id}/state`)).json() as { seq: number; messages: unknown[] }
        expect(now.messages).toHaveLength(3)
        expect(now.seq).toBe(all.at(-1)?.seq)
        expect((await inject('GET', `/sessions/${id}/state?at=999999`)).json()).toMatchObject({
          code: 'SEQ_OUT_OF_RANGE',
        })
        // `last`: the end of a long state without the rest of it, now and at a seq
        type Cut = { messages: { id: string }[]; parts: { messageId: string }[]; messageCount?: number }
        const cut = (await inject('GET', `/sessions/${id}/state?last=1`)).json() as Cut
        expect(cut.messages.map((m) => m.id)).toEqual([(now.messages.at(-1) as { id: string }).id])
        expect(new Set(cut.parts.map((p) => p.messageId))).toEqual(new Set([cut.messages[0]?.id]))
        expect(cut.messageCount).toBe(3)
        const cutThen = (await inject('GET', `/sessions/${id}/state?at=${completed}&last=1`)).json() as Cut
        expect([cutThen.messages.length, cutThen.messageCount]).toEqual([1, 2])
        const whole = (await inject('GET', `/sessions/${id}/state?last=3`)).json() as Cut
        expect([whole.messages.length, whole.messageCount]).toEqual([3, undefined])

        const context = (await inject('GET', `/sessions/${id}/context`)).json() as {
          system: string
          digest: string
          messages: unknown[]
        }
        expect(typeof context.system).toBe('string')
        expect(context.digest).toMatch(/^[0-9a-f]+$/)
        // at a step.started: that step's exact request, rebuilt from the log (docs/AUDIT.md)
        const steps = all.filter((e) => e.type === 'step.started') as unknown as {
          seq: number
          data: { contextDigest: string; step: number }
        }[]
        expect(steps).toHaveLength(2)
        for (const step of steps) {
          const sent = (await inject('GET', `/sessions/${id}/context?at=${step.seq}`)).json() as {
            digest: string
            step: { seq: number; contextDigest: string }
          }
          expect(sent.digest).toBe(step.data.contextDigest)
          expect(sent.step).toMatchObject({
            seq: step.seq,
            step: step.data.step,
            contextDigest: step.data.contextDigest,
          })
        }

        const forked = await inject('POST', `/sessions/${id}/fork`, { at: completed, title: 'the fork' })
        expect(forked.statusCode).toBe(201)
        expect(forked.json()).toMatchObject({
          session: { title: 'the fork', forkedFrom: { sessionId: id, seq: completed }, status: 'idle' },
        })
      })

      it('compact requests a manual compaction and answers what was requested', async () => {
        const id = await create({ model: scriptSpec })
        await inject('POST', `/sessions/${id}/inputs?wait=true`, { parts: [{ type: 'text', text: 'say hi' }] })
        const res = await inject('POST', `/sessions/${id}/compact`)
        expect(res.statusCode).toBe(200)
        expect(res.json()).toMatchObject({
          compactionId: expect.stringMatching(/^cmp_/),
          seq: expect.any(Number),
          duplicate: false,
        })
        expect((await inject('POST', '/sessions/ses_nope/compact')).json()).toMatchObject({
          status: 404,
          code: 'SESSION_NOT_FOUND',
        })
      })

      it('serves an OpenAPI document listing the routes', async () => {
        const doc = (await inject('GET', '/openapi.json')).json() as { openapi: string; paths: Record<string, unknown> }
        expect(doc.openapi).toMatch(/^3\./)
        expect(Object.keys(doc.paths).sort()).toEqual([
          '/admin/backup',
          '/health',
          '/login',
          '/login-links',
          '/logout',
          '/mcp/servers',
          '/search',
          '/sessions',
          '/sessions/{id}',
          '/sessions/{id}/cancel',
          '/sessions/{id}/compact',
          '/sessions/{id}/context',
          '/sessions/{id}/diff',
          '/sessions/{id}/elicitations/{elicitationId}',
          '/sessions/{id}/events',
          '/sessions/{id}/export',
          '/sessions/{id}/files',
          '/sessions/{id}/fork',
          '/sessions/{id}/inputs',
          '/sessions/{id}/permissions/{requestId}',
          '/sessions/{id}/revert',
          '/sessions/{id}/rules',
          '/sessions/{id}/rules/{ruleId}',
          '/sessions/{id}/shares',
          '/sessions/{id}/state',
          '/sessions/{id}/unrevert',
          '/shares',
          '/shares/{id}',
          '/tokens',
          '/tokens/{id}',
          '/whoami',
        ])
      })
    })
  })
}
