import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Client, startServer, type TestServer } from '../http/helpers.js'

/**
 * Finding 7 (docs/SECURITY.md): the token travels in a URL only where a
 * browser has no other way — the WebSocket upgrade. On every HTTP route a
 * `?token=` is ignored, so a link or a Referer header can never carry it.
 */

let server: TestServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server.close())

describe('?token= is accepted on the WebSocket upgrade only', () => {
  it.each(['/sessions', '/sessions?limit=1', '/openapi.json'])('GET %s with ?token= is 401', async (path) => {
    const url = `${server.url}${path}${path.includes('?') ? '&' : '?'}token=${server.token}`
    expect((await fetch(url)).status).toBe(401)
    expect((await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${server.token}` } })).status).toBe(
      200,
    )
  })

  it('POST /sessions with ?token= is 401 and creates nothing', async () => {
    const before = server.chronicle.store.head()
    expect((await fetch(`${server.url}/sessions?token=${server.token}`, { method: 'POST' })).status).toBe(401)
    expect(server.chronicle.store.head()).toBe(before)
  })

  it('the upgrade takes it', async () => {
    const c = await Client.connect(`${server.wsUrl}?token=${server.token}`, undefined)
    expect(c.closed).toBeUndefined()
    c.close()
  })
})
