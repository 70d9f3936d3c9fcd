import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyCorsOptions } from '@fastify/cors'
import type { FastifyRequest } from 'fastify'
import { ChronicleError } from '../events/errors.js'
import { isLoopback } from '../config.js'
import { OWNER, type Principal } from './principals.js'

/**
 * The checks every request passes before any handler (and before a
 * WebSocket upgrade): Host (DNS rebinding), Origin (cross-site pages) and
 * the credential — a bearer token, or the web page's session cookie. Done
 * in an onRequest hook (routing is done by then; body parsing is not) — it
 * works for real sockets and for injectWS alike (verifyClient hangs
 * injectWS). The one exception is a CORS preflight from an origin in
 * `allowedOrigins` (corsOptions).
 */

export const TOKEN_PROTOCOL_PREFIX = 'chronicle.token.'
export const PROTOCOL = 'chronicle.v1'
/** The web page's session cookie (src/http/web-sessions.ts, docs/API.md "Web page"). */
export const SESSION_COOKIE = 'chronicle_session'

export interface SecurityPolicy {
  readonly token: string
  readonly allowedHosts: readonly string[]
  readonly allowedOrigins: readonly string[]
  /** who a presented token speaks for (src/http/principals.ts); without it, only `token` is accepted */
  readonly authenticate?: (presented: string) => Principal | undefined
  /** who a session cookie's secret speaks for, and which web session it is; without it, cookies are ignored */
  readonly webSession?: (secret: string) => { principal: Principal; session: string } | undefined
}

/**
 * The routes that need no credential, as registered (`METHOD url`; a HEAD
 * as its GET): health, and the web page with its login — the page must load
 * for a person to log in. Decided by the route the router found, so no
 * spelling of a path (`/assets/../sessions`, `%2e%2e`) makes another route
 * public. Host and Origin are checked on these too.
 */
export const PUBLIC_ROUTES: ReadonlySet<string> = new Set([
  'GET /health',
  'GET /',
  'GET /login',
  'GET /assets/*',
  'POST /login',
  // a browser back from an MCP server's sign-in: the OAuth `state` is the proof (routes/mcp-oauth.ts)
  'GET /mcp/oauth/callback',
])

/** How a request proved who it is: a bearer token (header, subprotocol, upgrade query) or a web session cookie. */
export type Credential = { readonly via: 'token' } | { readonly via: 'cookie'; readonly session: string }

export interface Authenticated {
  readonly principal: Principal
  readonly credential: Credential
}

/** The request's principal and credential, or undefined for a public route; throws FORBIDDEN / UNAUTHORIZED. */
export function checkRequest(req: FastifyRequest, policy: SecurityPolicy): Authenticated | undefined {
  if (!hostServed(req, policy)) throw new ChronicleError('FORBIDDEN', 'this Host is not served here')
  const origin = req.headers.origin
  if (origin !== undefined && !originAllowed(origin, req.headers.host as string, policy)) {
    throw new ChronicleError('FORBIDDEN', 'cross-origin requests are not allowed')
  }
  if (isPublic(req)) return undefined
  // A token, when one is presented, decides alone: a wrong one is refused even beside a good cookie.
  const presented = presentedToken(req)
  if (presented !== undefined) {
    const principal = policy.authenticate
      ? policy.authenticate(presented)
      : same(presented, policy.token)
        ? OWNER
        : undefined
    if (!principal) throw new ChronicleError('UNAUTHORIZED', 'wrong, revoked or expired token')
    return { principal, credential: { via: 'token' } }
  }
  const secret = policy.webSession ? sessionCookie(req) : undefined
  if (secret === undefined || !policy.webSession) throw new ChronicleError('UNAUTHORIZED', 'a token is required')
  // A browser attaches a cookie to whatever request any page makes: one that can act (any method but GET and
  // HEAD) or open a socket must show it comes from the page — the Origin a browser sets, checked above.
  if (origin === undefined && (isUpgrade(req) || (req.method !== 'GET' && req.method !== 'HEAD')))
    throw new ChronicleError('FORBIDDEN', 'a request with the session cookie must come from the page (Origin)')
  const found = policy.webSession(secret)
  if (!found)
    throw new ChronicleError('UNAUTHORIZED', 'the web session has ended, or its token was revoked: log in again')
  return { principal: found.principal, credential: { via: 'cookie', session: found.session } }
}

function isPublic(req: FastifyRequest): boolean {
  const route = req.routeOptions.url
  return route !== undefined && PUBLIC_ROUTES.has(`${req.method === 'HEAD' ? 'GET' : req.method} ${route}`)
}

/** The session cookie's value, if the request carries one (the first, if several). */
export function sessionCookie(req: FastifyRequest): string | undefined {
  const header = req.headers.cookie
  if (!header) return undefined
  for (const pair of header.split(';')) {
    const eq = pair.indexOf('=')
    if (eq > 0 && pair.slice(0, eq).trim() === SESSION_COOKIE) return pair.slice(eq + 1).trim()
  }
  return undefined
}

/**
 * What every response carries (docs/SECURITY.md "The web page"): a strict
 * Content-Security-Policy — the page's own scripts, styles, images, fonts and
 * connections only, nothing inline, no framing, no base or foreign form
 * target — and no sniffing, no Referer, no framing, its own browsing group.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
}

/**
 * CORS (@fastify/cors, registered only when `allowedOrigins` is configured):
 * a response names in Access-Control-Allow-Origin the request's Origin when
 * it is listed in `allowedOrigins` and the Host is served; any other request
 * gets no CORS header. The plugin's hook runs before checkRequest's, so it
 * answers such an origin's preflight without the token (a browser sends none
 * on a preflight); every other request still passes checkRequest, where any
 * other foreign Origin is refused. Decided per request (the plugin's
 * delegator), as the answer depends on Origin and Host.
 */
export function corsOptions(policy: SecurityPolicy): FastifyCorsOptions {
  return {
    delegator: (req, done) =>
      done(null, {
        origin: corsOrigin(req, policy),
        methods: ['GET', 'POST', 'PATCH', 'DELETE'], // the routes' (src/http/routes/*)
        allowedHeaders: ['authorization', 'content-type', 'x-command-id'], // x-command-id: caller.ts
        maxAge: 600,
      }),
  }
}

function corsOrigin(req: FastifyRequest, policy: SecurityPolicy): string | false {
  const origin = req.headers.origin
  return origin !== undefined && policy.allowedOrigins.includes(origin) && hostServed(req, policy) ? origin : false
}

/**
 * The token from, in order: Authorization: Bearer, the `chronicle.token.<t>`
 * subprotocol, and — on a WebSocket upgrade only, where a browser can set no
 * header — `?token=`. Anywhere else a token in a URL would end up in
 * histories, logs and Referer headers, so it is not accepted.
 */
export function presentedToken(req: FastifyRequest): string | undefined {
  const auth = req.headers.authorization
  if (auth !== undefined) {
    const match = /^Bearer\s+(\S+)$/i.exec(auth)
    return match?.[1] ?? ''
  }
  const protocols = req.headers['sec-websocket-protocol']
  if (protocols !== undefined) {
    const entry = protocols
      .split(',')
      .map((p) => p.trim())
      .find((p) => p.startsWith(TOKEN_PROTOCOL_PREFIX))
    if (entry !== undefined) return entry.slice(TOKEN_PROTOCOL_PREFIX.length)
  }
  const query = req.url.indexOf('?')
  if (query >= 0 && isUpgrade(req)) {
    const token = new URLSearchParams(req.url.slice(query + 1)).get('token')
    if (token !== null) return token
  }
  return undefined
}

function isUpgrade(req: FastifyRequest): boolean {
  return req.method === 'GET' && req.headers.upgrade?.toLowerCase() === 'websocket'
}

function same(a: string, b: string): boolean {
  // Hashing first makes the comparison constant-time whatever the lengths.
  const ha = createHash('sha256').update(a).digest()
  const hb = createHash('sha256').update(b).digest()
  return timingSafeEqual(ha, hb)
}

/** Loopback, or a configured host (DNS rebinding). */
function hostServed(req: FastifyRequest, policy: SecurityPolicy): boolean {
  const host = hostnameOf(req.headers.host)
  return host !== undefined && (isLoopback(host) || policy.allowedHosts.includes(host))
}

function hostnameOf(host: string | undefined): string | undefined {
  if (!host) return undefined
  try {
    const url = new URL(`http://${host}`)
    if (url.username || url.password || url.pathname !== '/') return undefined
    return url.hostname.replace(/^\[|\]$/g, '').toLowerCase()
  } catch {
    return undefined
  }
}

/** Same origin as the Host we answer on (loopback or allowed), or explicitly allowed. */
function originAllowed(origin: string, host: string, policy: SecurityPolicy): boolean {
  if (policy.allowedOrigins.includes(origin)) return true
  let url: URL
  try {
    url = new URL(origin)
  } catch {
    return false // "null", file://, garbage
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return false
  if (url.username || url.password) return false
  return url.host.toLowerCase() === host.toLowerCase()
}

/** Answers the browser subprotocol handshake: `chronicle.v1` when offered. */
export function selectProtocol(protocols: Set<string>): string | false {
  return protocols.has(PROTOCOL) ? PROTOCOL : false
}

/** Replaces a `token` query parameter in a URL (for logs). */
export function redactUrl(url: string): string {
  return url.replace(/([?&]token=)[^&#]*/gi, '$1[REDACTED]')
}
