import {
  type Context,
  type Link,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api'
import type { EventMeta, StoredEvent, StoredEventOf } from '../events/envelope.js'
import { HeardCommits } from './heard-commits.js'
import type { TraceFields } from './inbound.js'
import { remoteSpanContext } from './traceparent.js'

/**
 * OpenTelemetry spans read off the store's commits (docs/OBSERVABILITY.md
 * "Traces"): a span per run, a child per model call (step) with the GenAI
 * semantic-convention attributes, a child of that per tool execution, and a
 * child of the tool's per permission wait. A sub-agent's run is a child of
 * the task call that started it. Each carries the session id and the seq
 * range it covers, so a trace leads back to the log and to the page
 * (`#/s/<id>@<seq>`). No prompt or output text goes into a span unless the
 * user's config asks (`traces.content`): it is in the log. Times are the
 * commits'.
 *
 * The requests behind a run are links, not parents (a run outlives the
 * request that queued its input, and answers several): the run links to the
 * request of each input it delivers and of a cancel, a permission wait to the
 * request that answered it — each named by the `trace` its events' meta
 * record.
 */

interface Model {
  readonly provider: string
  readonly model: string
}

interface SessionSpans {
  readonly run: Span
  readonly models: Map<string, Model>
  /** model calls in progress, by message */
  readonly steps: Map<string, Span>
  /** each message's model call, ended or not: the parent of the calls it made */
  readonly calls: Map<string, Span>
  readonly tools: Map<string, Span>
  readonly waits: Map<string, Span>
  /** with content on: the user's texts the run delivered, and each message's answer so far (by text part) */
  readonly prompts: string[]
  readonly answers: Map<string, { messageId: string; text: string }>
}

export interface CommitSpansOptions {
  /** spans carry the prompt, output and tool text (docs/OBSERVABILITY.md "Traces") */
  readonly content?: boolean
}

/** the most text of one answer or prompt kept for a span (the exporter cuts attributes there too) */
const MAX_TEXT = 16 * 1024
const FAILED_OUTCOMES: ReadonlySet<string> = new Set(['error', 'failed'])
/** inputs accepted from traced requests and not delivered yet, at most: the oldest are forgotten first */
const MAX_WAITING_INPUTS = 10_000

export class CommitSpans {
  private readonly sessions = new Map<string, SessionSpans>()
  /** a sub-agent's session → the context of the task call that runs it */
  private readonly parents = new Map<string, Context>()
  /** `session input` → the request that submitted it, until it is delivered */
  private readonly inputs = new Map<string, { readonly link: Link | undefined; readonly text: string | undefined }>()
  private readonly content: boolean

  private readonly heard = new HeardCommits(({ events, at }) => this.readCommit(events, at))

  constructor(
    private readonly tracer: Tracer,
    options: CommitSpansOptions = {},
  ) {
    this.content = options.content === true
  }

  /** The store's commit listener: notes the commit, whose spans are made with the next batch (heard-commits.ts). */
  readonly observe = (events: readonly StoredEvent[]): void => {
    this.heard.note({ events, at: Date.now(), commitMs: -1 })
  }

  /** Makes the spans of every commit heard so far. */
  read(): void {
    this.heard.flush()
  }

  private readCommit(events: readonly StoredEvent[], at: number): void {
    for (const event of events) {
      switch (event.type) {
        case 'text.delta':
          if (this.content) this.textDelta(event)
          break
        case 'text.started':
          if (this.content) this.textStarted(event)
          break
        case 'reasoning.delta':
        case 'tool.input.delta':
        case 'tool.progressed':
          break
        case 'run.started':
        case 'run.resumed':
          this.runStarted(event, at)
          break
        case 'run.finished':
          this.runFinished(event, at)
          break
        case 'message.created':
          if (event.data.role === 'assistant')
            this.sessions.get(event.sessionId)?.models.set(event.data.messageId, modelOf(event.data.model))
          break
        case 'step.started':
          this.stepStarted(event, at)
          break
        case 'step.finished':
          this.stepFinished(event, at)
          break
        case 'message.completed':
          this.messageCompleted(event, at)
          break
        case 'tool.called':
          this.toolCalled(event, at)
          break
        case 'tool.completed':
          this.toolEnded(event.sessionId, event.data.partId, event.seq, at, undefined, event.data.output)
          break
        case 'tool.failed':
          this.toolEnded(event.sessionId, event.data.partId, event.seq, at, event.data.error)
          break
        case 'permission.requested':
          this.permissionRequested(event, at)
          break
        case 'permission.replied':
          this.permissionReplied(event, at)
          break
        case 'subtask.started':
          this.subtaskStarted(event)
          break
        case 'subtask.finished':
          this.parents.delete(event.data.childSessionId)
          break
        case 'input.accepted':
          this.inputAccepted(event)
          break
        case 'input.delivered':
          this.inputDelivered(event)
          break
        case 'run.cancel.requested':
          this.linkRun(event.sessionId, linkOf(event.meta, 'cancel'))
          break
        default:
          break
      }
    }
  }

  /** A session's open run, for the log lines written about it. */
  fieldsOf(sessionId: string): TraceFields | undefined {
    this.read()
    const run = this.sessions.get(sessionId)?.run.spanContext()
    return run && { trace_id: run.traceId, span_id: run.spanId }
  }

  /** Ends what is open (a shutdown: runs stay open in the log, for recovery to continue). */
  close(): void {
    this.read()
    const at = Date.now()
    for (const spans of this.sessions.values()) {
      for (const span of [...spans.waits.values(), ...spans.tools.values(), ...spans.steps.values()]) span.end(at)
      spans.run.setAttribute('chronicle.run.interrupted', true)
      spans.run.end(at)
    }
    this.sessions.clear()
    this.parents.clear()
    this.inputs.clear()
  }

  private inputAccepted(event: StoredEventOf<'input.accepted'>): void {
    const link = linkOf(event.meta, 'input')
    const text = this.content
      ? event.data.parts
          .flatMap((p) => (p.type === 'text' ? [p.text] : []))
          .join('\n')
          .slice(0, MAX_TEXT)
      : undefined
    if (!link && !text) return
    if (this.inputs.size >= MAX_WAITING_INPUTS) this.inputs.delete(this.inputs.keys().next().value as string)
    this.inputs.set(`${event.sessionId} ${event.data.inputId}`, { link, text })
  }

  private inputDelivered(event: StoredEventOf<'input.delivered'>): void {
    const key = `${event.sessionId} ${event.data.inputId}`
    const input = this.inputs.get(key)
    if (!input) return
    this.inputs.delete(key)
    this.linkRun(event.sessionId, input.link)
    if (input.text) this.sessions.get(event.sessionId)?.prompts.push(input.text)
  }

  private textStarted(event: StoredEventOf<'text.started'>): void {
    this.sessions.get(event.sessionId)?.answers.set(event.data.partId, { messageId: event.data.messageId, text: '' })
  }

  private textDelta(event: StoredEventOf<'text.delta'>): void {
    const answer = this.sessions.get(event.sessionId)?.answers.get(event.data.partId)
    if (answer && answer.text.length < MAX_TEXT) answer.text += event.data.text
  }

  /** A message's answer, as the GenAI conventions' output messages; its parts are let go. */
  private outputOf(spans: SessionSpans, messageId: string): string | undefined {
    const parts: { type: 'text'; content: string }[] = []
    for (const [partId, answer] of spans.answers) {
      if (answer.messageId !== messageId) continue
      spans.answers.delete(partId)
      parts.push({ type: 'text', content: answer.text })
    }
    return parts.length > 0 ? JSON.stringify([{ role: 'assistant', parts }]) : undefined
  }

  private linkRun(sessionId: string, link: Link | undefined): void {
    if (link) this.sessions.get(sessionId)?.run.addLink(link)
  }

  private runStarted(event: StoredEventOf<'run.started'> | StoredEventOf<'run.resumed'>, at: number): void {
    if (this.sessions.has(event.sessionId)) return
    const run = this.tracer.startSpan(
      'chronicle.run',
      {
        kind: SpanKind.INTERNAL,
        startTime: at,
        attributes: {
          'gen_ai.operation.name': 'invoke_agent',
          'chronicle.session.id': event.sessionId,
          'chronicle.run.id': event.data.runId,
          'chronicle.seq.start': event.seq,
          ...(event.type === 'run.started'
            ? { 'chronicle.run.reason': event.data.reason }
            : { 'chronicle.run.attempt': event.data.attempt }),
        },
      },
      this.parents.get(event.sessionId) ?? ROOT_CONTEXT,
    )
    this.sessions.set(event.sessionId, {
      run,
      models: new Map(),
      steps: new Map(),
      calls: new Map(),
      tools: new Map(),
      waits: new Map(),
      prompts: [],
      answers: new Map(),
    })
  }

  private runFinished(event: StoredEventOf<'run.finished'>, at: number): void {
    const spans = this.sessions.get(event.sessionId)
    if (!spans) return
    this.sessions.delete(event.sessionId)
    for (const span of [...spans.waits.values(), ...spans.tools.values(), ...spans.steps.values()]) span.end(at)
    const { run } = spans
    if (spans.prompts.length > 0)
      run.setAttribute(
        'gen_ai.input.messages',
        JSON.stringify(spans.prompts.map((content) => ({ role: 'user', parts: [{ type: 'text', content }] }))),
      )
    run.setAttributes({
      'chronicle.seq.end': event.seq,
      'chronicle.run.outcome': event.data.outcome,
      'chronicle.page': `#/s/${event.sessionId}@${event.seq}`,
    })
    if (FAILED_OUTCOMES.has(event.data.outcome))
      run.setStatus({ code: SpanStatusCode.ERROR, message: event.data.error?.message ?? event.data.outcome })
    run.end(at)
  }

  private stepStarted(event: StoredEventOf<'step.started'>, at: number): void {
    const spans = this.sessions.get(event.sessionId)
    if (!spans) return
    const model = spans.models.get(event.data.messageId) ?? { provider: 'unknown', model: 'unknown' }
    const step = this.tracer.startSpan(
      `chat ${model.model}`,
      {
        kind: SpanKind.CLIENT,
        startTime: at,
        attributes: {
          'gen_ai.operation.name': 'chat',
          'gen_ai.provider.name': model.provider,
          'gen_ai.system': model.provider,
          'gen_ai.request.model': model.model,
          'chronicle.session.id': event.sessionId,
          'chronicle.message.id': event.data.messageId,
          'chronicle.step': event.data.step,
          'chronicle.seq.start': event.seq,
        },
      },
      trace.setSpan(ROOT_CONTEXT, spans.run),
    )
    spans.steps.set(event.data.messageId, step)
    spans.calls.set(event.data.messageId, step)
  }

  private stepFinished(event: StoredEventOf<'step.finished'>, at: number): void {
    const spans = this.sessions.get(event.sessionId)
    const step = spans?.steps.get(event.data.messageId)
    if (!spans || !step) return
    spans.steps.delete(event.data.messageId)
    const { usage } = event.data
    const output = this.content ? this.outputOf(spans, event.data.messageId) : undefined
    if (output) step.setAttribute('gen_ai.output.messages', output)
    step.setAttributes({
      'gen_ai.response.finish_reasons': [event.data.finishReason],
      'chronicle.seq.end': event.seq,
      ...(usage.inputTokens !== undefined && { 'gen_ai.usage.input_tokens': usage.inputTokens }),
      ...(usage.outputTokens !== undefined && { 'gen_ai.usage.output_tokens': usage.outputTokens }),
      ...(event.data.cost !== undefined && { 'chronicle.cost.usd': event.data.cost }),
    })
    step.end(at)
  }

  /** A message that ends with its step still open: the model call failed. */
  private messageCompleted(event: StoredEventOf<'message.completed'>, at: number): void {
    const spans = this.sessions.get(event.sessionId)
    const step = spans?.steps.get(event.data.messageId)
    spans?.models.delete(event.data.messageId)
    if (!spans || !step) return
    spans.steps.delete(event.data.messageId)
    step.setStatus({
      code: SpanStatusCode.ERROR,
      message: event.data.error?.message ?? 'the model call did not finish',
    })
    if (event.data.error) step.setAttribute('error.type', event.data.error.kind)
    step.end(at)
  }

  private toolCalled(event: StoredEventOf<'tool.called'>, at: number): void {
    const spans = this.sessions.get(event.sessionId)
    if (!spans) return
    const step = spans.calls.get(event.data.messageId)
    const span = this.tracer.startSpan(
      `execute_tool ${event.data.tool}`,
      {
        kind: SpanKind.INTERNAL,
        startTime: at,
        attributes: {
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': event.data.tool,
          'gen_ai.tool.call.id': event.data.callId,
          'chronicle.session.id': event.sessionId,
          'chronicle.part.id': event.data.partId,
          'chronicle.seq.start': event.seq,
          ...(this.content &&
            event.data.input !== undefined && { 'gen_ai.tool.call.arguments': JSON.stringify(event.data.input) }),
        },
      },
      trace.setSpan(ROOT_CONTEXT, step ?? spans.run),
    )
    spans.tools.set(event.data.partId, span)
  }

  private toolEnded(
    sessionId: string,
    partId: string,
    seq: number,
    at: number,
    error: { readonly kind: string; readonly message: string } | undefined,
    output?: string,
  ): void {
    const spans = this.sessions.get(sessionId)
    const span = spans?.tools.get(partId)
    if (!spans || !span) return
    spans.tools.delete(partId)
    span.setAttribute('chronicle.seq.end', seq)
    if (this.content && output !== undefined) span.setAttribute('gen_ai.tool.call.result', output)
    if (error) {
      span.setAttribute('error.type', error.kind)
      span.setStatus({ code: SpanStatusCode.ERROR, message: error.message })
    }
    span.end(at)
  }

  private permissionRequested(event: StoredEventOf<'permission.requested'>, at: number): void {
    const spans = this.sessions.get(event.sessionId)
    if (!spans) return
    // a sub-agent's request is raised in the top session, naming the child session and call that asked
    const from = event.data.from
    const tool = from
      ? from.partId && this.sessions.get(from.sessionId)?.tools.get(from.partId)
      : event.data.partId && spans.tools.get(event.data.partId)
    const span = this.tracer.startSpan(
      'chronicle.permission.wait',
      {
        kind: SpanKind.INTERNAL,
        startTime: at,
        attributes: {
          'chronicle.session.id': event.sessionId,
          'chronicle.permission': event.data.permission,
          'chronicle.permission.request.id': event.data.requestId,
          'chronicle.seq.start': event.seq,
        },
      },
      trace.setSpan(ROOT_CONTEXT, tool || spans.run),
    )
    spans.waits.set(event.data.requestId, span)
  }

  private permissionReplied(event: StoredEventOf<'permission.replied'>, at: number): void {
    const spans = this.sessions.get(event.sessionId)
    const span = spans?.waits.get(event.data.requestId)
    if (!spans || !span) return
    spans.waits.delete(event.data.requestId)
    const answeredBy = linkOf(event.meta, 'reply')
    if (answeredBy) span.addLink(answeredBy)
    span.setAttributes({ 'chronicle.permission.reply': event.data.reply, 'chronicle.seq.end': event.seq })
    span.end(at)
  }

  private subtaskStarted(event: StoredEventOf<'subtask.started'>): void {
    const tool = this.sessions.get(event.sessionId)?.tools.get(event.data.partId)
    if (tool) this.parents.set(event.data.childSessionId, trace.setSpan(ROOT_CONTEXT, tool))
  }
}

/** A link to the request an event's meta names, if it names a valid one. */
function linkOf(meta: EventMeta, why: string): Link | undefined {
  const context = remoteSpanContext(meta.trace)
  return context && { context, attributes: { 'chronicle.link': why } }
}

/** `openai:gpt-4o` → provider openai, model gpt-4o (attributes may carry any value: spans are not series). */
function modelOf(spec: string | null): Model {
  if (!spec) return { provider: 'unknown', model: 'default' }
  const colon = spec.indexOf(':')
  return colon < 0
    ? { provider: 'unknown', model: spec }
    : { provider: spec.slice(0, colon), model: spec.slice(colon + 1) }
}
