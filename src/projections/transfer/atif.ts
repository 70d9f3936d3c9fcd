import type { Message, Part, Session, StepFinishPart, SubtaskPart, ToolPart } from '../fold/model.js'
import { ChronicleError } from '../../events/errors.js'
import { getMessages, getParts, requireSession, type ReadModelSource } from '../queries/read-model.js'
import type { ReadModels } from '../read-models.js'

/**
 * A session as an Agent Trajectory Interchange Format document (ATIF, the
 * harbor project's RFC 0001 and its models, version 1.6; docs/API.md "ATIF
 * export" says what maps and what does not). Our JSONL export stays the
 * lossless format; this one is for the evaluation and trajectory tools that
 * read ATIF. Written from the read models, which a fork's hold with its
 * inherited history: a fork exports what it inherited too.
 *
 *   user message                 → a `user` step: its text; attached files in `extra`
 *   each model step of an        → an `agent` step: its text, reasoning, tool calls and their
 *   assistant message              results (`observation`, failures as `<kind>: <message>`), a
 *                                  sub-agent's session as `subagent_trajectory_ref`, the step's
 *                                  usage and cost as `metrics`
 *   a compaction's summary       → an `agent` step, `extra.chronicle.compaction: true`
 */

export const ATIF_VERSION = 'ATIF-v1.6'

type Json = Record<string, unknown>

export interface AtifToolCall {
  readonly tool_call_id: string
  readonly function_name: string
  readonly arguments: Json
}

export interface AtifObservationResult {
  readonly source_call_id?: string
  readonly content?: string
  readonly subagent_trajectory_ref?: { readonly session_id: string; readonly extra?: Json }[]
}

export interface AtifMetrics {
  readonly prompt_tokens?: number
  readonly completion_tokens?: number
  readonly cached_tokens?: number
  readonly cost_usd?: number
  readonly extra?: Json
}

export interface AtifStep {
  readonly step_id: number
  readonly timestamp?: string
  readonly source: 'system' | 'user' | 'agent'
  readonly model_name?: string
  readonly message: string
  readonly reasoning_content?: string
  readonly tool_calls?: AtifToolCall[]
  readonly observation?: { readonly results: AtifObservationResult[] }
  readonly metrics?: AtifMetrics
  readonly extra?: Json
}

export interface AtifTrajectory {
  readonly schema_version: typeof ATIF_VERSION
  readonly session_id: string
  readonly agent: {
    readonly name: string
    readonly version: string
    readonly model_name?: string
    readonly extra?: Json
  }
  readonly steps: AtifStep[]
  readonly notes?: string
  readonly final_metrics?: {
    readonly total_prompt_tokens: number
    readonly total_completion_tokens: number
    readonly total_cached_tokens: number
    readonly total_cost_usd: number
    readonly total_steps: number
    readonly extra?: Json
  }
  readonly extra?: Json
}

const NOTES =
  'Exported by Chronicle from its event log. One agent step per model call; tool failures are results reading "<kind>: <message>" (kind: failed, invalid, denied, aborted, interrupted). Not carried: token-level deltas, permission requests and replies (a denied call shows as such), workspace snapshots, the hash chain and blobs. `chronicle export` (JSONL) is the lossless format.'

/** The session's ATIF document; NOTHING_TO_EXPORT when it has no message (ATIF needs one step at least). */
export function atifOf(store: ReadModelSource, sessionId: string, chronicleVersion: string): AtifTrajectory {
  const session = requireSession(store, sessionId)
  return toAtif(session, getMessages(store, sessionId), getParts(store, sessionId), chronicleVersion)
}

/** atifOf through the read models port (either engine's): the server's (src/http/api.ts). */
export async function atifThrough(
  readModels: Pick<ReadModels, 'session' | 'messages' | 'parts'>,
  sessionId: string,
  chronicleVersion: string,
): Promise<AtifTrajectory> {
  const [session, messages, parts] = await Promise.all([
    readModels.session(sessionId),
    readModels.messages(sessionId),
    readModels.parts(sessionId),
  ])
  if (!session) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
  return toAtif(session, messages, parts, chronicleVersion)
}

export function toAtif(
  session: Session,
  messages: readonly Message[],
  parts: readonly Part[],
  chronicleVersion: string,
): AtifTrajectory {
  const byMessage = new Map<string, Part[]>()
  for (const part of parts) {
    const list = byMessage.get(part.messageId)
    if (list) list.push(part)
    else byMessage.set(part.messageId, [part])
  }
  const steps: AtifStep[] = []
  for (const message of messages) {
    const own = byMessage.get(message.id) ?? []
    if (message.role === 'user') steps.push(userStep(steps.length + 1, message, own))
    else for (const segment of segments(own)) steps.push(agentStep(steps.length + 1, message, segment))
  }
  if (steps.length === 0)
    throw new ChronicleError(
      'NOTHING_TO_EXPORT',
      `session ${session.id} has no message: an ATIF trajectory needs a step`,
    )
  const totals = { prompt: 0, completion: 0, cached: 0, cost: 0, reasoning: 0 }
  for (const step of steps) {
    totals.prompt += step.metrics?.prompt_tokens ?? 0
    totals.completion += step.metrics?.completion_tokens ?? 0
    totals.cached += step.metrics?.cached_tokens ?? 0
    totals.cost += step.metrics?.cost_usd ?? 0
    totals.reasoning += Number(step.metrics?.extra?.reasoning_tokens ?? 0)
  }
  return {
    schema_version: ATIF_VERSION,
    session_id: session.id,
    agent: {
      name: 'chronicle',
      version: chronicleVersion,
      ...(session.model !== null && { model_name: session.model }),
      extra: { agent: session.agent },
    },
    steps,
    notes: NOTES,
    final_metrics: {
      total_prompt_tokens: totals.prompt,
      total_completion_tokens: totals.completion,
      total_cached_tokens: totals.cached,
      total_cost_usd: totals.cost,
      total_steps: steps.length,
      extra: { reasoning_tokens: totals.reasoning },
    },
    extra: {
      chronicle: {
        title: session.title,
        ...(session.forkedFrom && { forkedFrom: session.forkedFrom }),
        ...(session.parent && { parent: session.parent }),
        lastSeq: session.lastSeq,
      },
    },
  }
}

function userStep(stepId: number, message: Message, parts: readonly Part[]): AtifStep {
  const files = parts.flatMap((p) =>
    p.type === 'file'
      ? [
          Object.assign(
            {},
            p.path && { path: p.path },
            p.url && !p.url.startsWith('data:') && { url: p.url },
            p.mediaType && { mediaType: p.mediaType },
          ),
        ]
      : [],
  )
  return {
    step_id: stepId,
    timestamp: message.createdAt,
    source: 'user',
    message: textOf(parts, 'text'),
    extra: {
      chronicle: { messageId: message.id, ...(message.by && { by: message.by }), ...(files.length > 0 && { files }) },
    },
  }
}

/** An assistant message's parts, one list per model step (cut at each step-start); all of them if it has none. */
function segments(parts: readonly Part[]): Part[][] {
  const out: Part[][] = []
  for (const part of parts) {
    if (part.type === 'step-start' || out.length === 0) out.push([])
    ;(out.at(-1) as Part[]).push(part)
  }
  return out.length > 0 ? out : [[]]
}

function agentStep(stepId: number, message: Message, parts: readonly Part[]): AtifStep {
  const tools = parts.filter((p): p is ToolPart => p.type === 'tool')
  const subtasks = new Map(
    parts.filter((p): p is SubtaskPart => p.type === 'subtask').map((p) => [p.callId, p.childSessionId]),
  )
  const finish = parts.find((p): p is StepFinishPart => p.type === 'step-finish')
  const reasoning = textOf(parts, 'reasoning')
  const start = parts.find((p) => p.type === 'step-start')
  return {
    step_id: stepId,
    timestamp: message.createdAt,
    source: 'agent',
    ...(message.model !== null && { model_name: message.model }),
    message: textOf(parts, 'text'),
    ...(reasoning !== '' && { reasoning_content: reasoning }),
    ...(tools.length > 0 && {
      tool_calls: tools.map((t) => ({ tool_call_id: t.callId, function_name: t.tool, arguments: argumentsOf(t) })),
      observation: { results: tools.map((t) => resultOf(t, subtasks.get(t.callId))) },
    }),
    ...(finish && { metrics: metricsOf(finish) }),
    extra: {
      chronicle: {
        messageId: message.id,
        ...(start?.type === 'step-start' && { step: start.step }),
        ...(finish && { finishReason: finish.finishReason }),
        ...(message.summary && { compaction: true }),
        ...(message.error && { error: message.error }),
        ...(tools.length > 0 && {
          tools: tools.map((t) => ({
            callId: t.callId,
            state: t.state,
            ...(t.error && { error: t.error.kind }),
            ...(t.permission && { permission: t.permission.reply }),
            ...(!isObject(t.input) && { rawInput: t.rawInput }),
          })),
        }),
      },
    },
  }
}

function resultOf(tool: ToolPart, child: string | undefined): AtifObservationResult {
  const content =
    tool.state === 'completed'
      ? (tool.output ?? '')
      : tool.error
        ? `${tool.error.kind}: ${tool.error.message}`
        : `${tool.state}: the call has no result`
  return {
    source_call_id: tool.callId,
    content,
    ...(child !== undefined && { subagent_trajectory_ref: [{ session_id: child }] }),
  }
}

function metricsOf(finish: StepFinishPart): AtifMetrics {
  const u = finish.usage
  return Object.assign(
    {},
    u.inputTokens !== undefined && { prompt_tokens: u.inputTokens },
    u.outputTokens !== undefined && { completion_tokens: u.outputTokens },
    u.cachedInputTokens !== undefined && { cached_tokens: u.cachedInputTokens },
    finish.cost !== undefined && { cost_usd: finish.cost },
    u.reasoningTokens !== undefined && { extra: { reasoning_tokens: u.reasoningTokens } },
  )
}

/** ATIF's arguments are an object: a call whose input is none (invalid JSON, a string) gives `{}`, its raw input in extra. */
function argumentsOf(tool: ToolPart): Json {
  return isObject(tool.input) ? tool.input : {}
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function textOf(parts: readonly Part[], type: 'text' | 'reasoning'): string {
  return parts
    .flatMap((p) => (p.type === type ? [p.text] : []))
    .filter((t) => t !== '')
    .join('\n\n')
}
