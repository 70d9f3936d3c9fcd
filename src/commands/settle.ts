import type { ChronicleEvent, ToolErrorKind } from '../events/catalogue.js'
import { inFlight, subtaskCallPart } from '../projections/fold/in-flight.js'
import type { SessionView } from '../projections/fold/model.js'

/**
 * Settlement: the events that close whatever a session had in flight, so
 * that nothing is left half-open. A pure decide over the view — fork uses it
 * (kind `aborted`, "forked while running") and crash recovery can reuse it
 * (kind `interrupted`, keeping permission requests and the run).
 *
 * Order: parts (by id) — open text/reasoning ended, pending/running tools
 * failed, unfinished subtasks finished `cancelled`; then pending permission
 * requests rejected; pending MCP elicitations cancelled (always: their calls
 * were running); a requested or running compaction failed; open
 * assistant messages completed with an error; the run finished `cancelled`.
 * Undelivered inputs are not touched: they stay queued, as the log says.
 */
export interface SettleReason {
  readonly kind: Extract<ToolErrorKind, 'aborted' | 'interrupted'>
  readonly message: string
  /** reject pending permission requests (fork) or leave them to be re-offered (recovery) */
  readonly rejectPermissions: boolean
  /** finish an in-flight run `cancelled` (fork) or leave it to be resumed (recovery) */
  readonly finishRun: boolean
}

export const FORK_SETTLEMENT: SettleReason = {
  kind: 'aborted',
  message: 'forked while running',
  rejectPermissions: true,
  finishRun: true,
}

export function settleInFlight(view: SessionView, reason: SettleReason): ChronicleEvent[] {
  const events: ChronicleEvent[] = []
  const error = { kind: reason.kind, message: reason.message }
  // what is in flight is one rule (src/projections/fold/in-flight.ts): forks own rows for exactly these
  const open = inFlight(view)
  for (const part of open.parts) {
    if (part.type === 'text' || part.type === 'reasoning') {
      events.push({ type: part.type === 'text' ? 'text.ended' : 'reasoning.ended', data: { partId: part.id } })
    } else if (part.type === 'tool') {
      events.push({ type: 'tool.failed', data: { partId: part.id, error } })
    } else if (part.type === 'subtask') {
      const { callId, childSessionId } = part
      events.push({
        type: 'subtask.finished',
        data: { partId: subtaskCallPart(part), callId, childSessionId, outcome: 'cancelled' },
      })
    }
  }
  const session = view.session
  if (reason.rejectPermissions) {
    for (const request of session?.pendingPermissions ?? []) {
      events.push({
        type: 'permission.replied',
        data: {
          requestId: request.requestId,
          reply: 'reject',
          message: `${reason.message}: the request was closed unanswered`,
        },
      })
    }
  }
  // An elicitation belongs to a running MCP call, failed above: the server's request ended with that call
  // (and with the connection, on a restart), so no answer could reach it. Closed, whatever the reason.
  for (const request of session?.pendingElicitations ?? []) {
    events.push({
      type: 'elicitation.answered',
      data: {
        elicitationId: request.elicitationId,
        action: 'cancel',
        reason: `${reason.message}: the MCP server's request ended with its tool call`,
      },
    })
  }
  const compaction = session?.compaction
  if (compaction && (compaction.status === 'requested' || compaction.status === 'running')) {
    events.push({ type: 'compaction.failed', data: { compactionId: compaction.compactionId, error: reason.message } })
  }
  for (const message of open.messages) {
    events.push({ type: 'message.completed', data: { messageId: message.id, error } })
  }
  if (reason.finishRun && session?.run) {
    events.push({ type: 'run.finished', data: { runId: session.run.runId, outcome: 'cancelled', error } })
  }
  return events
}
