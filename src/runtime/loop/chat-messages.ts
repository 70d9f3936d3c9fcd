import type { FilePart, Message, Part, SessionView, ToolPart } from '../../projections/fold/model.js'
import { ACCEPTS_ALL, type Accepted } from '../model/adapter.js'

/**
 * History → model messages. The read model is turned into the chat the model
 * sees, with one guarantee providers insist on: every tool call is followed
 * by exactly one result before the next message. Calls that never finished
 * (interrupted, aborted, denied, invalid, still pending) get a synthetic error
 * result; results without a call cannot arise, and a repeated call id is
 * dropped so no result is ever orphaned or doubled.
 *
 * The types are a structural subset of the AI SDK's ModelMessage, declared
 * here so that only the adapter imports `ai`.
 */

export type ChatUserPart =
  | { type: 'text'; text: string }
  | { type: 'file'; data: string; mediaType: string; filename?: string }
export type ChatAssistantPart =
  | { type: 'text'; text: string }
  | { type: 'reasoning'; text: string; providerOptions: Record<string, Record<string, unknown>> }
  | { type: 'tool-call'; toolCallId: string; toolName: string; input: unknown }
export interface ChatToolResult {
  type: 'tool-result'
  toolCallId: string
  toolName: string
  output:
    | { type: 'text' | 'error-text'; value: string }
    | {
        type: 'content'
        value: ({ type: 'text'; text: string } | { type: 'image-data'; data: string; mediaType: string })[]
      }
}

/** What a conversion depends on besides the history: the step's model, and the blob store. */
export interface ChatOptions {
  /** what the model takes besides text (recorded on step.started: docs/AUDIT.md) */
  readonly accepts: readonly Accepted[]
  /** a blob's content: files read at submit */
  readonly read?: (hash: string) => string | undefined
}

export const DEFAULT_CHAT: ChatOptions = { accepts: ACCEPTS_ALL }

export type ChatMessage =
  | { role: 'user'; content: ChatUserPart[] }
  | { role: 'assistant'; content: ChatAssistantPart[] }
  | { role: 'tool'; content: ChatToolResult[] }

export const STEER_PREFIX = '<system-reminder>\nThe user sent the following message:\n'
export const STEER_SUFFIX = '\n\nPlease address this message and continue with your tasks.\n</system-reminder>'

/**
 * The input id of a sub-agent's report to its parent (src/runtime/subagents/orphans.ts): a system reminder
 * the runtime wrote, so a steered one is not presented as the user's message.
 */
export const SUBTASK_REPORT_PREFIX = 'subtask:'

export const SUMMARY_PREFIX =
  '<system-reminder>\nThe earlier part of this conversation was compacted. This is a summary written for you to continue from; ' +
  'it is not a new request from the user.\n<summary>\n'
export const SUMMARY_SUFFIX = '\n</summary>\n</system-reminder>'

/**
 * The messages of a view the model should see, oldest first: after the latest
 * completed compaction, and none a revert hid.
 */
export function visibleMessages(view: SessionView): Message[] {
  const c = view.session?.compaction?.applied
  // Summaries other than the applied one (in flight, failed, superseded) are never replayed.
  const all = [...view.messages.values()]
    .filter((m) => !m.reverted && (!m.summary || m.id === c?.summaryMessageId))
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  if (!c) return all
  const summary = all.find((m) => m.id === c.summaryMessageId)
  const tail = c.tailStartMessageId
  const kept = all.filter(
    (m) => m.id !== c.summaryMessageId && (m.id > c.summaryMessageId || (tail !== undefined && m.id >= tail)),
  )
  return summary ? [summary, ...kept] : kept
}

/** Parts grouped by message, each group in id (creation) order. */
export function partsByMessage(view: SessionView): Map<string, Part[]> {
  const out = new Map<string, Part[]>()
  for (const p of view.parts.values()) {
    const list = out.get(p.messageId)
    if (list) list.push(p)
    else out.set(p.messageId, [p])
  }
  for (const list of out.values()) list.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  return out
}

export function toChatMessages(view: SessionView, options: ChatOptions = DEFAULT_CHAT): ChatMessage[] {
  const parts = partsByMessage(view)
  const out: ChatMessage[] = []
  const seenCalls = new Set<string>()
  for (const message of visibleMessages(view))
    out.push(...messageToChat(message, parts.get(message.id) ?? [], seenCalls, options).chat)
  return out
}

/**
 * One message (its parts in id order) as chat messages: a user message, or
 * an assistant message followed by the results of its calls. Call ids in
 * `seenCalls` are dropped; the ones this message adds are returned.
 */
export function messageToChat(
  message: Message,
  own: readonly Part[],
  seenCalls: Set<string>,
  options: ChatOptions = DEFAULT_CHAT,
): { chat: ChatMessage[]; calls: string[] } {
  if (message.summary) {
    // The summary stands in for the compacted head; sent as user context so the request still starts with the user.
    const text = own.map((p) => (p.type === 'text' ? p.text : '')).join('')
    return {
      chat: [{ role: 'user', content: [{ type: 'text', text: `${SUMMARY_PREFIX}${text}${SUMMARY_SUFFIX}` }] }],
      calls: [],
    }
  }
  if (message.role === 'user') {
    const steered = message.steered === true && !message.inputId?.startsWith(SUBTASK_REPORT_PREFIX)
    const content = userContent(own, steered, options)
    return { chat: content.length > 0 ? [{ role: 'user', content }] : [], calls: [] }
  }
  const chat: ChatMessage[] = []
  const content: ChatAssistantPart[] = []
  const results: ChatToolResult[] = []
  const calls: string[] = []
  for (const p of own) {
    // reasoning goes back only with the provider's metadata for it: what a provider that needs it checks
    if (p.type === 'reasoning' && p.providerMetadata)
      content.push({ type: 'reasoning', text: p.text, providerOptions: p.providerMetadata })
    if (p.type === 'text' && p.text.length > 0) content.push({ type: 'text', text: p.text })
    if (p.type !== 'tool' || seenCalls.has(p.callId)) continue
    seenCalls.add(p.callId)
    calls.push(p.callId)
    content.push({ type: 'tool-call', toolCallId: p.callId, toolName: p.tool, input: toolInput(p) })
    results.push({ type: 'tool-result', toolCallId: p.callId, toolName: p.tool, output: toolOutput(p, options) })
  }
  if (content.length > 0) chat.push({ role: 'assistant', content })
  if (results.length > 0) chat.push({ role: 'tool', content: results })
  return { chat, calls }
}

function userContent(parts: readonly Part[], steered: boolean, options: ChatOptions): ChatUserPart[] {
  const content: ChatUserPart[] = []
  for (const p of parts) {
    if (p.type === 'text')
      content.push({ type: 'text', text: steered ? `${STEER_PREFIX}${p.text}${STEER_SUFFIX}` : p.text })
    if (p.type === 'file') content.push(fileContent(p, options))
  }
  return content
}

/** The kind of non-text content a media type is, if the model may take it. */
function kindOf(mediaType: string): Accepted | undefined {
  return mediaType.startsWith('image/') ? 'image' : mediaType === 'application/pdf' ? 'pdf' : undefined
}

/**
 * A file part as the model gets it: text read at submit inline; an image or
 * PDF as a file when the model takes it, else a short note; a part with no
 * content (a URL, a blob the store lacks) as its name.
 */
function fileContent(p: FilePart, options: ChatOptions): ChatUserPart {
  const name = p.path ?? p.url ?? p.filename ?? 'unnamed'
  const stored = p.blob === undefined ? undefined : options.read?.(p.blob)
  if (stored !== undefined && p.encoding === 'utf8')
    return { type: 'text', text: `<file path="${name}" type="${p.mediaType ?? 'text/plain'}">\n${stored}\n</file>` }
  const data =
    stored !== undefined && p.mediaType
      ? `data:${p.mediaType};base64,${stored}`
      : p.url?.startsWith('data:') && p.mediaType
        ? p.url
        : undefined
  if (data === undefined || !p.mediaType) return { type: 'text', text: `[attached file: ${name}]` }
  const kind = kindOf(p.mediaType)
  if (kind && options.accepts.includes(kind))
    return { type: 'file', data, mediaType: p.mediaType, ...(p.filename && { filename: p.filename }) }
  return {
    type: 'text',
    text: `[attached file: ${name} (${p.mediaType}${p.size === undefined ? '' : `, ${p.size} bytes`}); this model does not take ${kind ? `${kind}s` : 'this type'}]`,
  }
}

function toolInput(p: ToolPart): unknown {
  if (p.input !== undefined && p.input !== null && typeof p.input === 'object') return p.input
  try {
    const parsed = JSON.parse(p.rawInput) as unknown
    if (parsed !== null && typeof parsed === 'object') return parsed
  } catch {
    // fall through: the model sent something that is not a JSON object
  }
  return {}
}

const INTERRUPTED = 'Error: [Tool execution was interrupted before it returned a result]'

/** What the model is sent instead of a pruned output (docs/COMPACTION.md "Pruning"): which call it was. */
export function prunedMarker(p: ToolPart): string {
  return `[Old tool result content cleared: ${p.title ? `${p.tool} ${p.title}` : p.tool}]`
}

function toolOutput(p: ToolPart, options: ChatOptions): ChatToolResult['output'] {
  if (p.state === 'completed' && p.pruned) return { type: 'text', value: prunedMarker(p) }
  if (p.state === 'completed') {
    const images = (p.attachments ?? []).filter((a) => a.type === 'image' && a.data !== undefined)
    if (images.length === 0) return { type: 'text', value: p.output ?? '' }
    if (!options.accepts.includes('image')) {
      const note = `[the tool returned ${images.length} image${images.length > 1 ? 's' : ''}; this model does not take images]`
      return { type: 'text', value: p.output ? `${p.output}\n${note}` : note }
    }
    return {
      type: 'content',
      value: [
        ...(p.output ? [{ type: 'text' as const, text: p.output }] : []),
        ...images.map((a) => ({
          type: 'image-data' as const,
          data: a.data as string,
          mediaType: a.mediaType ?? 'image/png',
        })),
      ],
    }
  }
  if (p.state === 'error' && p.error) {
    const prefix = p.error.kind === 'interrupted' ? INTERRUPTED : `Error (${p.error.kind})`
    return {
      type: 'error-text',
      value: p.error.kind === 'interrupted' ? `${prefix} ${p.error.message}`.trim() : `${prefix}: ${p.error.message}`,
    }
  }
  return { type: 'error-text', value: INTERRUPTED }
}
