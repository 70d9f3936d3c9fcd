import type { FastifyRequest } from 'fastify'
import { ChronicleError } from '../events/errors.js'
import type { Caller } from './api.js'
import type { Principal } from './principals.js'
import { requestSpanOf } from './request-spans.js'
import type { Authenticated, Credential } from './security.js'

/**
 * The principal of a request, and how it proved it (a token or the web
 * session cookie), set by the security hook once checked
 * (src/http/security.ts) and read by every route.
 */
const authenticated = new WeakMap<object, Authenticated>()

export function setAuthenticated(req: FastifyRequest, auth: Authenticated): void {
  authenticated.set(req.raw, auth)
}

export function principalOf(req: FastifyRequest): Principal {
  return authenticatedOf(req).principal
}

export function credentialOf(req: FastifyRequest): Credential {
  return authenticatedOf(req).credential
}

function authenticatedOf(req: FastifyRequest): Authenticated {
  const auth = authenticated.get(req.raw)
  if (!auth) throw new ChronicleError('UNAUTHORIZED', 'a token is required')
  return auth
}

/**
 * An HTTP call: its principal, the client's command id (`X-Command-Id`) or the request's id, and the
 * request's span when traces are on.
 */
export function callerOf(req: FastifyRequest): Caller {
  const given = req.headers['x-command-id']
  const commandId = typeof given === 'string' && given.length > 0 && given.length <= 200 ? given : req.id
  const span = requestSpanOf(req)
  return { principal: principalOf(req), commandId, ...(span && { trace: span.traceparent }) }
}
