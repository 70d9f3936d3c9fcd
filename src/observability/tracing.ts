import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base'
import type { EventLog } from '../events/log.js'
import { CommitSpans } from './commit-spans.js'

/**
 * Traces over OTLP/HTTP (JSON) to the endpoint the user's config or
 * OTEL_EXPORTER_OTLP_ENDPOINT names (docs/OBSERVABILITY.md "Traces"); with
 * none, nothing is built and nothing listens to the commits. Spans leave in
 * batches, off the commit path; a collector that is down costs dropped
 * spans, never a run.
 */

export interface Tracing {
  /** ends the open spans and sends what is queued */
  close(): Promise<void>
}

export interface TracingOptions {
  /** OTLP base endpoint (`/v1/traces` is added) or the full traces URL */
  readonly endpoint: string
  readonly version: string
  /** the longest a finished span waits to be sent; default 5 s */
  readonly delayMs?: number
}

export function startTracing(log: Pick<EventLog, 'onCommit'>, options: TracingOptions): Tracing {
  const exporter = new OTLPTraceExporter({ url: tracesUrl(options.endpoint) })
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'chronicle', 'service.version': options.version }),
    spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: options.delayMs ?? 5000 })],
  })
  const spans = new CommitSpans(provider.getTracer('chronicle', options.version))
  const stopListening = log.onCommit(spans.observe)
  return {
    async close() {
      stopListening()
      spans.close()
      await provider.shutdown()
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
