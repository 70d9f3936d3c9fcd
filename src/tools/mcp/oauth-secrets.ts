import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js'
import type { OAuthClientInformationMixed, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js'
import type { Secret } from '../redact.js'

/**
 * The provider, telling `learn` every credential it hands out or is given:
 * access and refresh tokens, a registered client's secret. They live only in
 * the data dir's sign-in file, but a hostile server (or tool) can echo them
 * back, and nothing appended may hold one (docs/TOOLS.md "Signing in to
 * remote MCP servers"): the server's redactor learns them before they are used.
 */
export function reportingSecrets(
  provider: OAuthClientProvider,
  server: string,
  learn: (secrets: readonly Secret[]) => void,
): OAuthClientProvider {
  const tokens = (t: OAuthTokens | undefined) => {
    if (!t) return
    learn([
      { name: `${server} access token`, value: t.access_token },
      ...(t.refresh_token ? [{ name: `${server} refresh token`, value: t.refresh_token }] : []),
    ])
  }
  const client = (c: OAuthClientInformationMixed | undefined) => {
    if (c?.client_secret) learn([{ name: `${server} client secret`, value: c.client_secret }])
  }
  const seen = <T>(report: (value: T) => void, value: T | Promise<T>): T | Promise<T> => {
    if (value instanceof Promise) return value.then((v) => (report(v), v))
    report(value)
    return value
  }
  // A proxy keeps the provider's own class (remote-transport.ts asks `instanceof StoredOAuthProvider`).
  return new Proxy(provider, {
    get(target, prop, receiver) {
      const member = Reflect.get(target, prop, receiver)
      if (typeof member !== 'function') return member
      if (prop === 'tokens') return () => seen(tokens, member.call(target))
      if (prop === 'saveTokens') return (t: OAuthTokens) => (tokens(t), member.call(target, t))
      if (prop === 'clientInformation') return () => seen(client, member.call(target))
      if (prop === 'saveClientInformation')
        return (c: OAuthClientInformationMixed) => (client(c), member.call(target, c))
      return member.bind(target)
    },
  })
}
