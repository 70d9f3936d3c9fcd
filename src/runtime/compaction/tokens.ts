import type { Usage } from '../../events/catalogue.js'
import type { Message, Part, SessionView, ToolPart } from '../../projections/fold/model.js'
import { partsByMessage, prunedMarker, visibleMessages } from '../loop/chat-messages.js'
import type { ModelRequest } from '../model/adapter.js'

/**
 * Token accounting (docs/COMPACTION.md). The provider's usage is
 * the truth when it sent one; otherwise — and for whatever was added since —
 * an estimate of about four characters per token. Estimates are recorded with
 * `estimated: true` so an audit can tell them from billed counts.
 */

export const CHARS_PER_TOKEN = 4

export function estimateTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN)
}

/** The whole request as the provider would count it: system, tool definitions, messages. */
export function estimateRequest(request: Pick<ModelRequest, 'system' | 'messages' | 'tools'>): number {
  return (
    estimateTokens(request.system) +
    estimateTokens(JSON.stringify(request.tools)) +
    estimateTokens(JSON.stringify(request.messages))
  )
}

/** One message's content: text, tool inputs and outputs (file attachments count a flat amount). */
export function estimateMessage(parts: readonly Part[]): number {
  let tokens = 4 // role and framing
  for (const p of parts) tokens += estimatePart(p)
  return tokens
}

const FILE_TOKENS = 1500

export function estimatePart(p: Part): number {
  switch (p.type) {
    case 'text':
      return estimateTokens(p.text)
    case 'file':
      return p.url?.startsWith('data:') ? FILE_TOKENS : 10
    case 'tool':
      return estimateTokens(p.tool) + estimateTokens(p.rawInput) + estimateTokens(sentOutput(p)) + 8
    default:
      return 0 // reasoning is not replayed; step markers and subtask links are not sent
  }
}

/** The text of a tool's result the model is sent: its output, its error, or the marker that replaced it. */
export function sentOutput(p: ToolPart): string {
  return p.pruned && p.state === 'completed' ? prunedMarker(p) : (p.output ?? p.error?.message ?? '')
}

/** Input + output of a provider usage, or undefined when the provider reported none. */
export function reportedTokens(usage: Usage | undefined): number | undefined {
  if (!usage || usage.estimated || !usage.inputTokens) return undefined
  return usage.inputTokens + (usage.outputTokens ?? 0)
}

/**
 * The usage a step records: the provider's when it reported input tokens,
 * else an estimate of the request and of what the model produced.
 */
export function completeUsage(usage: Usage, request: ModelRequest, outputChars: number): Usage {
  if (usage.inputTokens) return usage
  return {
    ...usage,
    inputTokens: estimateRequest(request),
    outputTokens: usage.outputTokens || Math.ceil(outputChars / CHARS_PER_TOKEN),
    estimated: true,
  }
}

export interface ContextSize {
  readonly tokens: number
  /** 'usage' when anchored on the provider's count of the last step, 'estimate' otherwise */
  readonly source: 'usage' | 'estimate'
}

/**
 * How big the next request is: the latest visible assistant message the
 * provider counted (its input + output), plus an estimate of everything the
 * model has not seen yet (that message's tool results, later messages) — or,
 * with no usage to anchor on, an estimate of the whole request.
 */
export function contextSize(view: SessionView, fixed: { system: string; tools: readonly unknown[] }): ContextSize {
  const visible = visibleMessages(view)
  const parts = partsByMessage(view)
  // Usage from before the latest compaction counted the compacted head, and from before the latest pruning
  // the pruned outputs: it is no anchor.
  let since = view.session?.compaction?.applied?.summaryMessageId ?? ''
  const pruned = view.session?.pruned?.throughMessageId
  if (pruned !== undefined && pruned > since) since = pruned
  let anchor: Message | undefined
  for (const m of visible)
    if (m.role === 'assistant' && !m.summary && m.id > since && reportedTokens(m.usage) !== undefined) anchor = m
  if (anchor) {
    let tokens = reportedTokens(anchor.usage) as number
    for (const p of parts.get(anchor.id) ?? []) if (p.type === 'tool') tokens += estimateTokens(sentOutput(p))
    for (const m of visible) if (m.id > anchor.id) tokens += estimateMessage(parts.get(m.id) ?? [])
    return { tokens, source: 'usage' }
  }
  let tokens = estimateTokens(fixed.system) + estimateTokens(JSON.stringify(fixed.tools))
  for (const m of visible) tokens += estimateMessage(parts.get(m.id) ?? [])
  return { tokens, source: 'estimate' }
}
