import { isChronicleError } from '../../events/errors.js'
import type { SubmitContext } from '../../commands/input.js'
import type { SubtaskPart } from '../../projections/fold/model.js'
import type { StorePorts } from '../../projections/store-ports.js'
import { SUBTASK_REPORT_PREFIX } from '../loop/chat-messages.js'
import { finalText, type ChildRuntime, type Subagents } from './subagents.js'

/**
 * Children nobody waits for: a background task's (its call returned at once), and one whose
 * parent's task call a restart interrupted (recovery: tool.failed {interrupted}) — the child is an
 * ordinary session that is resumed or continued. When such a child finishes a run, its parent
 * learns the outcome (docs/COMPACTION.md "Background sub-agents"): `subtask.finished` in the
 * parent, then a system-reminder input carrying the child's final text — a steer for a background
 * task (it reaches a running parent at its next step, or starts a run), queued after an
 * interruption, recorded without a run when the child was cancelled. The input id
 * `subtask:<child>` makes the report idempotent. A cancel of the parent's run cancels its running
 * background children. Imported sessions are ignored, as children and as parents: they are never run.
 */

export interface OrphanDeps {
  readonly ports: Pick<StorePorts, 'log' | 'readModels'>
  readonly subagents: Pick<Subagents, 'awaited'>
  readonly runtime: () => Pick<ChildRuntime, 'submit' | 'cancel'> & {
    readonly submitContext: Pick<SubmitContext, 'prior'>
  }
  readonly log?: { error(obj: object, msg?: string): void }
}

export interface OrphanWatcher {
  /**
   * reports every finished child whose parent has not heard of it (call after recovery); `among`: only the
   * children among these sessions, or whose parent is (a cluster node's claimed ones, docs/CLUSTER.md)
   */
  sweep(among?: ReadonlySet<string>): Promise<number>
  close(): void
}

export function watchOrphanedSubtasks(deps: OrphanDeps): OrphanWatcher {
  const { log, readModels } = deps.ports
  const report = async (childId: string): Promise<boolean> => {
    if (deps.subagents.awaited.has(childId)) return false // a live task call will record it
    // Having a parent is decided at creation: most sessions are left without waiting on what is queued.
    if (!(await readModels.session(childId, { committed: true }))?.parent) return false
    const child = await readModels.session(childId)
    if (!child?.parent || child.imported || child.run || !child.lastRun) return false
    const parentId = child.parent.sessionId
    const parent = await readModels.session(parentId)
    if (!parent || parent.imported) return false // imported history is never acted on
    const parts = await readModels.parts(parentId)
    const link = parts.find((p): p is SubtaskPart => p.type === 'subtask' && p.childSessionId === childId)
    if (!link) return false
    const partId = link.id.replace(/:subtask$/, '')
    // A background task's call, or one a restart cut off: any other call that returned gave the parent its result.
    const call = parts.find((p) => p.id === partId)
    if (call?.type !== 'tool') return false
    const background = call.state === 'completed' && call.metadata?.background === true
    if (!background && (call.state !== 'error' || call.error?.kind !== 'interrupted')) return false
    const inputId = `${SUBTASK_REPORT_PREFIX}${childId}`
    // the runtime's input index: whether the parent accepted the report already
    if ((await deps.runtime().submitContext.prior(parentId, inputId)) !== undefined) return false
    const { outcome } = child.lastRun
    // Recovery settled the link as cancelled; the child's real outcome is recorded over it.
    if (link.outcome !== outcome) {
      await log.append(
        parentId,
        [{ type: 'subtask.finished', data: { partId, callId: link.callId, childSessionId: childId, outcome } }],
        // decided on the parent as read: anything committed to it since is a VERSION_CONFLICT, read again; on a
        // cluster the parent may be another node's, which hears it as it hears a command
        { meta: { actor: 'runtime', call: link.callId }, expectedVersion: parent.version, anyNode: true },
      )
    }
    const error = child.lastRun.error ? `\nError: ${child.lastRun.error.kind}: ${child.lastRun.error.message}` : ''
    const which = background ? 'background sub-agent session' : 'sub-agent session'
    const why = background ? '' : ' whose task call was interrupted'
    const text =
      `<system-reminder>\nThe ${which} ${childId} ("${child.title}")${why} has finished: ${outcome}.${error}\n` +
      `<task_result>\n${await finalText(readModels, childId)}\n</task_result>\n</system-reminder>`
    const content = [{ type: 'text' as const, text }]
    const delivery: 'steer' | 'queue' = background ? 'steer' : 'queue'
    // a background child the parent's cancel stopped is recorded for the model, but starts no run
    const input =
      background && outcome === 'cancelled'
        ? { inputId, parts: content, noReply: true }
        : { inputId, parts: content, delivery }
    await deps.runtime().submit(parentId, input, 'runtime')
    return true
  }
  /** report, read again while the parent changes under it (each decision is idempotent) */
  const reported = async (childId: string): Promise<boolean> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await report(childId)
      } catch (err) {
        if (!isChronicleError(err, 'VERSION_CONFLICT') || attempt === 5) throw err
      }
    }
  }
  const safely = async (childId: string): Promise<void> => {
    try {
      await reported(childId)
    } catch (err) {
      deps.log?.error({ err, sessionId: childId }, 'reporting a finished sub-agent to its parent failed')
    }
  }
  /** a cancel of a parent's run reaches its background children that are running */
  const cancelChildren = async (parentId: string): Promise<void> => {
    try {
      const parts = await readModels.parts(parentId)
      for (const link of parts) {
        if (link.type !== 'subtask' || link.outcome !== undefined) continue
        const call = parts.find((p) => p.id === link.id.replace(/:subtask$/, ''))
        if (call?.type !== 'tool' || call.metadata?.background !== true) continue
        if ((await readModels.session(link.childSessionId))?.run) await deps.runtime().cancel(link.childSessionId)
      }
    } catch (err) {
      deps.log?.error({ err, sessionId: parentId }, 'cancelling background sub-agents failed')
    }
  }
  // what this node's runs did: on a cluster, a run another node ended is that node's to report (docs/CLUSTER.md)
  const unsubscribe = log.onCommit((events, elsewhere) => {
    if (elsewhere) return
    for (const e of events) {
      if (e.type === 'run.finished') setImmediate(safely, e.sessionId) // outside the commit
      if (e.type === 'run.cancel.requested') setImmediate(cancelChildren, e.sessionId)
    }
  })
  return {
    async sweep(among) {
      const children = await readModels.childSessionIds()
      const concerned = async (id: string) => {
        if (!among || among.has(id)) return true
        const parent = (await readModels.session(id, { committed: true }))?.parent?.sessionId
        return parent !== undefined && among.has(parent)
      }
      let n = 0
      for (const id of children) {
        if (!(await concerned(id))) continue
        try {
          if (await reported(id)) n++
        } catch (err) {
          deps.log?.error({ err, sessionId: id }, 'reporting a finished sub-agent to its parent failed')
        }
      }
      return n
    },
    close: unsubscribe,
  }
}
