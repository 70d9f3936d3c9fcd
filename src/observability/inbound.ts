/**
 * Spans of what comes in — an HTTP request, a WebSocket method call — as the
 * HTTP layer sees them (docs/OBSERVABILITY.md "Traces"). The events a traced
 * call causes record its `traceparent` in their meta, and the run that
 * answers them links back to it. Types only: the OpenTelemetry SDK behind
 * them (src/observability/tracing.ts) is loaded only when traces are on.
 */

export type SpanAttributes = Record<string, string | number | boolean>

export interface InboundSpan {
  /** this span as a W3C traceparent: what the events it causes record */
  readonly traceparent: string
  readonly traceId: string
  readonly spanId: string
  rename(name: string): void
  setAttributes(attributes: SpanAttributes): void
  /** ends it; an error names what failed (a stable code, not a message from outside) */
  end(error?: string): void
}

export interface InboundTracing {
  /**
   * A server span. `parent` is the caller's `traceparent` header: a valid one makes this span its child, so a
   * client's trace continues into the server; anything else is ignored.
   */
  start(name: string, attributes: SpanAttributes, parent?: unknown): InboundSpan
}

/** The fields a log line about a traced thing carries, as OpenTelemetry's log data model names them. */
export interface TraceFields {
  readonly trace_id: string
  readonly span_id: string
}
