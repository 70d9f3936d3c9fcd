import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyCorsOptions } from '@fastify/cors'
import type { FastifyRequest } from 'fastify'
import { ChronicleError } from '../events/errors.js'
import { isLoopback } from '../config.js'
import { OWNER, type Principal } from './principals.js'

/**
 * The checks every request passes before any handler (and before a
 * WebSocket upgrade): Host (DNS rebinding), Origin (cross-site pages) and
 * the bearer token. Done in an onRequest hook — it works for real sockets
 * and for injectWS alike (verifyClient hangs injectWS). The one exception is
 * a CORS preflight from an origin in `allowedOrigins` (corsOptions).
 */

export const TOKEN_PROTOCOL_PREFIX = 'chronicle.token.'
export const PROTOCOL = 'chronicle.v1'

export interface SecurityPolicy {
  readonly token: string
  readonly allowedHosts: readonly string[]
  readonly allowedOrigins: readonly string[]
  /** who a presented token speaks for (src/http/principals.ts); without it, only `token` is accepted */
  readonly authenticate?: (presented: string) => Principal | undefined
}

/** Paths that need no token. */
const PUBLIC = new Set(['/health'])

/** The request's principal, or undefined for a public path; throws FORBIDDEN / UNAUTHORIZED. */
export function checkRequest(req: FastifyRequest, policy: SecurityPolicy): Principal | undefined {
  if (!hostServed(req, policy)) throw new ChronicleError('FORBIDDEN', 'this Host is not served here')
  const origin = req.headers.origin
  if (origin !== undefined && !originAllowed(origin, req.headers.host as string, policy)) {
    throw new ChronicleError('FORBIDDEN', 'cross-origin requests are not allowed')
  }
  const path = req.url.split('?')[0] ?? ''
  if (PUBLIC.has(path)) return undefined
  const presented = presentedToken(req)
  if (presented === undefined) throw new ChronicleError('UNAUTHORIZED', 'a token is required')
  const principal = policy.authenticate
    ? policy.authenticate(presented)
    : same(presented, policy.token)
      ? OWNER
      : undefined
  if (!principal) throw new ChronicleError('UNAUTHORIZED', 'wrong, revoked or expired token')
  return principal
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
        methods: ['GET', 'POST', 'DELETE'], // the routes' (src/http/routes/*)
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
