import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify'
import type { Bindings, ChildLoggerOptions } from 'pino'
import type { InboundSpan, InboundTracing } from '../observability/inbound.js'

/**
 * A server span per HTTP request when traces are on (docs/OBSERVABILITY.md
 * "Traces"): started where fastify makes the request's logger, so every line
 * logged for the request carries its `trace_id` and `span_id`; named by its
 * route, not its URL, when it ends (paths carry ids, and a query may carry
 * the token as `?token=`). A client's `traceparent` header makes it that trace's child.
 * Health probes and socket upgrades get none: a socket's calls are spans of
 * their own (src/http/ws/connection.ts).
 */

const spans = new WeakMap<object, InboundSpan>()

export function requestSpanOf(req: FastifyRequest): InboundSpan | undefined {
  return spans.get(req.raw)
}

type RawRequest = FastifyRequest['raw']

/** fastify's `childLoggerFactory` with traces on. */
export function tracedRequestLogger(tracing: InboundTracing) {
  return function childLogger(
    logger: FastifyBaseLogger,
    bindings: Bindings,
    options: ChildLoggerOptions,
    raw: RawRequest,
  ): FastifyBaseLogger {
    const url = raw.url ?? '/'
    if (raw.headers.upgrade !== undefined || url === '/health' || url.startsWith('/health?'))
      return logger.child(bindings, options)
    const method = raw.method ?? 'GET'
    const span = tracing.start(method, { 'http.request.method': method }, raw.headers.traceparent)
    spans.set(raw, span)
    return logger.child({ ...bindings, trace_id: span.traceId, span_id: span.spanId }, options)
  }
}

/** Ends a request's span (fastify's `onResponse`, and `onRequestAbort` with no reply). */
export function endRequestSpan(req: FastifyRequest, reply?: FastifyReply): void {
  const span = spans.get(req.raw)
  if (!span) return
  spans.delete(req.raw)
  const route = req.routeOptions.url
  if (route !== undefined) {
    span.rename(`${req.method} ${route}`)
    span.setAttributes({ 'http.route': route })
    const session = (req.params as { id?: unknown } | undefined)?.id
    if (route.startsWith('/sessions/:id') && typeof session === 'string')
      span.setAttributes({ 'chronicle.session.id': session })
  }
  if (!reply) return span.end('aborted')
  span.setAttributes({ 'http.response.status_code': reply.statusCode })
  span.end(reply.statusCode >= 500 ? String(reply.statusCode) : undefined)
}
