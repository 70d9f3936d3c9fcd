import { request } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DEFAULT_LIMITS, loadConfig } from '../../src/config.js'
import { routesOf } from '../../src/http/app.js'
import { PUBLIC_ROUTES } from '../../src/http/security.js'
import { createChronicle } from '../../src/main.js'
import { Client, startServer, type TestServer } from './helpers.js'
import { appendedHead } from '../events/fixtures/store.js'

/** Security defaults (SECURITY.md T1–T7, T13): every check is table-driven over the real app. */

const API_KEY = 'sk-test-0123456789abcdefSECRET'
let server: TestServer

beforeAll(async () => {
  server = await startServer(
    { CHRONICLE_API_KEY: API_KEY, OPENAI_API_KEY: `${API_KEY}-openai`, CHRONICLE_LOG_LEVEL: 'trace' },
    { config: { limits: { ...DEFAULT_LIMITS, frameBytes: 4096 } } },
  )
})
afterAll(async () => {
  await server.close()
})

/** The only routes served without a credential: health, and the web page with its login (docs/SECURITY.md). */
const PUBLIC = ['GET /', 'GET /assets/*', 'GET /health', 'GET /login', 'GET /mcp/oauth/callback', 'POST /login']

const concrete = (url: string) => url.replace(':id', 'ses_x').replace(':requestId', 'per_x').replace(':ruleId', 'rul_x')

describe('authentication', () => {
  it('the route table is what we expect (a new route must join this test)', () => {
    const routes = routesOf(server.chronicle.app)
      .map((r) => `${r.method} ${r.url}`)
      .sort()
    expect(routes).toEqual([
      'DELETE /sessions/:id',
      'DELETE /sessions/:id/rules/:ruleId',
      'DELETE /shares/:id',
      'DELETE /tokens/:id',
      'GET /',
      'GET /assets/*',
      'GET /cluster',
      'GET /health',
      'GET /login',
      'GET /mcp/oauth/callback',
      'GET /mcp/servers',
      'GET /metrics',
      'GET /openapi.json',
      'GET /search',
      'GET /sessions',
      'GET /sessions/:id',
      'GET /sessions/:id/context',
      'GET /sessions/:id/diff',
      'GET /sessions/:id/events',
      'GET /sessions/:id/export',
      'GET /sessions/:id/files',
      'GET /sessions/:id/rules',
      'GET /sessions/:id/state',
      'GET /shares',
      'GET /tokens',
      'GET /whoami',
      'GET /ws',
      'PATCH /sessions/:id',
      'POST /admin/backup',
      'POST /login',
      'POST /login-links',
      'POST /logout',
      'POST /sessions',
      'POST /sessions/:id/cancel',
      'POST /sessions/:id/compact',
      'POST /sessions/:id/elicitations/:elicitationId',
      'POST /sessions/:id/fork',
      'POST /sessions/:id/inputs',
      'POST /sessions/:id/permissions/:requestId',
      'POST /sessions/:id/revert',
      'POST /sessions/:id/shares',
      'POST /sessions/:id/unrevert',
      'POST /tokens',
    ])
  })

  it('the routes served without a credential are health, the web page with its login and the MCP sign-in callback, and no other', () => {
    expect([...PUBLIC_ROUTES].sort()).toEqual(PUBLIC)
    const served = routesOf(server.chronicle.app).map((r) => `${r.method} ${r.url}`)
    for (const route of PUBLIC) expect(served).toContain(route)
  })

  it('every other route answers 401 without a credential, with a wrong token or session cookie, before any handler runs', async () => {
    const app = server.chronicle.app
    const head = server.chronicle.store.head()
    const routes = routesOf(app).filter((r) => !PUBLIC.includes(`${r.method} ${r.url}`))
    for (const route of routes) {
      for (const headers of [
        {},
        { authorization: 'Bearer wrong-token-wrong-token' },
        { authorization: `Basic ${server.token}` },
        // with the server's own Origin, as the page's requests come
        { cookie: 'chronicle_session=not-a-session-not-a-session', host: 'localhost', origin: 'http://localhost' },
        { cookie: `chronicle_session=${server.token}`, host: 'localhost', origin: 'http://localhost' },
      ]) {
        const res = await app.inject({
          method: route.method as 'GET',
          url: concrete(route.url),
          headers: { ...headers, 'content-type': 'application/json' },
          payload:
            route.method === 'GET' || route.method === 'DELETE'
              ? undefined
              : '{"parts":[{"type":"text","text":"hi"}],"at":1,"reply":"once"}',
        })
        expect([route, res.statusCode, res.headers['content-type']]).toEqual([
          route,
          401,
          'application/problem+json; charset=utf-8',
        ])
        expect(res.json()).toMatchObject({ code: 'UNAUTHORIZED', status: 401 })
        expect(res.headers['www-authenticate']).toBe('Bearer realm="chronicle"')
      }
    }
    expect(server.chronicle.store.head()).toBe(head)
    expect((await app.inject({ url: '/health' })).statusCode).toBe(200)
    expect(
      (await app.inject({ url: '/sessions', headers: { authorization: `Bearer ${server.token}` } })).statusCode,
    ).toBe(200)
  })

  it('the public routes answer without a credential, and append nothing', async () => {
    const app = server.chronicle.app
    const head = appendedHead(server.chronicle.store)
    // the page (this checkout's dist/web) is built or not: its index, or the page saying to build it
    expect([200, 503]).toContain((await app.inject({ url: '/' })).statusCode)
    expect([200, 503]).toContain((await app.inject({ url: '/login' })).statusCode)
    const asset = await app.inject({ url: '/assets/no-such-file.js' })
    expect([asset.statusCode, asset.json().code]).toEqual([404, 'NOT_FOUND'])
    const login = await app.inject({ method: 'POST', url: '/login', payload: { code: 'not-a-code' } })
    expect([login.statusCode, login.json().code]).toEqual([401, 'LOGIN_INVALID'])
    expect(login.headers['set-cookie']).toBeUndefined()
    expect(appendedHead(server.chronicle.store)).toBe(head)
  })

  it('the WebSocket upgrade needs the token: header, subprotocol or query', async () => {
    const app = server.chronicle.app
    // injectWS sends no Host header unless told (real clients always do): without one the request is refused as 403.
    await expect(app.injectWS('/ws')).rejects.toThrow('Unexpected server response: 403')
    await expect(app.injectWS('/ws', { headers: { host: 'localhost' } })).rejects.toThrow(
      'Unexpected server response: 401',
    )
    await expect(
      app.injectWS('/ws', { headers: { host: 'localhost', authorization: 'Bearer nope-nope-nope-nope' } }),
    ).rejects.toThrow('Unexpected server response: 401')
    await expect(Client.connect(server.wsUrl, undefined)).rejects.toThrow('Unexpected server response: 401')
    await expect(Client.connect(server.wsUrl, 'wrong-token-wrong-token')).rejects.toThrow(
      'Unexpected server response: 401',
    )

    const viaHeader = await app.injectWS('/ws', {
      headers: { host: 'localhost', authorization: `Bearer ${server.token}` },
    })
    viaHeader.terminate()
    const viaQuery = await Client.connect(`${server.wsUrl}?token=${server.token}`, undefined)
    expect((await viaQuery.call('hello', { protocol: 1 })).result).toMatchObject({ protocol: 1 })
    viaQuery.close()
    const { default: WebSocket } = await import('ws')
    const browser = new WebSocket(server.wsUrl, ['chronicle.v1', `chronicle.token.${server.token}`])
    await new Promise((resolve, reject) => browser.once('open', resolve).once('error', reject))
    expect(browser.protocol).toBe('chronicle.v1')
    browser.terminate()
  })
})

describe('Origin and Host', () => {
  const auth = () => ({ authorization: `Bearer ${server.token}` })

  it.each(['https://evil.example', 'null', 'file://', 'http://localhost:5173', 'http://evil.com@127.0.0.1'])(
    'Origin %s is refused on HTTP routes and the upgrade (403)',
    async (origin) => {
      const res = await server.chronicle.app.inject({ url: '/sessions', headers: { ...auth(), origin } })
      expect(res.statusCode).toBe(403)
      expect(res.json()).toMatchObject({ code: 'FORBIDDEN' })
      expect(res.headers['access-control-allow-origin']).toBeUndefined()
      await expect(Client.connect(server.wsUrl, server.token, { origin })).rejects.toThrow(
        'Unexpected server response: 403',
      )
    },
  )

  it('the server’s own origin and no Origin at all are served', async () => {
    const own = await Client.connect(server.wsUrl, server.token, { origin: server.url })
    const none = await Client.connect(server.wsUrl, server.token)
    own.close()
    none.close()
  })

  it.each(['evil.example', 'evil.example:80', '127.0.0.1.evil.example', 'user@127.0.0.1'])(
    'Host %s is refused (DNS rebinding)',
    async (host) => {
      const res = await server.chronicle.app.inject({ url: '/sessions', headers: { ...auth(), host } })
      expect(res.statusCode).toBe(403)
      expect((await server.chronicle.app.inject({ url: '/health', headers: { host } })).statusCode).toBe(403)
    },
  )

  it('a real request with Host: evil.example is refused; loopback names are served', async () => {
    const port = Number(new URL(server.url).port)
    const status = (host: string) =>
      new Promise<number>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, path: '/sessions', headers: { host, ...auth() } }, (res) => {
          res.resume()
          resolve(res.statusCode ?? 0)
        })
        req.on('error', reject)
        req.end()
      })
    expect(await status('evil.example')).toBe(403)
    expect(await status(`localhost:${port}`)).toBe(200)
    expect(await status(`127.0.0.1:${port}`)).toBe(200)
    expect(await status(`[::1]:${port}`)).toBe(200)
  })
})

describe('limits', () => {
  it('a frame over the limit closes the socket with 1009', async () => {
    const c = await Client.connect(server.wsUrl, server.token)
    c.send(JSON.stringify({ id: 'big', method: 'hello', params: { pad: 'x'.repeat(8000) } }))
    expect(await c.whenClosed).toBe(1009)
  })

  it('bodies over the limit are 413 and text/plain bodies are refused', async () => {
    const app = server.chronicle.app
    const headers = { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' }
    const big = await app.inject({
      method: 'POST',
      url: '/sessions',
      headers,
      payload: JSON.stringify({ title: 'x'.repeat(2 * 1024 * 1024) }),
    })
    expect(big.statusCode).toBe(413)
    expect(big.json()).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' })
    const plain = await app.inject({
      method: 'POST',
      url: '/sessions',
      headers: { ...headers, 'content-type': 'text/plain' },
      payload: '{}',
    })
    expect(plain.statusCode).toBe(415)
  })
})

describe('flooding', () => {
  it('a burst of commands past the per-second cap gets RATE_LIMITED replies, one per id, and the socket stays open', async () => {
    const c = await Client.connect(server.wsUrl, server.token)
    for (let i = 0; i < 600; i++) c.send(JSON.stringify({ id: i, method: 'hello', params: { protocol: 1 } }))
    for (let i = 0; i < 250 && c.frames.filter((f) => typeof f.id === 'number').length < 600; i++)
      await new Promise((r) => setTimeout(r, 20))
    const replies = c.frames.filter((f) => typeof f.id === 'number')
    expect(replies.map((f) => f.id as number).sort((a, b) => a - b)).toEqual(Array.from({ length: 600 }, (_, i) => i))
    const limited = replies.filter((f) => (f.error as { code?: string } | undefined)?.code === 'RATE_LIMITED')
    expect(limited.length).toBeGreaterThanOrEqual(100)
    expect(c.closed).toBeUndefined()
    c.close()
  })
})

describe('binding', () => {
  it('refuses a non-loopback address without an explicit token', async () => {
    const config = loadConfig({
      env: { CHRONICLE_DATA_DIR: `${server.dir}/other`, CHRONICLE_HOST: '0.0.0.0', CHRONICLE_PORT: '0' },
    })
    await expect(createChronicle(config)).rejects.toThrow(/refusing to listen on 0\.0\.0\.0/)
  })

  it('binds 127.0.0.1 by default', () => {
    expect(loadConfig({ env: {} }).host).toBe('127.0.0.1')
    expect(new URL(server.url).hostname).toBe('127.0.0.1')
  })
})

describe('logs', () => {
  it('never contain the token or an API key, wherever they were sent', async () => {
    const app = server.chronicle.app
    await app.inject({ url: `/sessions?token=${server.token}` })
    await app.inject({ url: '/sessions', headers: { authorization: `Bearer ${server.token}` } })
    await app.inject({ url: `/nope?token=${server.token}&x=${API_KEY}` })
    const c = await Client.connect(`${server.wsUrl}?token=${server.token}`, undefined)
    c.close()
    server.chronicle.logger.info({ config: server.chronicle.config }, 'config dump')
    server.chronicle.logger.error({ err: new Error(`provider refused key ${API_KEY}`) }, 'model call failed')
    server.chronicle.logger.flush()
    await new Promise((r) => setTimeout(r, 50))
    const text = server.logs.join('')
    expect(text).toContain('/sessions?token=[REDACTED]')
    expect(text).toContain('"msg":"request refused"')
    expect(text).toContain('model call failed')
    expect(text).not.toContain(server.token)
    expect(text).not.toContain(API_KEY)
  })
})
