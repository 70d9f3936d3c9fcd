import { request } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { routesOf } from '../../src/http/app.js'
import { startServer, type TestServer } from './helpers.js'

/**
 * CORS for the configured origins only (docs/API.md "CORS"), over a real
 * listening server and fetch: a page from an origin in `allowedOrigins` gets
 * its preflight answered without the token and every answer named for it;
 * any other origin gets no CORS header and is refused as before; with no
 * `allowedOrigins` there is no CORS at all.
 */

const ALLOWED = 'http://127.0.0.1:5173'
const FOREIGN = 'https://evil.example'

let server: TestServer
let plain: TestServer
beforeAll(async () => {
  server = await startServer({ CHRONICLE_LOG_LEVEL: 'warn' }, { config: { allowedOrigins: [ALLOWED] } })
  plain = await startServer({ CHRONICLE_LOG_LEVEL: 'warn' })
})
afterAll(async () => {
  await server.close()
  await plain.close()
})

const preflight = (s: TestServer, path: string, origin: string) =>
  fetch(`${s.url}${path}`, {
    method: 'OPTIONS',
    headers: {
      origin,
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'authorization, content-type',
    },
  })

/** The response's CORS headers (access-control-*), by name. */
function corsHeaders(res: Response): Record<string, string> {
  return Object.fromEntries([...res.headers].filter(([name]) => name.startsWith('access-control-')))
}

describe('with allowedOrigins', () => {
  it('answers a preflight from an allowed origin without the token: 204, that origin, the methods and headers', async () => {
    const head = server.chronicle.store.head()
    const res = await preflight(server, '/sessions', ALLOWED)
    expect(res.status).toBe(204)
    expect(await res.text()).toBe('')
    expect(corsHeaders(res)).toEqual({
      'access-control-allow-origin': ALLOWED,
      'access-control-allow-methods': 'GET, POST, PATCH, DELETE',
      'access-control-allow-headers': 'authorization, content-type, x-command-id',
      'access-control-max-age': '600',
    })
    expect(res.headers.get('vary')).toBe('Origin')
    expect(server.chronicle.store.head()).toBe(head)
  })

  it('names the allowed origin on real answers, refusals included (Vary: Origin, no credentials)', async () => {
    const auth = { authorization: `Bearer ${server.token}`, origin: ALLOWED }
    const listed = await fetch(`${server.url}/sessions`, { headers: auth })
    expect(listed.status).toBe(200)
    expect(corsHeaders(listed)).toEqual({ 'access-control-allow-origin': ALLOWED })
    expect(listed.headers.get('vary')).toBe('Origin')

    const created = await fetch(`${server.url}/sessions`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '{}',
    })
    expect(created.status).toBe(201)
    expect(corsHeaders(created)).toEqual({ 'access-control-allow-origin': ALLOWED })

    const refused = await fetch(`${server.url}/sessions`, { headers: { origin: ALLOWED } })
    expect(refused.status).toBe(401)
    expect(corsHeaders(refused)).toEqual({ 'access-control-allow-origin': ALLOWED })
    expect(await refused.json()).toMatchObject({ code: 'UNAUTHORIZED' })
  })

  it('gives any other origin no CORS header: its preflight and its requests are refused (403)', async () => {
    for (const origin of [FOREIGN, 'null', 'http://127.0.0.1:5174', `${ALLOWED}/`]) {
      const res = await preflight(server, '/sessions', origin)
      expect([origin, res.status, corsHeaders(res)]).toEqual([origin, 403, {}])
      expect(await res.json()).toMatchObject({ code: 'FORBIDDEN' })
      const get = await fetch(`${server.url}/sessions`, {
        headers: { authorization: `Bearer ${server.token}`, origin },
      })
      expect([origin, get.status, corsHeaders(get)]).toEqual([origin, 403, {}])
    }
  })

  it('answers no preflight for a Host it does not serve, whatever the origin (DNS rebinding)', async () => {
    const status = await new Promise<{ code: number | undefined; headers: string[] }>((resolve, reject) => {
      const req = request(`${server.url}/sessions`, {
        method: 'OPTIONS',
        headers: { host: 'evil.example', origin: ALLOWED, 'access-control-request-method': 'GET' },
      })
      req.on('response', (res) => {
        res.resume()
        resolve({ code: res.statusCode, headers: Object.keys(res.headers).filter((h) => h.startsWith('access-')) })
      })
      req.on('error', reject)
      req.end()
    })
    expect(status).toEqual({ code: 403, headers: [] })
  })

  it('a request without an Origin (curl, the CLI) carries no CORS header', async () => {
    const res = await fetch(`${server.url}/sessions`, { headers: { authorization: `Bearer ${server.token}` } })
    expect(res.status).toBe(200)
    expect(corsHeaders(res)).toEqual({})
  })
})

describe('without allowedOrigins', () => {
  it('there is no CORS at all: no preflight route, no header, a preflight refused like any foreign request', async () => {
    expect(routesOf(plain.chronicle.app).filter((r) => r.method === 'OPTIONS')).toEqual([])
    const res = await preflight(plain, '/sessions', ALLOWED)
    expect([res.status, corsHeaders(res)]).toEqual([403, {}])
    const options = await fetch(`${plain.url}/sessions`, { method: 'OPTIONS' })
    expect([options.status, corsHeaders(options)]).toEqual([401, {}])
    const get = await fetch(`${plain.url}/sessions`, { headers: { authorization: `Bearer ${plain.token}` } })
    expect([get.status, corsHeaders(get)]).toEqual([200, {}])
  })
})
