import type { ChronicleEvent, DataOf } from '../../events/catalogue.js'
import { isChronicleError } from '../../events/errors.js'
import type { EventLog } from '../../events/log.js'
import type { ToolPart } from '../../projections/fold/model.js'
import { DEFAULT_REJECT_MESSAGE } from '../permissions/gate.js'
import { CANCELLED, runLoop, type LoopDeps } from '../loop/loop.js'
import { INTERRUPTED_MESSAGE } from './recovery.js'
import type { RunOutcome } from '../../events/catalogue.js'

/**
 * Continuing a run recovery marked `run.resumed`. Before the loop takes its
 * next step, calls that were parked on a permission request when the server
 * died are settled by the user's answer to the re-offered request — the run
 * waits for it (the session stays `waiting`), exactly as it waited before:
 *
 *   reject       → tool.failed {denied, the user's message}  (as without a crash)
 *   once/always  → tool.failed {interrupted, PARKED_APPROVED}: the call is not
 *                  run now (calls are never re-run automatically); the model
 *                  sees the approval and may call again — `always` added its
 *                  rule so that call passes, `once` is asked again.
 *
 * The model therefore never sees a call without exactly one result. A cancel
 * while waiting closes the requests and fails the calls `aborted`; a shutdown
 * leaves everything for the next recovery.
 */

export const PARKED_APPROVED = (reply: string) =>
  `interrupted by a server restart while it waited for permission; permission was granted (${reply}) after the restart, ` +
  'but the call did not run: calls are never re-run automatically. Call the tool again if it is still needed.'

type Reply = DataOf<'permission.replied'>

export async function continueRun(
  deps: LoopDeps,
  sessionId: string,
  signal: AbortSignal,
  runId: string,
): Promise<RunOutcome | 'shutdown' | 'paused'> {
  await settleParkedCalls(deps, sessionId, signal, runId)
  await recordWhatTheRestartLeft(deps, sessionId, runId)
  return runLoop(deps, sessionId, signal, { runId })
}

/** A tool the restart cut off may have written: the workspace as the resumed run finds it. */
async function recordWhatTheRestartLeft(deps: LoopDeps, sessionId: string, runId: string): Promise<void> {
  const directory = (await deps.views.read(sessionId)).session?.directory
  if (!deps.workspace || !directory) return
  await deps.workspace.record(sessionId, directory, 'recovery', { actor: 'recovery', run: runId })
}

async function settleParkedCalls(deps: LoopDeps, sessionId: string, signal: AbortSignal, runId: string): Promise<void> {
  const { log } = deps
  const replies = new Map<string, Reply>()
  let wake: () => void = () => {}
  const unsubscribe = log.onCommit((events) => {
    for (const e of events) {
      if (e.sessionId !== sessionId || e.type !== 'permission.replied') continue
      replies.set(e.data.requestId, e.data)
      wake()
    }
  })
  const onAbort = () => wake()
  signal.addEventListener('abort', onAbort)
  try {
    for (;;) {
      const view = await deps.views.read(sessionId)
      const open = [...view.parts.values()].filter(
        (p): p is ToolPart => p.type === 'tool' && (p.state === 'pending' || p.state === 'running'),
      )
      if (open.length === 0) return
      const pending = view.session?.pendingPermissions ?? []
      const meta = { actor: 'runtime' as const, run: runId }
      // Decided on the view just read: a reply or a cancel committed in between is a VERSION_CONFLICT, and
      // the loop reads again rather than settling a request twice.
      const settle = async (events: ChronicleEvent[]): Promise<boolean> => {
        try {
          await log.append(sessionId, events, { durability: 'full', meta, expectedVersion: view.session?.version ?? 0 })
          return true
        } catch (err) {
          if (isChronicleError(err, 'VERSION_CONFLICT')) return false
          throw err
        }
      }
      if (signal.aborted) {
        if (signal.reason !== CANCELLED) return // shutdown: the next recovery sees the same state
        const events: ChronicleEvent[] = [
          ...pending.map(
            (r): ChronicleEvent => ({
              type: 'permission.replied',
              data: { requestId: r.requestId, reply: 'reject', message: 'cancelled: the tool call was aborted' },
            }),
          ),
          ...open.map(
            (p): ChronicleEvent => ({
              type: 'tool.failed',
              data: {
                partId: p.id,
                error: { kind: 'aborted', message: 'the run was cancelled while the call waited for permission' },
              },
            }),
          ),
        ]
        if (await settle(events)) return
        continue
      }
      const settled: ChronicleEvent[] = []
      for (const part of open) {
        const request = pending.find((r) => r.partId === part.id)
        if (request) continue // still waiting for the user
        const reply = await replyFor(log, sessionId, part.id, replies)
        const error = !reply
          ? { kind: 'interrupted' as const, message: INTERRUPTED_MESSAGE }
          : reply.reply === 'reject'
            ? { kind: 'denied' as const, message: reply.message || DEFAULT_REJECT_MESSAGE }
            : { kind: 'interrupted' as const, message: PARKED_APPROVED(reply.reply) }
        settled.push({ type: 'tool.failed', data: { partId: part.id, error } })
      }
      if (settled.length > 0) {
        await settle(settled)
        continue
      }
      await new Promise<void>((resolve) => {
        wake = resolve
      })
    }
  } finally {
    wake = () => {}
    signal.removeEventListener('abort', onAbort)
    unsubscribe()
  }
}

/** The reply to the latest request a part made: seen live, or looked up in the session's log. */
async function replyFor(
  log: EventLog,
  sessionId: string,
  partId: string,
  seen: Map<string, Reply>,
): Promise<Reply | undefined> {
  const requested = (await log.readSessionOfType(sessionId, 'permission.requested')).findLast(
    (e) => e.type === 'permission.requested' && e.data.partId === partId,
  )
  if (requested?.type !== 'permission.requested') return undefined
  const { requestId } = requested.data
  const seenReply = seen.get(requestId)
  if (seenReply) return seenReply
  const replied = (await log.readSessionOfType(sessionId, 'permission.replied')).find(
    (e) => e.type === 'permission.replied' && e.data.requestId === requestId,
  )
  return replied?.type === 'permission.replied' ? replied.data : undefined
}
