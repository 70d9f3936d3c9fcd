import {
  extractWWWAuthenticateParams,
  type OAuthClientProvider,
  UnauthorizedError,
} from '@modelcontextprotocol/sdk/client/auth.js'
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js'
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js'
import type { Secret } from '../redact.js'
import { createMcpAuthProvider, type RemoteMcpServerConfig, StoredOAuthProvider } from './oauth.js'
import { reportingSecrets } from './oauth-secrets.js'

/**
 * The transports of one remote server, both signing in through the same
 * provider: Streamable HTTP first, legacy HTTP+SSE only when the first
 * attempt failed the way an SSE-only server fails it.
 */
export interface RemoteTransports {
  readonly authProvider?: OAuthClientProvider
  streamable(): StreamableHTTPClientTransport
  sse(): SSEClientTransport
}

export function remoteTransports(
  config: RemoteMcpServerConfig,
  opts: {
    readonly dataDir?: string
    readonly oauthRedirectUrl?: string
    readonly learnSecrets?: (secrets: readonly Secret[]) => void
  },
): RemoteTransports {
  const url = new URL(config.url)
  const provider = createMcpAuthProvider(config, {
    ...(opts.dataDir && { dataDir: opts.dataDir }),
    ...(opts.oauthRedirectUrl && { redirectUrl: opts.oauthRedirectUrl }),
  })
  const authProvider =
    provider && opts.learnSecrets ? reportingSecrets(provider, config.name, opts.learnSecrets) : provider
  const options = () => ({
    requestInit: { headers: { ...config.headers } },
    ...(authProvider && { authProvider }),
    ...(authProvider instanceof StoredOAuthProvider && { fetch: watchingForStepUp(authProvider) }),
  })
  return {
    ...(authProvider && { authProvider }),
    streamable: () => new StreamableHTTPClientTransport(url, options()),
    sse: () => new SSEClientTransport(url, options()),
  }
}

/** fetch, telling the provider when the server asks for more scopes (403 insufficient_scope) */
function watchingForStepUp(provider: StoredOAuthProvider): FetchLike {
  return async (url, init) => {
    const response = await fetch(url, init)
    if (response.status === 403 && extractWWWAuthenticateParams(response).error === 'insufficient_scope')
      provider.beginStepUp()
    return response
  }
}

/**
 * The spec's backwards-compatibility rule: a client falls back to HTTP+SSE
 * when its initialize POST gets a 4xx (an old server has no such endpoint or
 * method). 401 and 403 are the server speaking Streamable HTTP and asking for
 * a sign-in: falling back would hide them behind an SSE error.
 */
export function fallsBackToSse(err: unknown): boolean {
  if (!(err instanceof StreamableHTTPError) || err.code === undefined) return false
  return err.code >= 400 && err.code < 500 && err.code !== 401 && err.code !== 403
}

/** An error as a status line: an HTTP failure names its status code. */
export function describeRemoteError(err: unknown): string {
  if (err instanceof StreamableHTTPError && err.code !== undefined) return `HTTP ${err.code}: ${err.message}`
  if (err instanceof UnauthorizedError)
    return `HTTP 401: the server refused the credentials (${err.message || 'unauthorized'})`
  const { message, cause } = err as Error
  // undici's bare "fetch failed" says nothing: the cause says refused, reset, unknown host…
  return cause instanceof Error ? `${message} (${cause.message})` : message
}

/** When the failure is a browser sign-in the user has yet to do: the URL to open. */
export function signInUrl(provider: OAuthClientProvider | undefined, err: unknown): string | undefined {
  if (!(err instanceof UnauthorizedError) || !(provider instanceof StoredOAuthProvider)) return undefined
  return provider.pendingAuthorizationUrl()
}
