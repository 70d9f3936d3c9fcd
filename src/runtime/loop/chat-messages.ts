import type { Message, Part, SessionView, ToolPart } from '../../projections/model.js'

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
  | { type: 'tool-call'; toolCallId: string; toolName: string; input: unknown }
export interface ChatToolResult {
  type: 'tool-result'
  toolCallId: string
  toolName: string
  output: { type: 'text' | 'error-text'; value: string }
}

export type ChatMessage =
  | { role: 'user'; content: ChatUserPart[] }
  | { role: 'assistant'; content: ChatAssistantPart[] }
  | { role: 'tool'; content: ChatToolResult[] }

export const STEER_PREFIX = '<system-reminder>\nThe user sent the following message:\n'
export const STEER_SUFFIX = '\n\nPlease address this message and continue with your tasks.\n</system-reminder>'

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

export function toChatMessages(view: SessionView): ChatMessage[] {
  const parts = partsByMessage(view)
  const out: ChatMessage[] = []
  const seenCalls = new Set<string>()
  for (const message of visibleMessages(view))
    out.push(...messageToChat(message, parts.get(message.id) ?? [], seenCalls).chat)
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
    const content = userContent(own, message.steered === true)
    return { chat: content.length > 0 ? [{ role: 'user', content }] : [], calls: [] }
  }
  const chat: ChatMessage[] = []
  const content: ChatAssistantPart[] = []
  const results: ChatToolResult[] = []
  const calls: string[] = []
  for (const p of own) {
    if (p.type === 'text' && p.text.length > 0) content.push({ type: 'text', text: p.text })
    if (p.type !== 'tool' || seenCalls.has(p.callId)) continue
    seenCalls.add(p.callId)
    calls.push(p.callId)
    content.push({ type: 'tool-call', toolCallId: p.callId, toolName: p.tool, input: toolInput(p) })
    results.push({ type: 'tool-result', toolCallId: p.callId, toolName: p.tool, output: toolOutput(p) })
  }
  if (content.length > 0) chat.push({ role: 'assistant', content })
  if (results.length > 0) chat.push({ role: 'tool', content: results })
  return { chat, calls }
}

function userContent(parts: readonly Part[], steered: boolean): ChatUserPart[] {
  const content: ChatUserPart[] = []
  for (const p of parts) {
    if (p.type === 'text')
      content.push({ type: 'text', text: steered ? `${STEER_PREFIX}${p.text}${STEER_SUFFIX}` : p.text })
    if (p.type === 'file') {
      if (p.url?.startsWith('data:') && p.mediaType) {
        content.push({ type: 'file', data: p.url, mediaType: p.mediaType, ...(p.filename && { filename: p.filename }) })
      } else {
        content.push({ type: 'text', text: `[attached file: ${p.path ?? p.url ?? p.filename ?? 'unnamed'}]` })
      }
    }
  }
  return content
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

function toolOutput(p: ToolPart): ChatToolResult['output'] {
  if (p.state === 'completed') return { type: 'text', value: p.output ?? '' }
  if (p.state === 'error' && p.error) {
    const prefix = p.error.kind === 'interrupted' ? INTERRUPTED : `Error (${p.error.kind})`
    return {
      type: 'error-text',
      value: p.error.kind === 'interrupted' ? `${prefix} ${p.error.message}`.trim() : `${prefix}: ${p.error.message}`,
    }
  }
  return { type: 'error-text', value: INTERRUPTED }
}
