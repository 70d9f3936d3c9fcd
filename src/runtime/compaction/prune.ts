import type { DataOf } from '../../events/catalogue.js'
import type { Message, SessionView } from '../../projections/fold/model.js'
import { prunedMarker } from '../loop/chat-messages.js'
import type { Budget, PruneConfig } from './config.js'
import { estimateTokens } from './tokens.js'

/**
 * Lean context (docs/COMPACTION.md "Pruning"; OpenCode's prune): before a step, the outputs of completed
 * tool calls older than the most recent `protect` tokens of tool output are no longer sent to the model —
 * each becomes a short marker naming the call — once that saves at least `minimum` tokens. The last two
 * turns are never pruned (the model is working on them), nor is what the `skill` tool loaded (instructions
 * the model asked for). The decision is recorded (context.pruned) and folded into the parts, so the context
 * at any seq, and `audit`, rebuild exactly what was sent; the outputs stay in the log.
 */

/** Tools whose output is instructions, not data: never pruned. */
const PROTECTED_TOOLS: ReadonlySet<string> = new Set(['skill'])

/** At most this many outputs per context.pruned (its schema's bound). */
const MAX_PARTS = 10_000

/** Turns at the end of the history whose outputs are always sent. */
const RECENT_TURNS = 2

/**
 * The limits for a model: at most a quarter of its usable window protected and an eighth awaited, so
 * that pruning starts well before the window is full (128k: 27 200 and 13 600) — with a window
 * smaller than the defaults assume, outputs would otherwise never be pruned before a compaction.
 */
export function pruneLimits(config: PruneConfig, budget: Budget | undefined): { protect: number; minimum: number } {
  if (!budget) return { protect: config.protect, minimum: config.minimum }
  return {
    protect: Math.min(config.protect, Math.floor(budget.usable / 4)),
    minimum: Math.min(config.minimum, Math.floor(budget.usable / 8)),
  }
}

/**
 * What to prune now, or undefined when it would save less than `minimum` tokens. Pure, and one pass over
 * the parts without sorting the history: it runs before every step.
 */
export function prunable(
  view: SessionView,
  limits: { readonly protect: number; readonly minimum: number },
): DataOf<'context.pruned'> | undefined {
  const applied = view.session?.compaction?.applied
  const sent = (m: Message | undefined): m is Message =>
    m !== undefined &&
    !m.reverted &&
    !m.summary &&
    (!applied ||
      m.id > applied.summaryMessageId ||
      (applied.tailStartMessageId !== undefined && m.id >= applied.tailStartMessageId))
  // the last RECENT_TURNS user messages: what follows the older of them is never pruned
  const users: string[] = []
  for (const m of view.messages.values()) {
    if (m.role !== 'user' || !sent(m)) continue
    users.push(m.id)
    users.sort((a, b) => (a < b ? 1 : a > b ? -1 : 0))
    users.length = Math.min(users.length, RECENT_TURNS)
  }
  const cutoff = users[RECENT_TURNS - 1]
  if (cutoff === undefined) return undefined
  const candidates: { id: string; size: number; marker: number }[] = []
  for (const p of view.parts.values()) {
    if (p.type !== 'tool' || p.state !== 'completed' || p.pruned || PROTECTED_TOOLS.has(p.tool)) continue
    if (p.messageId >= cutoff || !sent(view.messages.get(p.messageId))) continue
    candidates.push({ id: p.id, size: estimateTokens(p.output ?? ''), marker: estimateTokens(prunedMarker(p)) })
  }
  candidates.sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)) // newest first
  let recent = 0 // tool-output tokens kept so far, newest first
  let tokens = 0
  const partIds: string[] = []
  for (const c of candidates) {
    recent += c.size
    if (recent <= limits.protect || c.size <= c.marker) continue
    partIds.push(c.id)
    tokens += c.size - c.marker
    if (partIds.length >= MAX_PARTS) break // the rest at the next pruning
  }
  if (partIds.length === 0 || tokens < limits.minimum) return undefined
  return { partIds: partIds.reverse(), tokens }
}
