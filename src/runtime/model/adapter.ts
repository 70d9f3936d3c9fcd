import {
  APICallError,
  type JSONSchema7,
  type LanguageModelV3,
  type LanguageModelV3FunctionTool,
  type LanguageModelV3Message,
  type LanguageModelV3Prompt,
  type LanguageModelV3StreamPart,
  type LanguageModelV3Usage,
  type SharedV3ProviderOptions,
} from '@ai-sdk/provider'
import type { Usage } from '../../events/catalogue.js'
import type { ChatMessage } from '../loop/chat-messages.js'
import type { ModelPrice, ModelSettings } from './pricing.js'
import { StallWatch } from './stall-watch.js'

/**
 * The model adapter: the one module (with providers.ts and scripted-model.ts)
 * that speaks the AI SDK. One call = one model step: the provider model's
 * `doStream` with the tools' schemas (the runtime executes them) and no
 * retries (those are the runtime's, recorded as step.retried). Every stream
 * part becomes a neutral `StepPart` the step recorder turns into events.
 */

export type LanguageModel = LanguageModelV3

/** What a provider attaches to a part, by provider name (replayed to it with the part). */
export type ProviderMetadata = Record<string, Record<string, unknown>>

/** A model the runtime can call, with the configuration string it came from. */
export interface ModelHandle {
  readonly spec: string
  readonly model: LanguageModel
  /** applied to every call, and recorded on step.started */
  readonly settings?: ModelSettings
  /** gives each step its cost */
  readonly price?: ModelPrice
  /** what it takes besides text: images and PDFs (default both); others reach it as a short note */
  readonly accepts?: readonly Accepted[]
}

export type Accepted = 'image' | 'pdf'
export const ACCEPTS_ALL: readonly Accepted[] = ['image', 'pdf']

/** Resolves configuration strings (`openai:<id>`, `compatible:<id>`, `scripted:<file>`) to models. */
export interface ModelResolver {
  /** throws ChronicleError UNKNOWN_MODEL when `spec` cannot name a model */
  validate(spec: string): void
  /** the model for `spec`, or the configured default when null; undefined when none is configured */
  resolve(spec: string | null): ModelHandle | undefined
}

export interface ToolSpec {
  readonly name: string
  readonly description: string
  /** JSON schema of the arguments */
  readonly parameters: Record<string, unknown>
}

/** Exactly what is sent to the model; its digest is step.started's contextDigest. */
export interface ModelRequest {
  readonly system: string
  readonly messages: readonly ChatMessage[]
  readonly tools: readonly ToolSpec[]
  readonly toolChoice: 'auto' | 'none'
}

export interface ModelFailure {
  readonly kind: 'rate_limited' | 'server' | 'network' | 'context_overflow' | 'provider' | 'stalled'
  readonly message: string
  readonly retryable: boolean
  readonly status?: number
  /** from retry-after-ms / retry-after */
  readonly retryAfterMs?: number
}

export type StepPart =
  | { type: 'text-start' | 'reasoning-start'; id: string }
  | { type: 'text-delta' | 'reasoning-delta'; id: string; text: string }
  | { type: 'text-end'; id: string }
  | { type: 'reasoning-end'; id: string; providerMetadata?: ProviderMetadata }
  | { type: 'tool-input-start'; callId: string; tool: string }
  | { type: 'tool-input-delta'; callId: string; delta: string }
  | { type: 'tool-call'; callId: string; tool: string; input: unknown; rawInput: string }
  | { type: 'finish'; finishReason: string; usage: Usage }
  | { type: 'error'; failure: ModelFailure }
  | { type: 'aborted' }

/**
 * Reads one model step, handing each part to `onPart` as it arrives. Never
 * throws for model or HTTP failures: they arrive as an `error` part. A
 * callback, not an async iterator: a streamed delta then costs no promise
 * hops of its own between the provider's stream and the events.
 */
export async function readModelStep(
  handle: ModelHandle,
  request: ModelRequest,
  signal: AbortSignal,
  onPart: (part: StepPart) => void,
  /** a stream silent this long (before its response too) is cancelled as a retryable `stalled` failure; 0: never */
  stallMs = 0,
): Promise<void> {
  // The provider's own stream, read in one pass: streamText would pipe each
  // part through some ten web-stream stages (its retries, tool execution and
  // callbacks are all unused here), measured as most of the server's CPU per
  // streamed delta (`npm run bench -- stream`).
  const tools = request.tools.length > 0 ? request.tools.map(functionTool) : undefined
  // With tool choice none, tool parts a provider sends anyway are dropped and the step fails, as streamText does.
  const toolsOff = request.toolChoice === 'none'
  let reader: ReadableStreamDefaultReader<LanguageModelV3StreamPart> | undefined
  const watch = stallMs > 0 ? new StallWatch(stallMs, signal) : undefined
  // what the provider's call is aborted by: the caller's signal, or silence
  const active = watch?.signal ?? signal
  const cancel = () => void reader?.cancel(active.reason).catch(() => {})
  const stalled = (): StepPart => ({
    type: 'error',
    failure: { kind: 'stalled', message: `the model sent nothing for ${stallMs / 1000} s`, retryable: true },
  })
  // Only the provider's calls fail as a part: what onPart throws is the caller's own.
  const failed = (err: unknown): StepPart =>
    signal.aborted ? { type: 'aborted' } : watch?.stalled ? stalled() : { type: 'error', failure: classify(err) }
  active.addEventListener('abort', cancel, { once: true })
  try {
    if (signal.aborted) return onPart({ type: 'aborted' })
    let stream: ReadableStream<LanguageModelV3StreamPart>
    try {
      ;({ stream } = await handle.model.doStream({
        prompt: providerPrompt(request),
        ...(tools && { tools, toolChoice: { type: request.toolChoice } }),
        ...handle.settings,
        abortSignal: active,
      }))
    } catch (err) {
      return onPart(failed(err))
    }
    reader = stream.getReader()
    if (active.aborted) cancel()
    // a reasoning part's provider metadata may come with its start, a delta (a signature) or its end
    const metadata = new Map<string, ProviderMetadata>()
    const keep = (id: string, m: ProviderMetadata | undefined) => {
      if (!m) return
      const merged = { ...metadata.get(id) }
      for (const [provider, fields] of Object.entries(m)) merged[provider] = { ...merged[provider], ...fields }
      metadata.set(id, merged)
    }
    let violated = false
    for (;;) {
      let read: ReadableStreamReadResult<LanguageModelV3StreamPart>
      try {
        read = await reader.read()
      } catch (err) {
        return onPart(failed(err))
      }
      if (read.done) break
      watch?.touch()
      const part = read.value
      switch (part.type) {
        case 'text-start':
        case 'text-end':
          onPart({ type: part.type, id: part.id })
          break
        case 'reasoning-start':
          keep(part.id, part.providerMetadata as ProviderMetadata | undefined)
          onPart({ type: part.type, id: part.id })
          break
        case 'reasoning-end': {
          keep(part.id, part.providerMetadata as ProviderMetadata | undefined)
          const kept = metadata.get(part.id)
          metadata.delete(part.id)
          onPart({ type: 'reasoning-end', id: part.id, ...(kept && { providerMetadata: kept }) })
          break
        }
        case 'text-delta':
          if (part.delta.length > 0) onPart({ type: part.type, id: part.id, text: part.delta })
          break
        case 'reasoning-delta':
          keep(part.id, part.providerMetadata as ProviderMetadata | undefined)
          if (part.delta.length > 0) onPart({ type: part.type, id: part.id, text: part.delta })
          break
        case 'tool-input-start':
          if (!toolsOff) onPart({ type: 'tool-input-start', callId: part.id, tool: part.toolName })
          break
        case 'tool-input-delta':
          if (!toolsOff) onPart({ type: 'tool-input-delta', callId: part.id, delta: part.delta })
          break
        case 'tool-call':
          if (toolsOff) violated = true
          else onPart(toolCall(part.toolCallId, part.toolName, part.input, request.tools))
          break
        case 'finish':
          if (violated) {
            const message = 'the model called a tool in a step that allowed none'
            onPart({ type: 'error', failure: { kind: 'provider', message, retryable: false } })
          }
          onPart({
            type: 'finish',
            finishReason: violated ? 'error' : part.finishReason.unified,
            usage: usageOf(part.usage),
          })
          break
        case 'error':
          onPart({ type: 'error', failure: classify(part.error) })
          break
        default:
          // stream-start, tool-input-end, provider-executed tool results, files, sources, response metadata, raw
          break
      }
    }
    if (signal.aborted) onPart({ type: 'aborted' })
    else if (watch?.stalled) onPart(stalled())
  } finally {
    watch?.close()
    active.removeEventListener('abort', cancel)
    // a step that ends early (onPart threw) leaves the provider's stream unread: release it
    reader?.cancel().catch(() => {})
  }
}

function functionTool(t: ToolSpec): LanguageModelV3FunctionTool {
  return { type: 'function', name: t.name, description: t.description, inputSchema: t.parameters as JSONSchema7 }
}

/**
 * A whole call, its input parsed as streamText parses it: empty input is `{}`
 * for a known tool; input that is not JSON, or a call to an unknown tool, is
 * passed on as the model wrote it for the runtime to judge.
 */
function toolCall(callId: string, tool: string, text: string, tools: readonly ToolSpec[]): StepPart {
  const known = tools.some((t) => t.name === tool)
  let input: unknown = text
  if (known && text.trim() === '') input = {}
  else {
    try {
      input = JSON.parse(text)
    } catch {
      // not JSON: kept as text
    }
  }
  const rawInput = typeof input === 'string' ? input : JSON.stringify(input ?? {})
  return { type: 'tool-call', callId, tool, input, rawInput }
}

function usageOf(u: LanguageModelV3Usage): Usage {
  const out: { -readonly [K in keyof Usage]: Usage[K] } = {}
  if (u.inputTokens.total !== undefined) out.inputTokens = u.inputTokens.total
  if (u.outputTokens.total !== undefined) out.outputTokens = u.outputTokens.total
  if (u.outputTokens.reasoning !== undefined) out.reasoningTokens = u.outputTokens.reasoning
  if (u.inputTokens.cacheRead !== undefined) out.cachedInputTokens = u.inputTokens.cacheRead
  return out
}

const OVERFLOW = /context[_ ]length|maximum context|context window|too many tokens|prompt is too long/i

/** Maps any provider error to a failure the retry policy can judge. */
export function classify(err: unknown): ModelFailure {
  const message = err instanceof Error ? err.message : String(err)
  if (APICallError.isInstance(err)) {
    const status = err.statusCode
    const headers = err.responseHeaders ?? {}
    const retryAfterMs = retryAfter(headers)
    const base = {
      message,
      ...(status !== undefined && { status }),
      ...(retryAfterMs !== undefined && { retryAfterMs }),
    }
    if (OVERFLOW.test(message) || OVERFLOW.test(err.responseBody ?? ''))
      return { ...base, kind: 'context_overflow', retryable: false }
    if (status === 429) return { ...base, kind: 'rate_limited', retryable: true }
    if (status !== undefined && status >= 500) return { ...base, kind: 'server', retryable: true }
    if (status === undefined) return { ...base, kind: 'network', retryable: true }
    return { ...base, kind: 'provider', retryable: err.isRetryable }
  }
  if (OVERFLOW.test(message)) return { kind: 'context_overflow', message, retryable: false }
  const cause = err instanceof Error ? (err.cause as { code?: string } | undefined) : undefined
  if (
    err instanceof TypeError ||
    /ECONNREFUSED|ECONNRESET|ETIMEDOUT|fetch failed|socket hang up/i.test(`${message} ${cause?.code ?? ''}`)
  ) {
    return { kind: 'network', message, retryable: true }
  }
  return { kind: 'provider', message, retryable: false }
}

function retryAfter(headers: Record<string, string | undefined>): number | undefined {
  const ms = headers['retry-after-ms']
  if (ms !== undefined && Number.isFinite(Number(ms))) return Math.max(0, Number(ms))
  const s = headers['retry-after']
  if (s === undefined) return undefined
  if (Number.isFinite(Number(s))) return Math.max(0, Number(s) * 1000)
  const date = Date.parse(s)
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now())
}

const converted = new WeakMap<ChatMessage, LanguageModelV3Message>()

/**
 * The provider-level prompt: system, then every chat message in the V3 form
 * the AI SDK's streamText would produce for it (text, file, tool-call, tool-result parts).
 * Chat messages are reused across steps by the transcript, so each is
 * converted once.
 */
export function providerPrompt(request: ModelRequest): LanguageModelV3Prompt {
  const prompt: LanguageModelV3Message[] = [{ role: 'system', content: request.system }]
  for (const m of request.messages) {
    let v3 = converted.get(m)
    if (!v3) {
      v3 = toProviderMessage(m)
      converted.set(m, v3)
    }
    prompt.push(v3)
  }
  return prompt
}

function toProviderMessage(m: ChatMessage): LanguageModelV3Message {
  switch (m.role) {
    case 'user':
      return {
        role: 'user',
        content: m.content.map((p) => {
          if (p.type === 'text') return { type: 'text', text: p.text }
          const comma = p.data.indexOf(',')
          // a data URL becomes its base64 payload, as the SDK does
          const data = p.data.startsWith('data:') && comma > 0 ? p.data.slice(comma + 1) : new URL(p.data)
          return { type: 'file', data, mediaType: p.mediaType, ...(p.filename && { filename: p.filename }) }
        }),
      }
    case 'assistant':
      return {
        role: 'assistant',
        content: m.content.map((p) =>
          p.type === 'text'
            ? { type: 'text', text: p.text }
            : p.type === 'reasoning'
              ? { type: 'reasoning', text: p.text, providerOptions: p.providerOptions as SharedV3ProviderOptions }
              : { type: 'tool-call', toolCallId: p.toolCallId, toolName: p.toolName, input: p.input },
        ),
      }
    case 'tool':
      return {
        role: 'tool',
        content: m.content.map((r) => ({
          type: 'tool-result',
          toolCallId: r.toolCallId,
          toolName: r.toolName,
          output: r.output,
        })),
      }
  }
}
