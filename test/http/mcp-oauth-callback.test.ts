import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { type ProtectedMcpServer, startProtectedMcpServer } from '../tools/mcp/oauth-server.js'
import { freePort, startServer, type TestServer } from './helpers.js'

/**
 * A remote MCP server's browser sign-in through a real Chronicle: the server
 * starts `needs-auth` (the authorization URL in its status log line), the
 * browser comes back to Chronicle's own GET /mcp/oauth/callback — no
 * Chronicle token, the OAuth `state` is the proof — and the server is
 * connected again with its tools.
 */

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, ms = 20_000): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe('GET /mcp/oauth/callback', () => {
  let mcp: ProtectedMcpServer
  let chronicle: TestServer
  beforeEach(async () => {
    mcp = await startProtectedMcpServer()
    // the redirect URL names Chronicle's port, so it is chosen before Chronicle starts
    chronicle = await startServer(
      { CHRONICLE_PORT: String(await freePort()) },
      { config: { mcp: [{ name: 'protected', type: 'remote', url: mcp.url, headers: {} }] } },
    )
  })
  afterEach(async () => {
    await chronicle.close()
    await mcp.stop()
  })

  const authorizationUrl = () =>
    until('the needs-auth status', () => /"authorizationUrl":"([^"]+)"/.exec(chronicle.logs.join('\n'))?.[1])

  it('signs the server in: the browser returns to Chronicle, which reconnects the server with its tools', async () => {
    const approved = await fetch(await authorizationUrl(), { redirect: 'manual' })
    const callback = approved.headers.get('location') ?? ''
    expect(callback.startsWith(`${chronicle.url}/mcp/oauth/callback?code=`)).toBe(true)

    const back = await fetch(callback) // the browser carries no Chronicle token
    expect([back.status, await back.text()]).toEqual([
      200,
      'Signed in to protected: you can close this tab and go back to Chronicle.',
    ])
    expect(mcp.seen.codeExchanges).toBe(1)
    const tools = await until('the server reconnected', async () => {
      const res = await fetch(`${chronicle.url}/mcp/servers`, {
        headers: { authorization: `Bearer ${chronicle.token}` },
      })
      const body = (await res.json()) as { servers: { name: string; tools: string[] }[] }
      const found = body.servers.find((s) => s.name === 'protected')?.tools ?? []
      return found.length ? found : undefined
    })
    expect(tools).toEqual(['protected_whoami', 'protected_echo_token'])

    // a restart of Chronicle on the same data dir: the stored sign-in connects the server, no browser
    const port = new URL(chronicle.url).port
    await chronicle.chronicle.stop()
    const again = await startServer(
      { CHRONICLE_PORT: port, CHRONICLE_DATA_DIR: join(chronicle.dir, 'data') },
      { config: { mcp: [{ name: 'protected', type: 'remote', url: mcp.url, headers: {} }] } },
    )
    try {
      const state = await until('the server connected after the restart', async () => {
        const res = await fetch(`${again.url}/mcp/servers`, { headers: { authorization: `Bearer ${again.token}` } })
        const body = (await res.json()) as { servers: { name: string; state: string }[] }
        const s = body.servers.find((x) => x.name === 'protected')?.state
        return s === 'ready' || s === 'auth_required' ? s : undefined
      })
      expect(state).toBe('ready')
      expect(mcp.seen.codeExchanges).toBe(1)
    } finally {
      await again.close()
    }
  })

  it('a callback whose state no sign-in was issued with is refused, and no code is exchanged', async () => {
    const approved = await fetch(await authorizationUrl(), { redirect: 'manual' })
    const forged = new URL(approved.headers.get('location') ?? '')
    forged.searchParams.set('state', 'attacker-chosen-state')
    const res = await fetch(forged)
    expect(res.status).toBe(400)
    expect(await res.json()).toMatchObject({
      code: 'BAD_REQUEST',
      detail: 'MCP_OAUTH_NO_SIGN_IN: no sign-in is waiting for this callback',
    })
    expect(mcp.seen.codeExchanges).toBe(0)
  })

  it('an error from the authorization server, or a callback without code and state, is a clear 400', async () => {
    const denied = await fetch(`${chronicle.url}/mcp/oauth/callback?error=access_denied&state=x`)
    expect([denied.status, ((await denied.json()) as { detail: string }).detail]).toEqual([
      400,
      'the authorization server refused the sign-in: access_denied',
    ])
    const bare = await fetch(`${chronicle.url}/mcp/oauth/callback`)
    expect([bare.status, ((await bare.json()) as { detail: string }).detail]).toEqual([
      400,
      'a sign-in callback needs code and state',
    ])
  })
})
