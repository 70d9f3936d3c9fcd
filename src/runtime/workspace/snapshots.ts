import type { ChangedFile, DataOf } from '../../events/catalogue.js'
import type { EventStore } from '../../events/store.js'
import { getSession } from '../../projections/read-model.js'
import type { ShadowStore } from './shadow-store.js'

/**
 * When the runtime records a session's workspace (docs/TIME-TRAVEL.md "The
 * workspace at any seq"): at the start of each step, after each tool that
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
  /** the event to record, or undefined when nothing changed (or the snapshot could not be taken) */
  take(
    sessionId: string,
    directory: string,
    reason: SnapshotReason,
    call?: { messageId: string; partId: string },
  ): Promise<DataOf<'workspace.snapshotted'> | undefined>
}

export interface WorkspaceSnapshotsDeps {
  readonly store: EventStore
  readonly shadow: ShadowStore
  readonly log?: { warn(obj: object, msg?: string): void }
}

export function createWorkspaceSnapshots(deps: WorkspaceSnapshotsDeps): WorkspaceSnapshots {
  return {
    async take(sessionId, directory, reason, call) {
      deps.store.flush()
      const previous = getSession(deps.store, sessionId)?.workspace?.tree
      let snapshot: Awaited<ReturnType<ShadowStore['snapshot']>>
      try {
        snapshot = await deps.shadow.snapshot(directory)
      } catch (err) {
        deps.log?.warn({ err, sessionId, directory }, 'workspace snapshot failed; the step goes on without one')
        return undefined
      }
      if (previous === snapshot.tree) return undefined
      // a session's first snapshot is its baseline: it changed nothing (and listing a whole repository would be heavy)
      const changed: ChangedFile[] =
        previous === undefined
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
      }
    },
  }
}
