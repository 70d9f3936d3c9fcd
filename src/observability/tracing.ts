import { ROOT_CONTEXT, SpanKind, SpanStatusCode, type Tracer, TraceFlags, trace } from '@opentelemetry/api'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base'
import type { EventLog } from '../events/log.js'
import { CommitSpans } from './commit-spans.js'
import type { InboundSpan, InboundTracing, TraceFields } from './inbound.js'
import { formatTraceparent, remoteSpanContext } from './traceparent.js'

/**
 * Traces over OTLP/HTTP (JSON) to the endpoint the user's config or
 * OTEL_EXPORTER_OTLP_ENDPOINT names (docs/OBSERVABILITY.md "Traces"); with
 * none, nothing is built and nothing listens to the commits. Spans leave in
 * batches, off the commit path; a collector that is down costs dropped
 * spans, never a run.
 */

export interface Tracing {
  /** spans of requests and socket calls, for the HTTP layer */
  readonly inbound: InboundTracing
  /** the trace and span of a session's open run, for the log lines written about it */
  fieldsOf(sessionId: string): TraceFields | undefined
  /** ends the open spans and sends what is queued */
  close(): Promise<void>
}

export interface TracingOptions {
  /** OTLP base endpoint (`/v1/traces` is added) or the full traces URL */
  readonly endpoint: string
  readonly version: string
  /** whether spans carry the prompt, output and tool text (each attribute cut at 16 KiB) */
  readonly content?: boolean
  /** the longest a finished span waits to be sent; default 5 s */
  readonly delayMs?: number
}

/** the longest string attribute a span carries (the SDK cuts longer ones): a tool's output may be megabytes */
const CONTENT_LIMIT = 16 * 1024

export function startTracing(log: Pick<EventLog, 'onCommit'>, options: TracingOptions): Tracing {
  const exporter = new OTLPTraceExporter({ url: tracesUrl(options.endpoint) })
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'chronicle', 'service.version': options.version }),
    spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: options.delayMs ?? 5000 })],
    spanLimits: { attributeValueLengthLimit: CONTENT_LIMIT },
  })
  const tracer = provider.getTracer('chronicle', options.version)
  const spans = new CommitSpans(tracer, { content: options.content === true })
  // this server's own runs: on a cluster, another node's are that node's spans (docs/CLUSTER.md)
  const stopListening = log.onCommit((events, elsewhere) => {
    if (!elsewhere) spans.observe(events)
  })
  return {
    inbound: inboundTracing(tracer),
    fieldsOf: (sessionId) => spans.fieldsOf(sessionId),
    async close() {
      stopListening()
      spans.close()
      await provider.shutdown()
    },
  }
}

function inboundTracing(tracer: Tracer): InboundTracing {
  return {
    start(name, attributes, parent): InboundSpan {
      const remote = remoteSpanContext(parent)
      const context = remote ? trace.setSpanContext(ROOT_CONTEXT, remote) : ROOT_CONTEXT
      const span = tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, context)
      const { traceId, spanId, traceFlags } = span.spanContext()
      return {
        traceparent: formatTraceparent({ traceId, spanId, sampled: (traceFlags & TraceFlags.SAMPLED) !== 0 }),
        traceId,
        spanId,
        rename: (next) => void span.updateName(next),
        setAttributes: (more) => void span.setAttributes(more),
        end(error) {
          if (error) {
            span.setAttribute('error.type', error)
            span.setStatus({ code: SpanStatusCode.ERROR })
          }
          span.end()
        },
      }
    },
  }
}

/** The base endpoint's traces path, as the OTLP exporter specification has it for OTEL_EXPORTER_OTLP_ENDPOINT. */
export function tracesUrl(endpoint: string): string {
  const url = new URL(endpoint)
  if (url.pathname.endsWith('/v1/traces')) return url.href
  url.pathname = `${url.pathname.replace(/\/$/, '')}/v1/traces`
  return url.href
}
