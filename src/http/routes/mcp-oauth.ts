import type { FastifyReply, FastifyRequest } from 'fastify'
import { ChronicleError } from '../../events/errors.js'
import { McpOAuthError } from '../../tools/mcp/oauth.js'
import type { McpSignInCallback } from '../../tools/mcp/oauth-callback.js'
import type { App } from '../app.js'

/**
 * The OAuth callback of remote MCP servers' sign-ins (docs/TOOLS.md
 * "Signing in to remote MCP servers"): the authorization server sends the
 * user's browser here with `code` and `state`. No Chronicle credential (a
 * browser brings it: src/http/security.ts PUBLIC_ROUTES): the `state` a
 * waiting sign-in was issued with is the proof. It answers the browser a
 * line of text, so it is left out of the OpenAPI document, like the page.
 */
export function mcpOAuthRoutes(app: App, signIn: McpSignInCallback): void {
  app.get('/mcp/oauth/callback', { schema: { hide: true } }, async (req: FastifyRequest, reply: FastifyReply) => {
    const query = req.query as Record<string, unknown>
    const text = (name: string) => (typeof query[name] === 'string' ? (query[name] as string).slice(0, 500) : undefined)
    const [code, state, error] = [text('code'), text('state'), text('error')]
    if (error) throw new ChronicleError('BAD_REQUEST', `the authorization server refused the sign-in: ${error}`)
    if (!code || !state) throw new ChronicleError('BAD_REQUEST', 'a sign-in callback needs code and state')
    try {
      const { server } = await signIn({ code, state })
      return reply
        .type('text/plain; charset=utf-8')
        .header('cache-control', 'no-store')
        .send(`Signed in to ${server}: you can close this tab and go back to Chronicle.`)
    } catch (err) {
      if (err instanceof McpOAuthError) throw new ChronicleError('BAD_REQUEST', `${err.code}: ${err.message}`)
      throw err
    }
  })
}
