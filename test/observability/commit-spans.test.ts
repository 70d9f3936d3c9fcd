import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { describe, expect, it } from 'vitest'
import type { EventMeta, StoredEvent } from '../../src/events/envelope.js'
import { CommitSpans } from '../../src/observability/commit-spans.js'

/**
 * What an event's `meta.trace` may make of a run's span (docs/OBSERVABILITY.md
 * "Requests, and how a run links to them"). A log can come from outside —
 * an import of another server's sessions — so its meta is read as hostile.
 */

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const SPAN = '00f067aa0ba902b7'

let seq = 0
const event = (type: string, data: Record<string, unknown>, meta: Partial<EventMeta> = {}): StoredEvent =>
  ({
    seq: ++seq,
    sessionId: 'ses_imported',
    version: seq,
    schemaVersion: 1,
    meta: { actor: 'user', ...meta },
    at: new Date(0).toISOString(),
    type,
    data,
  }) as StoredEvent

/** One run that delivers an input whose accepting event names `trace`; the run's span as exported. */
function runWithInputTraced(trace: unknown) {
  const exporter = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  const spans = new CommitSpans(provider.getTracer('test'))
  spans.observe([
    event(
      'input.accepted',
      { inputId: 'inp_1', parts: [{ type: 'text', text: 'hi' }], delivery: 'queue', noReply: false, digest: 'd' },
      {
        trace,
      } as Partial<EventMeta>,
    ),
    event('run.started', { runId: 'run_1', reason: 'input' }),
    event('input.delivered', { inputId: 'inp_1', messageId: 'msg_1', partIds: ['prt_1'] }),
    event('run.cancel.requested', { runId: 'run_1' }, { trace } as Partial<EventMeta>),
    event('run.finished', { runId: 'run_1', outcome: 'cancelled' }),
  ])
  spans.close()
  return exporter.getFinishedSpans().find((s) => s.name === 'chronicle.run')
}

describe('links from an imported log', () => {
  it('a valid traceparent in meta links the run to it, for the input and the cancel', () => {
    const run = runWithInputTraced(`00-${TRACE}-${SPAN}-01`)
    expect(run?.links.map((l) => [l.context.traceId, l.context.spanId, l.attributes?.['chronicle.link']])).toEqual([
      [TRACE, SPAN, 'input'],
      [TRACE, SPAN, 'cancel'],
    ])
  })

  it('anything else in meta.trace links nothing, and the run is still traced', () => {
    for (const trace of [
      `00-${'0'.repeat(32)}-${SPAN}-01`,
      `00-${TRACE}-${SPAN}-01 extra`,
      `00-${TRACE.toUpperCase()}-${SPAN}-01`,
      '00-not-a-trace',
      '',
      { traceId: TRACE, spanId: SPAN },
      42,
    ]) {
      const run = runWithInputTraced(trace)
      expect(run, JSON.stringify(trace)).toBeDefined()
      expect(run?.links).toEqual([])
    }
  })
})
