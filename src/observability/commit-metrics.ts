import { Counter, Gauge, Histogram, type Registry } from 'prom-client'
import type { StoredEvent } from '../events/envelope.js'
import { BoundedLabels } from './bounded-labels.js'
import { type HeardCommit, HeardCommits } from './heard-commits.js'

/**
 * The metrics a run's events tell (docs/OBSERVABILITY.md), read off the
 * store's commits: one listener hears every committed event, so nothing in
 * the runtime or the tools counts anything. Times are the commits' (a
 * model call's latency runs from the commit of its step.started to that of
 * its step.finished): under load a commit may wait up to the store's loaded
 * interval (100 ms). Commits are read in batches (heard-commits.ts), and
 * all heard before a scrape are read for it. Each costs a switch per event;
 * deltas fall through it.
 */

interface ModelOf {
  readonly provider: string
  readonly model: string
}

interface Step {
  readonly labels: ModelOf
  readonly startedAt: number
  firstToken: boolean
}

/** What a session's run in progress has open; dropped when the run finishes. */
interface LiveRun {
  readonly startedAt: number
  retrying: boolean
  readonly messages: Map<string, ModelOf>
  readonly steps: Map<string, Step>
  readonly tools: Map<string, { readonly tool: string; readonly startedAt: number }>
  readonly waits: Map<string, number>
}

/** A tool.failed for a call that never reached tool.called (an unknown tool, invalid arguments): no tool name to trust. */
export const NOT_CALLED = '(not called)'

const seconds = (ms: number): number => ms / 1000

export class CommitMetrics {
  private readonly runs = new Map<string, LiveRun>()
  private readonly heard = new HeardCommits((commit) => this.readCommit(commit))
  private readonly providers = new BoundedLabels(20)
  private readonly models = new BoundedLabels(50)
  private readonly tools = new BoundedLabels(200)
  private readonly permissions = new BoundedLabels(50)
  private readonly finishReasons = new BoundedLabels(20)

  private readonly commits: Counter
  private readonly events: Counter
  private readonly eventsPerCommit: Histogram
  private readonly commitSeconds: Histogram
  private readonly inputs: Counter<'delivery'>
  private readonly runsStarted: Counter
  private readonly runsFinished: Counter<'outcome'>
  private readonly runSeconds: Histogram<'outcome'>
  private readonly modelCalls: Counter<'provider' | 'model' | 'finish_reason'>
  private readonly modelSeconds: Histogram<'provider' | 'model'>
  private readonly firstToken: Histogram<'provider' | 'model'>
  private readonly tokens: Counter<'provider' | 'model' | 'type'>
  private readonly cost: Counter<'provider' | 'model'>
  private readonly retries: Counter<'provider' | 'model'>
  private readonly toolCalls: Counter<'tool' | 'outcome'>
  private readonly toolSeconds: Histogram<'tool' | 'outcome'>
  private readonly permissionRequests: Counter<'permission'>
  private readonly permissionSeconds: Histogram<'reply'>

  constructor(
    registry: Registry,
    /** the commit being published's write time in ms (EventStore.commitMs) */
    private readonly commitMs: () => number,
    private readonly now: () => number = Date.now,
  ) {
    const registers = [registry]
    const runs = this.runs
    this.commits = new Counter({ name: 'chronicle_store_commits_total', help: 'Store commits', registers })
    this.events = new Counter({ name: 'chronicle_store_events_total', help: 'Events committed', registers })
    this.eventsPerCommit = new Histogram({
      name: 'chronicle_store_commit_events',
      help: 'Events per commit',
      buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000],
      registers,
    })
    this.commitSeconds = new Histogram({
      name: 'chronicle_store_commit_seconds',
      help: "A commit's write transaction, in seconds",
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers,
    })
    this.inputs = new Counter({
      name: 'chronicle_inputs_accepted_total',
      help: 'Inputs accepted, by delivery (queue or steer)',
      labelNames: ['delivery'],
      registers,
    })
    this.runsStarted = new Counter({
      name: 'chronicle_runs_started_total',
      help: 'Runs started or resumed after a restart',
      registers,
    })
    this.runsFinished = new Counter({
      name: 'chronicle_runs_finished_total',
      help: 'Runs finished, by outcome',
      labelNames: ['outcome'],
      registers,
    })
    this.runSeconds = new Histogram({
      name: 'chronicle_run_seconds',
      help: "A run's time from start to finish, by outcome",
      labelNames: ['outcome'],
      buckets: [1, 5, 10, 30, 60, 120, 300, 900, 1800, 3600],
      registers,
    })
    new Gauge({
      name: 'chronicle_runs_active',
      help: 'Runs in progress on this node, by state (running, waiting for a permission reply, retrying the model)',
      labelNames: ['state'],
      registers,
      collect() {
        let running = 0
        let waiting = 0
        let retrying = 0
        for (const run of runs.values()) {
          if (run.waits.size > 0) waiting++
          else if (run.retrying) retrying++
          else running++
        }
        this.set({ state: 'running' }, running)
        this.set({ state: 'waiting' }, waiting)
        this.set({ state: 'retrying' }, retrying)
      },
    })
    const model = ['provider', 'model'] as const
    this.modelCalls = new Counter({
      name: 'chronicle_model_calls_total',
      help: 'Model calls (steps) finished, by provider, model and finish reason',
      labelNames: ['provider', 'model', 'finish_reason'],
      registers,
    })
    this.modelSeconds = new Histogram({
      name: 'chronicle_model_call_seconds',
      help: 'A model call from step.started to step.finished',
      labelNames: model,
      buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
      registers,
    })
    this.firstToken = new Histogram({
      name: 'chronicle_model_time_to_first_token_seconds',
      help: "A model call's time to its first text, reasoning or tool call",
      labelNames: model,
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
      registers,
    })
    this.tokens = new Counter({
      name: 'chronicle_model_tokens_total',
      help: 'Tokens, by provider, model and type (input, output, reasoning, cached_input)',
      labelNames: ['provider', 'model', 'type'],
      registers,
    })
    this.cost = new Counter({
      name: 'chronicle_model_cost_usd_total',
      help: "Cost in USD, from the models' configured prices",
      labelNames: model,
      registers,
    })
    this.retries = new Counter({
      name: 'chronicle_model_retries_total',
      help: 'Model calls retried after a retryable failure',
      labelNames: model,
      registers,
    })
    this.toolCalls = new Counter({
      name: 'chronicle_tool_calls_total',
      help: 'Tool calls ended, by tool and outcome (completed, or the failure kind)',
      labelNames: ['tool', 'outcome'],
      registers,
    })
    this.toolSeconds = new Histogram({
      name: 'chronicle_tool_seconds',
      help: 'A tool call from tool.called to its end (permission waits included)',
      labelNames: ['tool', 'outcome'],
      buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300],
      registers,
    })
    this.permissionRequests = new Counter({
      name: 'chronicle_permission_requests_total',
      help: 'Permission requests raised, by permission',
      labelNames: ['permission'],
      registers,
    })
    new Gauge({
      name: 'chronicle_permission_requests_waiting',
      help: 'Permission requests waiting for a reply, in runs in progress',
      registers,
      collect() {
        let waiting = 0
        for (const run of runs.values()) waiting += run.waits.size
        this.set(waiting)
      },
    })
    this.permissionSeconds = new Histogram({
      name: 'chronicle_permission_wait_seconds',
      help: 'A permission request from raised to answered, by reply',
      labelNames: ['reply'],
      buckets: [0.5, 1, 5, 15, 30, 60, 300, 900, 3600],
      registers,
    })
  }

  /** The store's commit listener: notes the commit, read with the next batch or at a scrape (heard-commits.ts). */
  readonly observe = (events: readonly StoredEvent[]): void => {
    this.heard.note({ events, at: this.now(), commitMs: this.commitMs() })
  }

  /** Brings the metrics up to every commit heard: before a scrape. */
  read(): void {
    this.heard.flush()
  }

  private readCommit({ events, at, commitMs }: HeardCommit): void {
    this.commits.inc()
    this.events.inc(events.length)
    this.eventsPerCommit.observe(events.length)
    if (commitMs >= 0) this.commitSeconds.observe(seconds(commitMs))
    for (const event of events) {
      switch (event.type) {
        case 'text.delta':
        case 'reasoning.delta':
        case 'tool.input.delta':
        case 'tool.progressed':
          break
        case 'input.accepted':
          this.inputs.inc({ delivery: event.data.delivery })
          break
        case 'run.started':
        case 'run.resumed':
          this.runStarted(event.sessionId, at)
          break
        case 'run.finished':
          this.runFinished(event.sessionId, event.data.outcome, at)
          break
        case 'message.created':
          if (event.data.role === 'assistant') this.runOf(event)?.messages.set(event.data.messageId, this.labels(event))
          break
        case 'step.started':
          this.stepStarted(event.sessionId, event.data.messageId, at)
          break
        case 'text.started':
        case 'reasoning.started':
        case 'tool.input.started':
          this.token(event.sessionId, event.data.messageId, at)
          break
        case 'step.retried':
          this.stepRetried(event.sessionId, event.data.messageId)
          break
        case 'step.finished':
          this.stepFinished(event, at)
          break
        case 'message.completed':
          this.messageCompleted(event.sessionId, event.data.messageId, at)
          break
        case 'tool.called':
          this.runOf(event)?.tools.set(event.data.partId, { tool: this.tools.of(event.data.tool), startedAt: at })
          break
        case 'tool.completed':
          this.toolEnded(event.sessionId, event.data.partId, 'completed', at)
          break
        case 'tool.failed':
          this.toolEnded(event.sessionId, event.data.partId, event.data.error.kind, at)
          break
        case 'permission.requested':
          this.permissionRequests.inc({ permission: this.permissions.of(event.data.permission) })
          this.runOf(event)?.waits.set(event.data.requestId, at)
          break
        case 'permission.replied':
          this.permissionReplied(event.sessionId, event.data.requestId, event.data.reply, at)
          break
        default:
          break
      }
    }
  }

  private runOf(event: StoredEvent): LiveRun | undefined {
    return this.runs.get(event.sessionId)
  }

  /** provider and model of an assistant message: `openai:gpt-4o` is provider openai, model gpt-4o */
  private labels(event: StoredEvent<Extract<StoredEvent, { type: 'message.created' }>>): ModelOf {
    const spec = event.data.model ?? 'default'
    const colon = spec.indexOf(':')
    const provider = colon < 0 ? 'unknown' : this.providers.of(spec.slice(0, colon))
    return { provider, model: this.models.of(spec.slice(colon + 1)) }
  }

  private runStarted(sessionId: string, at: number): void {
    this.runsStarted.inc()
    if (this.runs.has(sessionId)) return
    this.runs.set(sessionId, {
      startedAt: at,
      retrying: false,
      messages: new Map(),
      steps: new Map(),
      tools: new Map(),
      waits: new Map(),
    })
  }

  private runFinished(sessionId: string, outcome: string, at: number): void {
    this.runsFinished.inc({ outcome })
    const run = this.runs.get(sessionId)
    if (!run) return
    this.runSeconds.observe({ outcome }, seconds(at - run.startedAt))
    this.runs.delete(sessionId)
  }

  private stepStarted(sessionId: string, messageId: string, at: number): void {
    const run = this.runs.get(sessionId)
    const labels = run?.messages.get(messageId)
    if (!run || !labels) return
    run.retrying = false
    run.steps.set(messageId, { labels, startedAt: at, firstToken: false })
  }

  private token(sessionId: string, messageId: string, at: number): void {
    const step = this.runs.get(sessionId)?.steps.get(messageId)
    if (!step || step.firstToken) return
    step.firstToken = true
    this.firstToken.observe(step.labels, seconds(at - step.startedAt))
  }

  private stepRetried(sessionId: string, messageId: string): void {
    const run = this.runs.get(sessionId)
    const labels = run?.messages.get(messageId)
    if (!run || !labels) return
    run.retrying = true
    this.retries.inc(labels)
  }

  private stepFinished(event: StoredEvent<Extract<StoredEvent, { type: 'step.finished' }>>, at: number): void {
    const run = this.runs.get(event.sessionId)
    const step = run?.steps.get(event.data.messageId)
    if (!run || !step) return
    run.steps.delete(event.data.messageId)
    const { provider, model } = step.labels
    this.modelCalls.inc({ provider, model, finish_reason: this.finishReasons.of(event.data.finishReason) })
    this.modelSeconds.observe(step.labels, seconds(at - step.startedAt))
    const usage = event.data.usage
    if (usage.inputTokens) this.tokens.inc({ provider, model, type: 'input' }, usage.inputTokens)
    if (usage.outputTokens) this.tokens.inc({ provider, model, type: 'output' }, usage.outputTokens)
    if (usage.reasoningTokens) this.tokens.inc({ provider, model, type: 'reasoning' }, usage.reasoningTokens)
    if (usage.cachedInputTokens) this.tokens.inc({ provider, model, type: 'cached_input' }, usage.cachedInputTokens)
    if (event.data.cost) this.cost.inc(step.labels, event.data.cost)
  }

  /** A message that ends with its step still open: the model call failed. */
  private messageCompleted(sessionId: string, messageId: string, at: number): void {
    const run = this.runs.get(sessionId)
    if (!run) return
    const step = run.steps.get(messageId)
    if (step) {
      run.steps.delete(messageId)
      this.modelCalls.inc({ provider: step.labels.provider, model: step.labels.model, finish_reason: 'error' })
      this.modelSeconds.observe(step.labels, seconds(at - step.startedAt))
    }
    run.messages.delete(messageId)
  }

  private toolEnded(sessionId: string, partId: string, outcome: string, at: number): void {
    const run = this.runs.get(sessionId)
    const call = run?.tools.get(partId)
    if (!run || !call) {
      this.toolCalls.inc({ tool: NOT_CALLED, outcome })
      return
    }
    run.tools.delete(partId)
    this.toolCalls.inc({ tool: call.tool, outcome })
    this.toolSeconds.observe({ tool: call.tool, outcome }, seconds(at - call.startedAt))
  }

  private permissionReplied(sessionId: string, requestId: string, reply: string, at: number): void {
    const waits = this.runs.get(sessionId)?.waits
    const since = waits?.get(requestId)
    if (!waits || since === undefined) return
    waits.delete(requestId)
    this.permissionSeconds.observe({ reply }, seconds(at - since))
  }
}
