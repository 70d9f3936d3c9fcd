import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { parseMcpConfig } from '../../../src/tools/mcp/config.js'
import { createRedactor } from '../../../src/tools/redact.js'
import { finishMcpSignIn, McpOAuthError, type RemoteMcpServerConfig } from '../../../src/tools/mcp/oauth.js'
import { MCP_OAUTH_FILE } from '../../../src/tools/mcp/oauth-store.js'
import {
  connectMcpServer,
  type McpServerHandle,
  type McpServerOptions,
  type McpServerStatus,
} from '../../../src/tools/mcp/server.js'
import { type ProtectedMcpServer, startProtectedMcpServer } from './oauth-server.js'
import { allowAll } from './context.js'

const REDIRECT = 'http://127.0.0.1:4780/mcp/oauth/callback'

const ctx = allowAll

/** The user's browser: opens the URL, the authorization server approves and redirects to Chronicle's callback. */
async function approveInBrowser(authorizationUrl: string): Promise<{ code: string; state: string | null }> {
  const response = await fetch(authorizationUrl, { redirect: 'manual' })
  const back = new URL(response.headers.get('location') ?? 'about:blank')
  expect(`${back.origin}${back.pathname}`).toBe(REDIRECT)
  return { code: back.searchParams.get('code') ?? '', state: back.searchParams.get('state') }
}

async function whoami(handle: McpServerHandle): Promise<string> {
  const tool = handle.tools().find((t) => t.id === 'protected_whoami')
  if (!tool) throw new Error(`no whoami tool: ${JSON.stringify(handle.status())}`)
  return (await tool.execute({}, ctx)).output
}

describe('signing in to an OAuth-protected remote MCP server', () => {
  let server: ProtectedMcpServer
  let dataDir: string
  let config: RemoteMcpServerConfig
  let statuses: McpServerStatus[]
  let opts: McpServerOptions
  const handles: McpServerHandle[] = []
  const connect = async () => {
    const handle = await connectMcpServer(config, opts)
    handles.push(handle)
    return handle
  }
  const signIn = async () => {
    const first = await connect()
    const url = first.status().authorizationUrl ?? ''
    await finishMcpSignIn(config, { dataDir, redirectUrl: REDIRECT }, await approveInBrowser(url))
    await first.close()
    return connect()
  }
  const storedTokens = () =>
    (
      JSON.parse(readFileSync(join(dataDir, MCP_OAUTH_FILE), 'utf8')) as {
        servers: Record<string, { tokens?: { access_token: string; refresh_token?: string } }>
      }
    ).servers.protected?.tokens

  beforeEach(async () => {
    server = await startProtectedMcpServer()
    dataDir = mkdtempSync(join(tmpdir(), 'chronicle-oauth-'))
    config = { name: 'protected', type: 'remote', url: server.url, headers: {} }
    statuses = []
    opts = { dataDir, oauthRedirectUrl: REDIRECT, connectTimeoutMs: 10_000, onStatus: (s) => statuses.push(s) }
  })
  afterEach(async () => {
    for (const h of handles.splice(0)) await h.close()
    await server.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it('a server that wants a sign-in is needs-auth with the URL to open, not failed', async () => {
    const handle = await connect()
    const status = handle.status()
    expect(status.state).toBe('needs-auth')
    expect(status.tools).toBe(0)
    expect(handle.tools()).toEqual([])
    const url = new URL(status.authorizationUrl ?? '')
    // discovery found the authorization server, Chronicle registered itself, and the URL carries PKCE and the resource
    expect(`${url.origin}${url.pathname}`).toBe(new URL('/authorize', server.url).href)
    expect(url.searchParams.get('code_challenge_method')).toBe('S256')
    expect(url.searchParams.get('resource')).toBe(server.url)
    expect(url.searchParams.get('redirect_uri')).toBe(REDIRECT)
    expect(url.searchParams.get('state')).toMatch(/^[\w-]{32}$/)
    expect(server.seen.registrations.map((r) => [r.client_name, r.redirect_uris, r.grant_types])).toEqual([
      ['Chronicle', [REDIRECT], ['authorization_code', 'refresh_token']],
    ])
    expect(statuses.map((s) => s.state)).toEqual(['needs-auth'])
  })

  it('the callback exchanges the code (PKCE checked by the server) and the next connection is signed in', async () => {
    const handle = await signIn()
    expect(handle.status().state).toBe('connected')
    expect(await whoami(handle)).toBe(`client ${server.seen.registrations[0]?.client_id}`)
    expect(server.seen.authorizations).toHaveLength(1)
    expect(server.seen.authorizations[0]?.resource?.href).toBe(server.url)
    expect(server.seen.codeExchanges).toBe(1)
  })

  it('keeps tokens in one 0600 file in the data dir, and nowhere else: not in any status', async () => {
    await signIn()
    const file = join(dataDir, MCP_OAUTH_FILE)
    expect(statSync(file).mode & 0o777).toBe(0o600)
    expect(readdirSync(dataDir)).toEqual([MCP_OAUTH_FILE])
    const tokens = storedTokens()
    expect(tokens?.access_token).toMatch(/^[\w-]{20,}$/)
    expect(tokens?.refresh_token).toMatch(/^[\w-]{20,}$/)
    const shown = JSON.stringify(statuses)
    expect(shown).not.toContain(tokens?.access_token)
    expect(shown).not.toContain(tokens?.refresh_token)
  })

  it('a server echoing its token back finds it redacted: the redactor learned it when it was handed out', async () => {
    const redactor = createRedactor([])
    opts = { ...opts, learnSecrets: redactor.learn }
    const handle = await signIn()
    const tool = handle.tools().find((t) => t.id === 'protected_echo_token')
    const output = (await tool?.execute({}, ctx))?.output ?? ''
    const token = storedTokens()?.access_token ?? ''
    expect(output).toBe(`you sent ${token}`) // the hostile server did send it back
    expect(redactor.text(output)).toBe('you sent [redacted:protected access token]')
    expect(redactor.text(`refresh: ${storedTokens()?.refresh_token}`)).toBe(
      'refresh: [redacted:protected refresh token]',
    )
  })

  it('an expired access token is refreshed through the SDK, without a new sign-in', async () => {
    const handle = await signIn()
    const before = storedTokens()
    server.expireAccessTokens()
    expect(await whoami(handle)).toMatch(/^client /)
    expect(server.seen.refreshes).toBe(1)
    expect(server.seen.authorizations).toHaveLength(1)
    const after = storedTokens()
    expect(after?.access_token).not.toBe(before?.access_token)
    expect(after?.refresh_token).not.toBe(before?.refresh_token)
  })

  it('after the MCP server restarts, a new connection uses the stored token: no sign-in', async () => {
    const first = await signIn()
    await first.close()
    await server.stop()
    // a restart takes a moment; in it, the client's pool sees its kept-alive sockets closed
    await new Promise((resolve) => setTimeout(resolve, 100))
    await server.restart()
    const again = await connect()
    expect(again.status()).toMatchObject({ state: 'connected', tools: 2 }) // whoami, echo_token
    expect(await whoami(again)).toMatch(/^client /)
    expect(server.seen.authorizations).toHaveLength(1)
    expect(server.seen.codeExchanges).toBe(1)
  })

  it('a step-up (403 insufficient_scope) asks the user for the wider scope: a refresh could not widen it', async () => {
    await server.stop()
    server = await startProtectedMcpServer({ callScope: 'admin' })
    config = { ...config, url: server.url }
    const handle = await signIn()
    const tool = handle.tools()[0]
    await expect(tool?.execute({}, ctx)).rejects.toThrow('server is needs-auth')
    const status = handle.status()
    expect(status.state).toBe('needs-auth')
    expect(new URL(status.authorizationUrl ?? '').searchParams.get('scope')).toBe('tools admin')
    expect(server.seen.refreshes).toBe(0)
    await finishMcpSignIn(
      config,
      { dataDir, redirectUrl: REDIRECT },
      await approveInBrowser(status.authorizationUrl ?? ''),
    )
    await handle.close()
    const again = await connect()
    expect(await whoami(again)).toMatch(/^client /)
    expect(server.seen.authorizations.map((a) => a.scopes)).toEqual([['tools'], ['tools', 'admin']])
  })

  it('a callback with another state is refused (a forged callback cannot plant its code)', async () => {
    const first = await connect()
    const { code } = await approveInBrowser(first.status().authorizationUrl ?? '')
    const forged = finishMcpSignIn(config, { dataDir, redirectUrl: REDIRECT }, { code, state: 'attacker-state' })
    await expect(forged).rejects.toMatchObject({ code: 'MCP_OAUTH_STATE_MISMATCH' })
    await expect(forged).rejects.toBeInstanceOf(McpOAuthError)
    expect(server.seen.codeExchanges).toBe(0)
    expect(storedTokens()).toBeUndefined()
  })

  it('a callback when no sign-in is waiting is refused', async () => {
    const none = finishMcpSignIn(config, { dataDir, redirectUrl: REDIRECT }, { code: 'x', state: 'y' })
    await expect(none).rejects.toMatchObject({ code: 'MCP_OAUTH_NO_SIGN_IN' })
  })

  it('with oauth: false a 401 is a failure that names the 401, and no sign-in starts', async () => {
    config = { ...config, oauth: false }
    const handle = await connect()
    expect(handle.status()).toMatchObject({ state: 'failed', transport: 'streamable-http' })
    expect(handle.status().error).toMatch(/^HTTP 401: /)
    expect(server.seen.registrations).toEqual([])
  })
})

describe('the legacy SSE fallback', () => {
  let http: Server
  let url: string
  beforeEach(async () => {
    // answers everything 401 with a Bearer challenge and no metadata anywhere
    http = createServer((_req, res) => {
      res.writeHead(401, { 'www-authenticate': 'Bearer error="invalid_token"' }).end()
    })
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`
  })
  afterEach(() => new Promise<void>((resolve) => http.close(() => resolve())))

  it('is not tried on a 401: the status names the 401, not an SSE error', async () => {
    const handle = await connectMcpServer(
      { name: 'locked', type: 'remote', url, headers: {}, oauth: false },
      { connectTimeoutMs: 5000 },
    )
    expect(handle.status()).toMatchObject({ state: 'failed', transport: 'streamable-http' })
    expect(handle.status().error).toMatch(/^HTTP 401: /)
    expect(handle.status().error).not.toMatch(/SSE/)
  })
})

describe('oauth configuration', () => {
  const remote = (oauth: unknown) => ({ mcp: { docs: { type: 'remote', url: 'https://mcp.example.com/mcp', oauth } } })

  it('carries the oauth settings (or false) through both config shapes', () => {
    expect(parseMcpConfig(remote({ clientId: 'abc', clientSecret: 's', scope: 'read' }))).toEqual([
      {
        name: 'docs',
        type: 'remote',
        url: 'https://mcp.example.com/mcp',
        headers: {},
        oauth: { clientId: 'abc', clientSecret: 's', scope: 'read' },
      },
    ])
    expect(parseMcpConfig({ mcpServers: { docs: { url: 'https://mcp.example.com/mcp', oauth: false } } })).toEqual([
      { name: 'docs', type: 'remote', url: 'https://mcp.example.com/mcp', headers: {}, oauth: false },
    ])
  })

  it.each([
    [{ clientSecret: 's' }, 'oauth.clientSecret needs oauth.clientId'],
    [{ grant: 'client_credentials', clientId: 'a' }, 'needs oauth.clientId and oauth.clientSecret or oauth.privateKey'],
    [{ privateKey: 'PEM' }, 'oauth.privateKey is only used with oauth.grant "client_credentials"'],
    [{ clientMetadataUrl: 'http://example.com/c.json' }, 'clientMetadataUrl must be an https URL'],
    [{ clientID: 'typo' }, 'Unrecognized key: "clientID"'],
    [true, 'Invalid input'],
  ])('refuses oauth %j with a message that says why', (oauth, message) => {
    expect(() => parseMcpConfig(remote(oauth))).toThrow(message)
  })
})
