import type { Message, Part } from './model.js'

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
