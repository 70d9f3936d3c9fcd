import type { Message, Part, SessionView } from './model.js'

/**
 * What a session still has in flight: what settlement closes when a fork
 * starts at an event or a restart cuts a run off (src/commands/settle.ts),
 * and what a fork owns rows for (src/projections/rows/shared-rows.ts). Anything
 * else is settled: it changes again only by a deliberate act (a revert, a
 * late patch), which the projection records as a rewrite.
 */

const SUBTASK_SUFFIX = ':subtask'

/** An open text or reasoning part, a tool call not yet ended, a sub-agent's subtask not yet finished. */
export function partInFlight(part: Part): boolean {
  return (
    ((part.type === 'text' || part.type === 'reasoning') && !part.ended) ||
    (part.type === 'tool' && (part.state === 'pending' || part.state === 'running')) ||
    (part.type === 'subtask' && part.outcome === undefined && part.id.endsWith(SUBTASK_SUFFIX))
  )
}

/** An assistant message not yet completed. */
export function messageInFlight(message: Message): boolean {
  return message.role === 'assistant' && message.completedAt === undefined
}

/** The tool call a subtask part belongs to: its id without the suffix. */
export function subtaskCallPart(part: Part): string {
  return part.id.slice(0, -SUBTASK_SUFFIX.length)
}

/**
 * The view's parts and messages in flight, by id: one pass that keeps only those (a long session has thousands
 * of settled ones and a handful in flight, so a fork's cost stays that of what is open).
 */
export function inFlight(view: SessionView): { parts: Part[]; messages: Message[] } {
  const parts: Part[] = []
  const messages: Message[] = []
  for (const p of view.parts.values()) if (partInFlight(p)) parts.push(p)
  for (const m of view.messages.values()) if (messageInFlight(m)) messages.push(m)
  return { parts: parts.sort(byId), messages: messages.sort(byId) }
}

function byId(a: { id: string }, b: { id: string }): number {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0
}
