import type { FastifyRequest } from 'fastify'
import { ChronicleError } from '../events/errors.js'
import type { Caller } from './api.js'
import type { Principal } from './principals.js'

/**
 * The principal of a request, set by the security hook once its token is
 * checked (src/http/security.ts) and read by every route.
 */
const principals = new WeakMap<object, Principal>()

export function setPrincipal(req: FastifyRequest, principal: Principal): void {
  principals.set(req.raw, principal)
}

export function principalOf(req: FastifyRequest): Principal {
  const principal = principals.get(req.raw)
  if (!principal) throw new ChronicleError('UNAUTHORIZED', 'a token is required')
  return principal
}

/** An HTTP call: its principal, and the client's command id (`X-Command-Id`) or the request's id. */
export function callerOf(req: FastifyRequest): Caller {
  const given = req.headers['x-command-id']
  const commandId = typeof given === 'string' && given.length > 0 && given.length <= 200 ? given : req.id
  return { principal: principalOf(req), commandId }
}
