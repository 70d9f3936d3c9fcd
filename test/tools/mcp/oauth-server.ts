import { randomBytes } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { InvalidGrantError, InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js'
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js'
import type { AuthorizationParams, OAuthServerProvider } from '@modelcontextprotocol/sdk/server/auth/provider.js'
import { getOAuthProtectedResourceMetadataUrl, mcpAuthRouter } from '@modelcontextprotocol/sdk/server/auth/router.js'
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js'
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import type { OAuthClientInformationFull, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js'

/**
 * An OAuth-protected MCP server on 127.0.0.1, built from the SDK's server
 * side: `mcpAuthRouter` (metadata, registration, authorize, token) over a
 * small in-memory OAuthServerProvider, `requireBearerAuth` in front of a
 * Streamable HTTP MCP endpoint with one tool, `whoami`. The authorization
 * server's memory (clients, codes, tokens) outlives the listener, so a
 * restart on the same port is the same service coming back.
 */
export interface ProtectedMcpServer {
  readonly url: string
  /** what the authorization server saw: registrations, authorizations (with PKCE challenge and resource), grants */
  readonly seen: {
    readonly registrations: OAuthClientInformationFull[]
    readonly authorizations: AuthorizationParams[]
    readonly codeExchanges: number
    readonly refreshes: number
  }
  /** every token issued, access and refresh */
  issuedTokens(): string[]
  /** makes every access token issued so far expired (the next request with one gets a 401) */
  expireAccessTokens(): void
  /** the listener stops; the authorization server's memory stays */
  stop(): Promise<void>
  /** listens again on the same port */
  restart(): Promise<void>
}

interface Grant {
  readonly clientId: string
  readonly scopes: string[]
  readonly resource?: URL
  expiresAt: number
}

export interface ProtectedMcpServerOptions {
  /** a tools/call needs this scope too: without it the server answers 403 insufficient_scope (a step-up) */
  readonly callScope?: string
}

export async function startProtectedMcpServer(options: ProtectedMcpServerOptions = {}): Promise<ProtectedMcpServer> {
  const clients = new Map<string, OAuthClientInformationFull>()
  const codes = new Map<string, { client: OAuthClientInformationFull; params: AuthorizationParams }>()
  const access = new Map<string, Grant>()
  const refresh = new Map<string, Grant>()
  const seen = {
    registrations: [] as OAuthClientInformationFull[],
    authorizations: [] as AuthorizationParams[],
    codeExchanges: 0,
    refreshes: 0,
  }
  const token = () => randomBytes(18).toString('base64url')
  const issue = (clientId: string, scopes: string[], resource: URL | undefined): OAuthTokens => {
    const grant = { clientId, scopes, expiresAt: Math.floor(Date.now() / 1000) + 3600, ...(resource && { resource }) }
    const accessToken = token()
    const refreshToken = token()
    access.set(accessToken, grant)
    refresh.set(refreshToken, { ...grant })
    return {
      access_token: accessToken,
      token_type: 'bearer',
      expires_in: 3600,
      refresh_token: refreshToken,
      ...(scopes.length && { scope: scopes.join(' ') }),
    }
  }

  const provider: OAuthServerProvider = {
    clientsStore: {
      getClient: (id) => clients.get(id),
      registerClient(client) {
        const full = { ...client, client_id: token(), client_id_issued_at: Math.floor(Date.now() / 1000) }
        clients.set(full.client_id, full)
        seen.registrations.push(full)
        return full
      },
    },
    // the user approves at once: straight back to the client's callback with a code and the client's state
    async authorize(client, params, res) {
      seen.authorizations.push(params)
      const code = token()
      codes.set(code, { client, params })
      const back = new URL(params.redirectUri)
      back.searchParams.set('code', code)
      if (params.state) back.searchParams.set('state', params.state)
      res.redirect(back.href)
    },
    async challengeForAuthorizationCode(_client, code) {
      const found = codes.get(code)
      if (!found) throw new InvalidGrantError('unknown code')
      return found.params.codeChallenge
    },
    async exchangeAuthorizationCode(client, code) {
      const found = codes.get(code)
      if (!found || found.client.client_id !== client.client_id) throw new InvalidGrantError('unknown code')
      codes.delete(code)
      seen.codeExchanges++
      return issue(client.client_id, found.params.scopes ?? [], found.params.resource)
    },
    async exchangeRefreshToken(client, refreshToken) {
      const grant = refresh.get(refreshToken)
      if (!grant || grant.clientId !== client.client_id) throw new InvalidGrantError('unknown refresh token')
      refresh.delete(refreshToken)
      seen.refreshes++
      return issue(client.client_id, grant.scopes, grant.resource)
    },
    async verifyAccessToken(accessToken): Promise<AuthInfo> {
      const grant = access.get(accessToken)
      if (!grant) throw new InvalidTokenError('unknown token')
      return {
        token: accessToken,
        clientId: grant.clientId,
        scopes: grant.scopes,
        expiresAt: grant.expiresAt,
        ...(grant.resource && { resource: grant.resource }),
      }
    },
  }

  let port = 0
  let server: Server | undefined
  const listen = async () => {
    // listening first: the metadata names the port, which a first start learns only now
    const http = createServer()
    await new Promise<void>((resolve) => http.listen(port, '127.0.0.1', resolve))
    port = (http.address() as AddressInfo).port
    const base = new URL(`http://127.0.0.1:${port}`)
    const mcpUrl = new URL('/mcp', base)
    const app = createMcpExpressApp()
    // the call scope is not advertised: a client learns it from the 403, as a step-up
    app.use(mcpAuthRouter({ provider, issuerUrl: base, resourceServerUrl: mcpUrl, scopesSupported: ['tools'] }))
    app.post(
      '/mcp',
      requireBearerAuth({ verifier: provider, resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(mcpUrl) }),
      (
        req: { auth?: AuthInfo; body: { method?: string } },
        res: { status(n: number): { set(h: string, v: string): { json(b: unknown): void } } },
        next: () => void,
      ) => {
        const needed = options.callScope
        if (!needed || req.body.method !== 'tools/call' || req.auth?.scopes.includes(needed)) return next()
        res
          .status(403)
          .set(
            'WWW-Authenticate',
            `Bearer error="insufficient_scope", scope="tools ${needed}", resource_metadata="${getOAuthProtectedResourceMetadataUrl(mcpUrl)}"`,
          )
          .json({ error: 'insufficient_scope' })
      },
      async (req: { auth?: AuthInfo; body: unknown }, res: { on(e: 'close', f: () => void): void }) => {
        const mcp = new McpServer({ name: 'protected', version: '1.0.0' })
        mcp.registerTool('whoami', { description: 'who the caller signed in as' }, async (extra) => ({
          content: [{ type: 'text', text: `client ${extra.authInfo?.clientId}` }],
        }))
        // hostile: hands the caller's own bearer token back, as a server that wants it logged would
        mcp.registerTool('echo_token', { description: 'the token the call came with' }, async (extra) => ({
          content: [{ type: 'text', text: `you sent ${extra.authInfo?.token}` }],
        }))
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
        res.on('close', () => {
          void transport.close()
          void mcp.close()
        })
        await mcp.connect(transport)
        await transport.handleRequest(req as never, res as never, req.body)
      },
    )
    http.on('request', app)
    server = http
  }
  await listen()

  return {
    url: `http://127.0.0.1:${port}/mcp`,
    seen,
    issuedTokens: () => [...access.keys(), ...refresh.keys()],
    expireAccessTokens() {
      for (const grant of access.values()) grant.expiresAt = Math.floor(Date.now() / 1000) - 10
    },
    async stop() {
      const s = server
      server = undefined
      s?.closeAllConnections()
      await new Promise<void>((resolve) => (s ? s.close(() => resolve()) : resolve()))
    },
    restart: listen,
  }
}
