import { appendFileSync, readFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { wakeAt } from './scripted-clock.js'
import { TITLE_SYSTEM } from './title-prompt.js'
import {
  APICallError,
  type LanguageModelV3,
  type LanguageModelV3CallOptions,
  type LanguageModelV3Prompt,
  type LanguageModelV3StreamPart,
} from '@ai-sdk/provider'

/**
 * The scripted model: a deterministic LanguageModelV3 (so it goes through the
 * same adapter as real providers) that plays a JSON script. Replies stream in
 * deltas of `chunkSize` characters — text, reasoning and tool arguments —
 * with usage, finish reasons, HTTP-like errors and a pace (`delayMs` between
 * chunks, kept on the model's own clock whatever the reader's speed).
 *
 * Script file (`scripted:<file>`):
 *   {
 *     "chunkSize": 16, "delayMs": 0,
 *     "pace": "parts",                   // every part waits delayMs; "deltas": only deltas do, the first at once
 *     "record": "requests.jsonl",        // or env CHRONICLE_SCRIPT_LOG: every request, one JSON line
 *     "uniqueCallIds": true,             // fresh tool call ids (default call_scripted_<i>)
 *     "steps": [
 *       { "when": { "turn": 0, "afterToolResult": false, "userContains": "weather", "call": 0 },
 *         "times": 1,                    // uses before the step is spent (default: 1 without `when`, unlimited with)
 *         "reasoning": "…", "text": "…",
 *         "toolCalls": [{ "id": "call_1", "name": "lookup", "input": {"query": "x"} }],   // or "rawInput": "{bad"
 *         "finish": "stop",              // default: tool-calls when there are calls, else stop
 *                                        // (with tool choice none the calls are dropped, an explicit finish kept)
 *         "usage": { "input": 10, "output": 5 },
 *         "error": { "status": 429, "message": "slow down", "retryAfterMs": 10 },     // or { "kind": "context_overflow" }
 *         "delayMs": 5 }
 *     ]
 *   }
 * The first unspent step whose `when` matches the request plays. Matching is on
 * the conversation, not on a counter, so a restarted process resumes mid-script:
 * `turn` is the index of the latest user message, `afterToolResult` whether the
 * prompt ends with tool results.
 */

export interface ScriptToolCall {
  readonly id?: string
  readonly name: string
  readonly input?: unknown
  /** sent verbatim instead of JSON.stringify(input): for invalid-argument tests */
  readonly rawInput?: string
}

export interface ScriptReply {
  readonly reasoning?: string
  readonly text?: string
  readonly toolCalls?: readonly ScriptToolCall[]
  readonly finish?: 'stop' | 'tool-calls' | 'length' | 'content-filter' | 'error' | 'other'
  readonly usage?: { readonly input?: number; readonly output?: number }
  readonly error?: {
    readonly status?: number
    readonly message?: string
    readonly retryAfterMs?: number
    readonly kind?: 'context_overflow'
  }
  readonly delayMs?: number
}

export interface ScriptMatch {
  readonly turn?: number
  readonly afterToolResult?: boolean
  readonly userContains?: string
  readonly call?: number
}

export interface ScriptStep extends ScriptReply {
  readonly when?: ScriptMatch
  readonly times?: number
}

export interface ScriptRequest {
  /** index of this call on this model instance */
  readonly call: number
  readonly turn: number
  readonly afterToolResult: boolean
  readonly lastUserText: string
  readonly prompt: LanguageModelV3Prompt
}

export interface Script {
  readonly steps?: readonly ScriptStep[]
  /** programmatic replies (benchmarks); consulted when no step matches */
  readonly respond?: (request: ScriptRequest) => ScriptReply | undefined
  readonly chunkSize?: number
  readonly delayMs?: number
  /**
   * `parts` (default): every part after the first waits `delayMs`. `deltas`:
   * only text, reasoning and tool-input deltas keep the schedule, the first
   * at once, as a provider's first token comes with the stream's start (bench
   * stream: the time to first delta is then the server's alone).
   */
  readonly pace?: 'parts' | 'deltas'
  readonly record?: string
  /** give each tool call a fresh id, as real providers do (default: call_scripted_<i>) */
  readonly uniqueCallIds?: boolean
}

export interface RecordedCall {
  readonly call: number
  readonly prompt: LanguageModelV3Prompt
  readonly tools: string[]
  readonly toolChoice?: string
  /** the sampling settings the call carried */
  readonly settings?: { readonly maxOutputTokens?: number; readonly temperature?: number; readonly topP?: number }
}

export interface ScriptedModel extends LanguageModelV3 {
  /** the requests received, in order: the latest KEPT_CALLS (a server playing a script may take thousands) */
  readonly calls: RecordedCall[]
}

/** Requests a scripted model keeps in memory; `record` writes every one to a file. */
const KEPT_CALLS = 1000

/** What the scripted model answers a title request with. */
export const SCRIPTED_TITLE = 'Scripted session'

export function loadScript(file: string): Script {
  const path = resolve(file)
  const script = JSON.parse(readFileSync(path, 'utf8')) as Script
  return script.record ? { ...script, record: resolve(dirname(path), script.record) } : script
}

export function createScriptedModel(script: Script, modelId = 'scripted'): ScriptedModel {
  const used = new Map<number, number>()
  let count = 0
  const calls: RecordedCall[] = []
  const record = script.record ?? process.env.CHRONICLE_SCRIPT_LOG
  const keepCalls = script.respond === undefined

  const choose = (request: ScriptRequest): ScriptReply | undefined => {
    const steps = script.steps ?? []
    for (let i = 0; i < steps.length; i++) {
      const step = steps[i] as ScriptStep
      const limit = step.times ?? (step.when ? Infinity : 1)
      if ((used.get(i) ?? 0) >= limit || !matches(step.when, request)) continue
      used.set(i, (used.get(i) ?? 0) + 1)
      return step
    }
    return script.respond?.(request)
  }

  return {
    specificationVersion: 'v3',
    provider: 'scripted',
    modelId,
    supportedUrls: {},
    calls,
    async doGenerate() {
      throw new Error('the scripted model only streams')
    },
    async doStream(options: LanguageModelV3CallOptions) {
      // A title request (src/runtime/titles.ts) is answered here: scripts need not script titles, and it plays no step.
      const system = options.prompt[0]
      if (system?.role === 'system' && system.content === TITLE_SYSTEM)
        return { stream: play({ text: SCRIPTED_TITLE }, script, options.abortSignal) }
      const call = count++
      const entry: RecordedCall = {
        call,
        prompt: options.prompt,
        tools: (options.tools ?? []).map((t) => t.name),
        ...(options.toolChoice && { toolChoice: options.toolChoice.type }),
        ...((options.maxOutputTokens ?? options.temperature ?? options.topP) !== undefined && {
          settings: {
            ...(options.maxOutputTokens !== undefined && { maxOutputTokens: options.maxOutputTokens }),
            ...(options.temperature !== undefined && { temperature: options.temperature }),
            ...(options.topP !== undefined && { topP: options.topP }),
          },
        }),
      }
      if (keepCalls && calls.push(entry) > KEPT_CALLS) calls.shift()
      if (record) appendFileSync(record, `${JSON.stringify(entry)}\n`)
      const request = describe(options.prompt, call)
      const reply = choose(request)
      if (!reply) {
        throw new APICallError({
          message: `scripted model: no step matches call ${call} (turn ${request.turn}, afterToolResult ${request.afterToolResult})`,
          url: 'scripted://model',
          requestBodyValues: {},
          statusCode: 404,
          isRetryable: false,
        })
      }
      if (reply.error) throw scriptedError(reply.error)
      // Like a real model, it makes no tool calls when tool choice is none (the finish reason stays as scripted).
      const played = options.toolChoice?.type === 'none' ? { ...reply, toolCalls: [] } : reply
      return { stream: play(played, script, options.abortSignal) }
    },
  }
}

function matches(when: ScriptMatch | undefined, r: ScriptRequest): boolean {
  if (!when) return true
  if (when.turn !== undefined && when.turn !== r.turn) return false
  if (when.afterToolResult !== undefined && when.afterToolResult !== r.afterToolResult) return false
  if (when.userContains !== undefined && !r.lastUserText.includes(when.userContains)) return false
  if (when.call !== undefined && when.call !== r.call) return false
  return true
}

function describe(prompt: LanguageModelV3Prompt, call: number): ScriptRequest {
  let lastUserText = ''
  for (let i = prompt.length - 1; i >= 0; i--) {
    const m = prompt[i]
    if (m?.role !== 'user') continue
    lastUserText = m.content.map((p) => (p.type === 'text' ? p.text : '')).join('')
    break
  }
  const last = prompt[prompt.length - 1]
  let turn: number | undefined
  return {
    call,
    // counted on demand: a long conversation's benchmark script never asks
    get turn() {
      turn ??= Math.max(prompt.filter((m) => m.role === 'user').length - 1, 0)
      return turn
    },
    afterToolResult: last?.role === 'tool',
    lastUserText,
    prompt,
  }
}

function scriptedError(e: NonNullable<ScriptReply['error']>): APICallError {
  const overflow = e.kind === 'context_overflow'
  const status = e.status ?? (overflow ? 400 : 500)
  const message =
    e.message ??
    (overflow
      ? "context_length_exceeded: This model's maximum context length was exceeded"
      : `scripted error ${status}`)
  return new APICallError({
    message,
    url: 'scripted://model',
    requestBodyValues: {},
    statusCode: status,
    ...(e.retryAfterMs !== undefined && { responseHeaders: { 'retry-after-ms': String(e.retryAfterMs) } }),
    responseBody: message,
    isRetryable: status === 429 || status >= 500,
  })
}

function chunks(text: string, size: number): string[] {
  const out: string[] = []
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size))
  return out
}

let freshIds = 0
/** Unique across restarts of the process too: time-prefixed. */
const freshCallId = (): string => `call_${Date.now().toString(36)}${(freshIds++).toString(36)}`

function parts(reply: ScriptReply, size: number, fresh?: () => string): LanguageModelV3StreamPart[] {
  const out: LanguageModelV3StreamPart[] = [{ type: 'stream-start', warnings: [] }]
  if (reply.reasoning) {
    out.push({ type: 'reasoning-start', id: 'r0' })
    for (const delta of chunks(reply.reasoning, size)) out.push({ type: 'reasoning-delta', id: 'r0', delta })
    out.push({ type: 'reasoning-end', id: 'r0' })
  }
  if (reply.text) {
    out.push({ type: 'text-start', id: 't0' })
    for (const delta of chunks(reply.text, size)) out.push({ type: 'text-delta', id: 't0', delta })
    out.push({ type: 'text-end', id: 't0' })
  }
  ;(reply.toolCalls ?? []).forEach((c, i) => {
    const id = c.id ?? fresh?.() ?? `call_scripted_${i}`
    const input = c.rawInput ?? JSON.stringify(c.input ?? {})
    out.push({ type: 'tool-input-start', id, toolName: c.name })
    for (const delta of chunks(input, size)) out.push({ type: 'tool-input-delta', id, delta })
    out.push({ type: 'tool-input-end', id })
    out.push({ type: 'tool-call', toolCallId: id, toolName: c.name, input })
  })
  const finish = reply.finish ?? ((reply.toolCalls ?? []).length > 0 ? 'tool-calls' : 'stop')
  out.push({
    type: 'finish',
    finishReason: { unified: finish, raw: finish },
    usage: {
      inputTokens: { total: reply.usage?.input ?? 0, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: reply.usage?.output ?? 0, text: undefined, reasoning: undefined },
    },
  })
  return out
}

const PACED = new Set(['text-delta', 'reasoning-delta', 'tool-input-delta'])

function play(
  reply: ScriptReply,
  script: Script,
  signal: AbortSignal | undefined,
): ReadableStream<LanguageModelV3StreamPart> {
  const queue = parts(reply, script.chunkSize ?? 16, script.uniqueCallIds ? freshCallId : undefined)
  const delay = reply.delayMs ?? script.delayMs ?? 0
  const paced = (part: LanguageModelV3StreamPart) => script.pace !== 'deltas' || PACED.has(part.type)
  // Chunks keep the model's own schedule, one every `delay` ms from the
  // first, as a provider's do: they are pushed into the stream when due, and
  // a reader that falls behind finds the chunks it is late for waiting (as in
  // a socket's buffer). Pushed, not pulled: a chunk costs one wake and one
  // enqueue, not a pull's promises.
  let i = 0
  let due: number | undefined
  /** the part whose due time is set: a woken part is played, not delayed again */
  let timed = -1
  let over = false
  let controller: ReadableStreamDefaultController<LanguageModelV3StreamPart>
  const abort = () => {
    if (over) return
    over = true
    controller.error(signal?.reason ?? new DOMException('aborted', 'AbortError'))
  }
  const advance = (): void => {
    while (!over) {
      const next = queue[i]
      if (next === undefined) {
        over = true
        signal?.removeEventListener('abort', abort)
        controller.close()
        return
      }
      if (timed !== i && paced(next)) {
        timed = i
        if (due === undefined)
          due = performance.now() // the first paced part: at once
        else if (delay > 0) {
          due += delay
          if (due > performance.now()) return wakeAt(due, advance)
        }
      }
      i++
      controller.enqueue(next)
    }
  }
  return new ReadableStream({
    start(c) {
      controller = c
      if (signal?.aborted) return abort()
      signal?.addEventListener('abort', abort, { once: true })
      advance()
    },
    cancel() {
      over = true
      signal?.removeEventListener('abort', abort)
    },
  })
}
