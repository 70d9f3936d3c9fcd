import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser } from 'playwright-core'
import { afterAll, describe, expect, it } from 'vitest'
import { freePort } from '../http/helpers.js'
import { type ProtectedMcpServer, startProtectedMcpServer } from '../tools/mcp/oauth-server.js'
import { buildPage, launch, loggedIn, prepare, type Served, screenshot, serve, tempDir } from './helpers.js'

/**
 * A remote MCP server that wants a browser sign-in, signed in from the page
 * (docs/TOOLS.md "Signing in to remote MCP servers"): the session list
 * offers its authorization URL to an admin, the browser goes to the
 * authorization server and comes back to Chronicle's own callback, and the
 * server is connected with its tools. Other roles are not given the URL.
 */

let dir: string
let root: string
let browser: Browser
let server: Served
let mcp: ProtectedMcpServer

type Servers = { servers: { name: string; state: string; tools: string[]; authorizationUrl?: string }[] }
async function servers(token = server.chronicle.token.token): Promise<Servers['servers']> {
  const res = await fetch(`${server.url}/mcp/servers`, { headers: { authorization: `Bearer ${token}` } })
  expect(res.status).toBe(200)
  return ((await res.json()) as Servers).servers
}
async function until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  for (const end = Date.now() + 20_000; ; await new Promise((r) => setTimeout(r, 100))) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
  }
}

prepare(async () => {
  dir = tempDir('mcp-sign-in')
  root = buildPage()
  browser = await launch()
  mcp = await startProtectedMcpServer()
  server = await serve({
    data: join(dir, 'data'),
    directory: join(dir, 'work'),
    root,
    script: { steps: [{ text: 'ok' }] },
    port: await freePort(), // the redirect URL names Chronicle's port
    config: { mcp: [{ name: 'protected', type: 'remote', url: mcp.url, headers: {} }] },
  })
})

afterAll(async () => {
  await browser?.close()
  await server?.stop()
  await mcp?.stop()
  rmSync(dir, { recursive: true, force: true })
  rmSync(root, { recursive: true, force: true })
})

describe('signing in to a remote MCP server from the page', () => {
  it('offers an admin the URL; the browser comes back to Chronicle, and the server is connected', async () => {
    const url = await until(
      'the sign-in URL',
      async () => (await servers()).find((s) => s.authorizationUrl)?.authorizationUrl,
    )
    // an operator sees the state, not the URL whose state would let a callback in
    const created = await fetch(`${server.url}/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.chronicle.token.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'op', role: 'operate' }),
    })
    const { token } = (await created.json()) as { token: string }
    expect((await servers(token)).map((s) => [s.name, s.state, s.authorizationUrl])).toEqual([
      ['protected', 'auth_required', undefined],
    ])

    const page = await loggedIn(browser, server.chronicle)
    const region = page.getByRole('region', { name: 'Tool servers waiting for a sign-in' })
    const link = region.getByRole('link', { name: 'Sign in to protected' })
    await link.waitFor()
    expect(await link.getAttribute('href')).toBe(url)
    expect(await link.getAttribute('rel')).toBe('noopener noreferrer')
    await screenshot(page, 'mcp-sign-in')

    const [tab] = await Promise.all([page.context().waitForEvent('page'), link.click()])
    await tab.getByText('Signed in to protected: you can close this tab and go back to Chronicle.').waitFor()
    const ready = await until('the server connected', async () => (await servers()).find((s) => s.state === 'ready'))
    expect(ready.tools).toEqual(['protected_whoami', 'protected_echo_token'])
    await page.reload()
    await page.getByRole('heading', { level: 1, name: 'Sessions' }).waitFor()
    expect(await page.getByRole('region', { name: 'Tool servers waiting for a sign-in' }).count()).toBe(0)
  })
})
