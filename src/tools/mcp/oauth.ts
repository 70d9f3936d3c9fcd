import { randomBytes } from 'node:crypto'
import { ClientCredentialsProvider, PrivateKeyJwtProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js'
import { type AuthResult, auth, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js'
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js'
import type { McpServerConfig } from './config.js'
import { createMcpOAuthStore, type McpOAuthRecord, type McpOAuthStore } from './oauth-store.js'

export type RemoteMcpServerConfig = Extract<McpServerConfig, { type: 'remote' }>

export interface McpOAuthOptions {
  /** where the sign-in state lives: `<dataDir>/mcp-oauth.json` */
  readonly dataDir: string
  /** Chronicle's loopback callback the authorization server sends the browser back to */
  readonly redirectUrl: string
}

/** Where a browser sign-in returns: Chronicle's loopback callback on its port (the server's, or `mcp login`'s). */
export function mcpOAuthRedirectUrl(port: number): string {
  return `http://127.0.0.1:${port}/mcp/oauth/callback`
}

/** Chronicle's callback when no other is configured: the default port's. */
export const DEFAULT_OAUTH_REDIRECT_URL = mcpOAuthRedirectUrl(4780)

export type McpOAuthErrorCode =
  | 'MCP_OAUTH_DISABLED'
  | 'MCP_OAUTH_NO_SIGN_IN'
  | 'MCP_OAUTH_STATE_MISMATCH'
  | 'MCP_OAUTH_EXCHANGE_FAILED'

/** A sign-in that cannot go on, with a stable code. */
export class McpOAuthError extends Error {
  override readonly name = 'McpOAuthError'
  constructor(
    readonly code: McpOAuthErrorCode,
    message: string,
  ) {
    super(message)
  }
}

/**
 * The SDK's OAuthClientProvider for one remote server, kept in the data
 * dir's sign-in file. The SDK does the protocol (discovery and its fallbacks,
 * registration or CIMD, PKCE, `resource`, scope selection and step-up,
 * refresh); this class only remembers, and records the authorization URL a
 * user must open: `pendingAuthorizationUrl()` is what the `needs-auth` state shows.
 */
export class StoredOAuthProvider implements OAuthClientProvider {
  private readonly store: McpOAuthStore
  private readonly settings: Exclude<RemoteMcpServerConfig['oauth'], false>
  /** a 403 insufficient_scope was answered: the SDK's next auth() is a step-up */
  private steppingUp = false

  constructor(
    private readonly config: RemoteMcpServerConfig,
    private readonly opts: McpOAuthOptions,
  ) {
    this.store = createMcpOAuthStore(opts.dataDir)
    this.settings = config.oauth === false ? undefined : config.oauth
  }

  get redirectUrl(): string {
    return this.opts.redirectUrl
  }

  get clientMetadataUrl(): string | undefined {
    return this.settings?.clientMetadataUrl
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'Chronicle',
      redirect_uris: [this.opts.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: this.settings?.clientSecret ? 'client_secret_basic' : 'none',
      ...(this.settings?.scope && { scope: this.settings.scope }),
    }
  }

  state(): string {
    const state = randomBytes(24).toString('base64url')
    this.update((r) => ({ ...r, pending: { authorizationUrl: '', state } }))
    return state
  }

  clientInformation(): OAuthClientInformationMixed | undefined {
    const stored = this.record().clientInformation
    const configured = this.settings?.clientId
    if (!configured) return stored
    // the configured client, once bound to its authorization server by the SDK, is read back with that binding
    if (stored?.client_id === configured) return stored
    return { client_id: configured, ...(this.settings?.clientSecret && { client_secret: this.settings.clientSecret }) }
  }

  saveClientInformation(clientInformation: OAuthClientInformationMixed): void {
    this.update((r) => ({ ...r, clientInformation }))
  }

  tokens(): OAuthTokens | undefined {
    const tokens = this.record().tokens
    if (!tokens || !this.steppingUp) return tokens
    // a refresh cannot widen the scopes (RFC 6749 §6), and the SDK would refresh rather than ask:
    // during a step-up the refresh token is held back, so the user is asked for the wider scope
    const { refresh_token: _, ...withoutRefresh } = tokens
    return withoutRefresh
  }

  /** the server answered 403 insufficient_scope: what follows must be a new authorization (see `tokens`) */
  beginStepUp(): void {
    this.steppingUp = true
  }

  saveTokens(tokens: OAuthTokens): void {
    this.steppingUp = false
    const { pending: _, ...rest } = this.record()
    this.update(() => ({ ...rest, tokens }))
  }

  redirectToAuthorization(authorizationUrl: URL): void {
    this.steppingUp = false
    this.update((r) => ({
      ...r,
      pending: { state: r.pending?.state ?? '', ...r.pending, authorizationUrl: authorizationUrl.href },
    }))
  }

  saveCodeVerifier(codeVerifier: string): void {
    this.update((r) => ({ ...r, pending: { authorizationUrl: '', state: '', ...r.pending, codeVerifier } }))
  }

  codeVerifier(): string {
    const verifier = this.record().pending?.codeVerifier
    if (!verifier) throw new McpOAuthError('MCP_OAUTH_NO_SIGN_IN', `no sign-in to "${this.config.name}" is in progress`)
    return verifier
  }

  invalidateCredentials(scope: 'all' | 'client' | 'tokens' | 'verifier' | 'discovery'): void {
    this.update((r) => {
      const { clientInformation, tokens, discoveryState, pending } = r
      return {
        url: r.url,
        ...(scope !== 'all' && scope !== 'client' && clientInformation && { clientInformation }),
        ...(scope !== 'all' && scope !== 'tokens' && tokens && { tokens }),
        ...(scope !== 'all' && scope !== 'discovery' && discoveryState && { discoveryState }),
        ...(scope !== 'all' && scope !== 'verifier' && pending && { pending }),
      }
    })
  }

  discoveryState(): McpOAuthRecord['discoveryState'] {
    return this.record().discoveryState
  }

  saveDiscoveryState(discoveryState: NonNullable<McpOAuthRecord['discoveryState']>): void {
    this.update((r) => ({ ...r, discoveryState }))
  }

  /** the URL the user must open to finish signing in, when a sign-in is waiting for them */
  pendingAuthorizationUrl(): string | undefined {
    return this.record().pending?.authorizationUrl || undefined
  }

  /** the `state` the waiting sign-in was issued with: a callback carrying another is not ours */
  pendingState(): string | undefined {
    return this.record().pending?.state || undefined
  }

  private record(): McpOAuthRecord {
    return this.store.get(this.config.name, this.config.url)
  }

  private update(change: (r: McpOAuthRecord) => McpOAuthRecord): void {
    this.store.update(this.config.name, this.config.url, change)
  }
}

/**
 * The auth provider a remote server's transport gets: none when sign-in is
 * turned off (or there is no data dir to keep it in), the SDK's machine-client
 * providers for `client_credentials`, else the stored browser sign-in.
 */
export function createMcpAuthProvider(
  config: RemoteMcpServerConfig,
  opts: Partial<McpOAuthOptions>,
): OAuthClientProvider | undefined {
  if (config.oauth === false) return undefined
  const o = config.oauth
  if (o?.grant === 'client_credentials' && o.clientId) {
    if (o.privateKey)
      return new PrivateKeyJwtProvider({
        clientId: o.clientId,
        privateKey: o.privateKey,
        algorithm: o.signingAlgorithm ?? 'ES256',
        ...(o.scope && { scope: o.scope }),
      })
    return new ClientCredentialsProvider({
      clientId: o.clientId,
      clientSecret: o.clientSecret ?? '',
      ...(o.scope && { scope: o.scope }),
    })
  }
  if (!opts.dataDir) return undefined
  return new StoredOAuthProvider(config, {
    dataDir: opts.dataDir,
    redirectUrl: opts.redirectUrl ?? DEFAULT_OAUTH_REDIRECT_URL,
  })
}

/**
 * Completes a browser sign-in: what Chronicle's callback does with the `code`
 * and `state` the authorization server sent back. The state must be the one
 * this sign-in was issued with (a forged callback is refused), then the SDK
 * exchanges the code (with the stored PKCE verifier) for tokens, which are
 * stored; the next connection uses them.
 */
export async function finishMcpSignIn(
  config: RemoteMcpServerConfig,
  opts: McpOAuthOptions,
  callback: { readonly code: string; readonly state: string | null },
): Promise<AuthResult> {
  if (config.oauth === false)
    throw new McpOAuthError('MCP_OAUTH_DISABLED', `sign-in to "${config.name}" is turned off (oauth: false)`)
  const provider = new StoredOAuthProvider(config, opts)
  const expected = provider.pendingState()
  if (!provider.pendingAuthorizationUrl() || !expected)
    throw new McpOAuthError('MCP_OAUTH_NO_SIGN_IN', `no sign-in to "${config.name}" is in progress`)
  if (callback.state !== expected)
    throw new McpOAuthError(
      'MCP_OAUTH_STATE_MISMATCH',
      `the sign-in callback for "${config.name}" carries another state`,
    )
  // the server's configured headers are not sent: they are for the MCP server, not its authorization server
  return auth(provider, { serverUrl: config.url, authorizationCode: callback.code })
}
