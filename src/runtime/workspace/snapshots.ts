import type { ChangedFile, DataOf, GitHead } from '../../events/catalogue.js'
import type { EventMeta } from '../../events/envelope.js'
import type { StorePorts } from '../../projections/store-ports.js'
import { findRepository, sameHead } from './repository.js'
import type { ShadowStore } from './shadow-store.js'

/**
 * When the runtime records a session's workspace (docs/TIME-TRAVEL.md "The
 * workspace at any seq"): at the start of each step (in the background: a
 * step waits for it only before a tool that may write), after each tool that
 * may write, when a resumed run starts. The snapshot itself is the shadow
 * store's; this decides what the event says — the changes since the
 * session's own previous snapshot (another session may share the directory)
 * — and leaves out a snapshot that changed nothing. A session's first
 * snapshot is its baseline, with nothing listed as changed.
 * A snapshot that fails (the directory is gone, git failed) is reported and
 * skipped: the run never fails for it.
 */

export type SnapshotReason = DataOf<'workspace.snapshotted'>['reason']

export interface WorkspaceSnapshots {
  /**
   * A step's snapshot, taken in the background and recorded when taken: the
   * step does not wait for it. A request while another waits to start joins
   * it (that one looks at the directory later than both asked).
   */
  step(sessionId: string, directory: string, meta: EventMeta): void
  /** resolves when the session's background snapshots are recorded: before a tool that may write runs */
  settled(sessionId: string): Promise<void>
  /** resolves when every session's are */
  drain(): Promise<void>
  /** takes a snapshot now and records it when something changed */
  record(sessionId: string, directory: string, reason: SnapshotReason, meta: EventMeta): Promise<void>
  /** the event to record, or undefined when nothing changed (or the snapshot could not be taken) */
  take(
    sessionId: string,
    directory: string,
    reason: SnapshotReason,
    call?: { messageId: string; partId: string },
    options?: { background?: boolean },
  ): Promise<DataOf<'workspace.snapshotted'> | undefined>
}

export interface WorkspaceSnapshotsDeps {
  /** what the snapshots append through, and the recorded workspace they compare with is read from */
  readonly ports: Pick<StorePorts, 'log' | 'readModels'>
  readonly shadow: ShadowStore
  readonly log?: { warn(obj: object, msg?: string): void }
}

export function createWorkspaceSnapshots(deps: WorkspaceSnapshotsDeps): WorkspaceSnapshots {
  /** per session: the last background snapshot queued, and whether it is still waiting to start */
  const lanes = new Map<string, { tail: Promise<void>; waiting: boolean }>()

  async function record(sessionId: string, directory: string, meta: EventMeta): Promise<void> {
    try {
      const data = await snapshots.take(sessionId, directory, 'step', undefined, { background: true })
      if (data) await deps.ports.log.enqueue(sessionId, [{ type: 'workspace.snapshotted', data }], { meta })
    } catch (err) {
      deps.log?.warn({ err, sessionId }, 'a step snapshot could not be recorded')
    }
  }

  const snapshots: WorkspaceSnapshots = {
    step(sessionId, directory, meta) {
      const prior = lanes.get(sessionId)
      if (prior?.waiting) return
      const lane = { tail: Promise.resolve(), waiting: true }
      lane.tail = (prior?.tail ?? Promise.resolve()).then(() => {
        lane.waiting = false
        return record(sessionId, directory, meta)
      })
      lanes.set(sessionId, lane)
      void lane.tail.then(() => {
        if (lanes.get(sessionId) === lane) lanes.delete(sessionId)
      })
    },

    async record(sessionId, directory, reason, meta) {
      const data = await snapshots.take(sessionId, directory, reason)
      if (data) await deps.ports.log.append(sessionId, [{ type: 'workspace.snapshotted', data }], { meta })
    },

    settled: (sessionId) => lanes.get(sessionId)?.tail ?? Promise.resolve(),

    async drain() {
      await Promise.all([...lanes.values()].map((lane) => lane.tail))
    },

    async take(sessionId, directory, reason, call, options) {
      // every workspace event is committed before the next snapshot is asked for (a background one need not
      // force the session's queued appends out early)
      const recorded = (await deps.ports.readModels.session(sessionId, { committed: options?.background === true }))
        ?.workspace
      const previous = recorded?.tree
      let snapshot: Awaited<ReturnType<ShadowStore['snapshot']>>
      let git: GitHead | undefined
      try {
        ;[snapshot, git] = await Promise.all([
          deps.shadow.snapshot(directory, options),
          findRepository(directory).then((repository) => repository?.head),
        ])
      } catch (err) {
        deps.log?.warn({ err, sessionId, directory }, 'workspace snapshot failed; the step goes on without one')
        return undefined
      }
      // a commit changes no file but moves HEAD, which a fork is made a repository at: recorded too
      if (previous === snapshot.tree && sameHead(recorded?.git, git)) return undefined
      // a session's first snapshot is its baseline: it changed nothing (and listing a whole repository would be heavy)
      const changed: ChangedFile[] =
        previous === undefined || previous === snapshot.tree
          ? []
          : previous === snapshot.previous
            ? snapshot.changed
            : (await deps.shadow.diff(previous, snapshot.tree)).files
      return {
        tree: snapshot.tree,
        reason,
        ...(call && { messageId: call.messageId, partId: call.partId }),
        changed,
        ...(snapshot.large.length > 0 && { large: snapshot.large }),
        ...(git && { git }),
      }
    },
  }
  return snapshots
}
