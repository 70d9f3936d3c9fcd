import { timingSafeEqual } from 'node:crypto'
import type { McpServerConfig } from './config.js'
import { finishMcpSignIn, McpOAuthError, type RemoteMcpServerConfig, StoredOAuthProvider } from './oauth.js'

/** What the browser brings back to Chronicle's callback. */
export interface McpSignInCallbackRequest {
  readonly code: string
  readonly state: string
}

/** Completes the sign-in a callback belongs to; resolves with the server's name once it is connected again. */
export type McpSignInCallback = (callback: McpSignInCallbackRequest) => Promise<{ readonly server: string }>

export interface McpSignInCallbackDeps {
  readonly servers: readonly McpServerConfig[]
  readonly dataDir: string
  readonly redirectUrl: string
  /** the server is signed in: connect it again now (the manager's `reconnect`) */
  readonly signedIn: (server: string) => Promise<void>
}

/**
 * The callback served by Chronicle's HTTP server (GET /mcp/oauth/callback).
 * It needs no Chronicle token, since a browser brings it: the `state` is the
 * proof, and must be the one a waiting sign-in was issued with. A callback
 * matching none is refused, and nothing is exchanged.
 */
export function createMcpSignInCallback(deps: McpSignInCallbackDeps): McpSignInCallback {
  const oauth = { dataDir: deps.dataDir, redirectUrl: deps.redirectUrl }
  return async ({ code, state }) => {
    const server = deps.servers.find(
      (s): s is RemoteMcpServerConfig =>
        s.type === 'remote' && s.oauth !== false && sameState(new StoredOAuthProvider(s, oauth).pendingState(), state),
    )
    if (!server) throw new McpOAuthError('MCP_OAUTH_NO_SIGN_IN', 'no sign-in is waiting for this callback')
    await finishMcpSignIn(server, oauth, { code, state }).catch((err: unknown) => {
      // the authorization server refused the code (used, expired, another client's): the user's matter, not a bug
      throw err instanceof McpOAuthError ? err : new McpOAuthError('MCP_OAUTH_EXCHANGE_FAILED', (err as Error).message)
    })
    await deps.signedIn(server.name)
    return { server: server.name }
  }
}

function sameState(expected: string | undefined, presented: string): boolean {
  if (!expected) return false
  const a = Buffer.from(expected)
  const b = Buffer.from(presented)
  return a.length === b.length && timingSafeEqual(a, b)
}
