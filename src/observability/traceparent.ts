import { type SpanContext, TraceFlags } from '@opentelemetry/api'

/**
 * The W3C Trace Context `traceparent` value (`00-<trace id>-<span id>-<flags>`):
 * what a client may send on a request to make Chronicle's span its child, and
 * what an event caused by a traced request records in its meta
 * (docs/OBSERVABILITY.md "Traces"). Both come from outside the trace exporter's
 * reach — a header, a log that may have been imported — so a value that is not
 * exactly this shape, or names the all-zero ids, is no context at all —
 * stricter than @opentelemetry/core's parser, which takes surrounding spaces
 * and later versions with more fields.
 */

export interface TraceContext {
  readonly traceId: string
  readonly spanId: string
  readonly sampled: boolean
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/
const ZERO_TRACE = '0'.repeat(32)
const ZERO_SPAN = '0'.repeat(16)

export function parseTraceparent(value: unknown): TraceContext | undefined {
  if (typeof value !== 'string' || value.length !== 55) return undefined
  const m = TRACEPARENT.exec(value)
  if (!m) return undefined
  const [, traceId, spanId, flags] = m as unknown as [string, string, string, string]
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined
  return { traceId, spanId, sampled: (Number.parseInt(flags, 16) & 1) === 1 }
}

export function formatTraceparent(context: TraceContext): string {
  return `00-${context.traceId}-${context.spanId}-${context.sampled ? '01' : '00'}`
}

/** The span a valid traceparent names, as OpenTelemetry's API has it: a parent or a link from outside this process. */
export function remoteSpanContext(value: unknown): SpanContext | undefined {
  const context = parseTraceparent(value)
  return (
    context && {
      traceId: context.traceId,
      spanId: context.spanId,
      traceFlags: context.sampled ? TraceFlags.SAMPLED : TraceFlags.NONE,
      isRemote: true,
    }
  )
}
