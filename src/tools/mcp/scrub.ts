import { isSecretName, type Redactor } from '../redact.js'
import type { McpServerConfig } from './config.js'

/**
 * An MCP server's error text made fit for the log. The text comes from the
 * server or its transport — a hostile or careless server can echo the
 * request back — so besides the server's known secrets (the redactor's),
 * every header value configured for it, its credential-named environment
 * variables, its OAuth client secret, bearer
 * credentials, credential-looking `name: value` pairs and URL query strings
 * and user-info are replaced.
 */

export const MAX_ERROR = 2000
/** shorter configured values would match ordinary words */
const MIN_VALUE = 4

const BEARER = /\b(bearer|basic)\s+[^\s"',;]+/gi
const CREDENTIAL_PAIR =
  /\b(authorization|proxy-authorization|cookie|set-cookie|x-api-key|api[-_]?key|access[-_]?token|refresh[-_]?token|client[-_]?secret|password|token)(["']?\s*[:=]\s*["']?)(?!\[redacted)(?:(?:bearer|basic)\s+)?[^\s"',;&]+/gi
const URL_QUERY = /\b([a-z][a-z0-9+.-]*:\/\/[^\s?#"']+)\?[^\s#"']*/gi
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/@"']+@/gi

/** The values configured for one server that must never be logged. */
export function configuredSecrets(config: McpServerConfig): string[] {
  const values =
    config.type === 'remote'
      ? [...Object.values(config.headers), ...(config.oauth ? [config.oauth.clientSecret ?? ''] : [])]
      : Object.entries(config.environment).flatMap(([name, value]) => (isSecretName(name) ? [value] : []))
  return values.filter((v) => v.length >= MIN_VALUE).sort((a, b) => b.length - a.length)
}

export function scrubMcpError(text: string, secrets: readonly string[], redactor: Redactor): string {
  let out = redactor.text(text)
  for (const value of secrets) out = out.split(value).join('[redacted]')
  out = out
    .replace(CREDENTIAL_PAIR, '$1$2[redacted]')
    .replace(BEARER, '$1 [redacted]')
    .replace(URL_USERINFO, '$1[redacted]@')
    .replace(URL_QUERY, '$1?[redacted]')
  return out.length > MAX_ERROR ? `${out.slice(0, MAX_ERROR - 1)}…` : out
}
