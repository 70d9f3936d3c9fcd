import { z } from 'zod'
import { ChronicleError, ERROR_STATUS, type ErrorCode } from '../events/errors.js'

/**
 * The ONE place where anything thrown becomes a client-facing error: HTTP
 * answers it as problem+json (RFC 9457), WebSocket replies carry the same
 * `{code, message, details}`. Unknown errors become INTERNAL and leak nothing.
 */

export interface ErrorBody {
  readonly code: ErrorCode
  readonly message: string
  readonly details?: Record<string, unknown>
}

export interface Problem extends ErrorBody {
  readonly status: number
  /** true when the cause was unexpected (a bug): log it */
  readonly internal: boolean
}

interface FastifyLikeError {
  code?: string
  statusCode?: number
  message?: string
  validation?: { instancePath?: string; message?: string; params?: Record<string, unknown> }[]
  validationContext?: string
}

const FASTIFY_CODES: Record<string, { code: ErrorCode; status?: number }> = {
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'PAYLOAD_TOO_LARGE' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { code: 'BAD_REQUEST', status: 415 },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: 'BAD_REQUEST' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { code: 'BAD_REQUEST' },
  FST_ERR_CTP_INVALID_JSON_BODY: { code: 'BAD_REQUEST' },
  FST_ERR_VALIDATION: { code: 'BAD_REQUEST' },
}

export function toProblem(err: unknown): Problem {
  if (err instanceof ChronicleError) {
    if (err.code === 'INTERNAL' || err.code === 'CORRUPT_EVENT') {
      return { code: err.code, message: err.message, status: err.status, internal: true }
    }
    return {
      code: err.code,
      message: err.message,
      status: err.status,
      internal: false,
      ...(err.details && { details: err.details }),
    }
  }
  if (err instanceof z.ZodError)
    return badRequest(err.issues.map((i) => ({ path: pathOf(i.path), message: i.message })))
  const f = (err ?? {}) as FastifyLikeError
  if (Array.isArray(f.validation)) {
    const where = f.validationContext ?? 'body'
    return badRequest(
      f.validation.map((v) => ({
        path: [where, ...(v.instancePath ?? '').split('/').filter(Boolean)].join('.'),
        message: v.message ?? 'invalid',
      })),
    )
  }
  const known = f.code ? FASTIFY_CODES[f.code] : undefined
  if (known) {
    return {
      code: known.code,
      message: f.message ?? known.code,
      status: known.status ?? ERROR_STATUS[known.code],
      internal: false,
    }
  }
  if (typeof f.statusCode === 'number' && f.statusCode >= 400 && f.statusCode < 500) {
    return { code: 'BAD_REQUEST', message: f.message ?? 'bad request', status: f.statusCode, internal: false }
  }
  return { code: 'INTERNAL', message: 'internal error', status: 500, internal: true }
}

export function badRequest(issues: { path: string; message: string }[]): Problem {
  const message = `invalid request: ${issues.map((i) => `${i.path || '(root)'}: ${i.message}`).join('; ')}`
  return { code: 'BAD_REQUEST', message, status: 400, internal: false, details: { issues } }
}

function pathOf(path: readonly PropertyKey[]): string {
  return path.map(String).join('.')
}

/** The problem+json body (an internal error is INTERNAL, with no detail, as on WebSocket). */
export function problemBody(p: Problem, instance?: string): Record<string, unknown> {
  const code = p.internal ? 'INTERNAL' : p.code
  return {
    type: `https://chronicle.dev/errors/${code.toLowerCase().replaceAll('_', '-')}`,
    title: code,
    status: p.internal ? 500 : p.status,
    code,
    detail: p.internal ? 'internal error' : p.message,
    ...(instance && { instance }),
    ...(!p.internal && p.details && { details: p.details }),
  }
}

/** The `error` member of a WebSocket reply. */
export function errorBody(p: Problem): ErrorBody {
  return p.internal
    ? { code: 'INTERNAL', message: 'internal error' }
    : { code: p.code, message: p.message, ...(p.details && { details: p.details }) }
}
