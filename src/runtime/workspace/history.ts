import { ChronicleError } from '../../events/errors.js'
import type { EventStore } from '../../events/store.js'
import { requireSession } from '../../projections/read-model.js'
import { stateAt } from '../../projections/time-travel.js'
import { EMPTY_TREE, type ShadowStore } from './shadow-store.js'

/**
 * The workspace at any seq (docs/TIME-TRAVEL.md): the files a session's
 * directory held, as recorded by the latest `workspace.snapshotted` at or
 * before that seq — in a fork, its parent's before the fork point. At a seq
 * inside a running tool that is the snapshot before the tool, as fork
 * settles a tool in flight. A file over the size cap is listed, not stored.
 */

export interface WorkspaceAt {
  readonly seq: number
  /** the snapshot in effect at seq, null before the session's first */
  readonly tree: string | null
  /** the seq that recorded it */
  readonly snapshotSeq: number | null
}

export interface FileEntry {
  readonly path: string
  readonly size: number
  readonly type: 'file' | 'symlink' | 'gitlink' | 'large'
}

export interface WorkspaceHistory {
  /** every file at seq (default: now), large ones included as `large` */
  files(sessionId: string, at?: number): Promise<WorkspaceAt & { files: FileEntry[] }>
  /** one file's content at seq: UTF-8 text, or base64 when binary */
  file(
    sessionId: string,
    path: string,
    at?: number,
  ): Promise<WorkspaceAt & { path: string; binary: boolean; encoding: 'utf8' | 'base64'; content: string }>
  /** the unified diff of the workspace between two seqs */
  diff(
    sessionId: string,
    from: number,
    to: number,
  ): Promise<{
    from: WorkspaceAt
    to: WorkspaceAt
    files: Awaited<ReturnType<ShadowStore['diff']>>['files']
    patch: string
  }>
}

export function createWorkspaceHistory(store: EventStore, shadow: ShadowStore): WorkspaceHistory {
  const at = (sessionId: string, seq?: number) => {
    const session = seq === undefined ? requireSession(store, sessionId) : stateAt(store, sessionId, seq).session
    const workspace = session.workspace
    return {
      point: { seq: seq ?? session.lastSeq, tree: workspace?.tree ?? null, snapshotSeq: workspace?.seq ?? null },
      large: workspace?.large ?? [],
    }
  }
  return {
    async files(sessionId, seq) {
      store.flush()
      const { point, large } = at(sessionId, seq)
      if (!point.tree) return { ...point, files: [] }
      const listed = (await shadow.list(point.tree)).map((f) => ({ path: f.path, size: f.size, type: f.type }))
      const files = [...listed, ...large.map((f) => ({ path: f.path, size: f.size, type: 'large' as const }))]
      return { ...point, files: files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)) }
    },
    async file(sessionId, path, seq) {
      store.flush()
      const { point, large } = at(sessionId, seq)
      if (large.some((f) => f.path === path)) {
        throw new ChronicleError(
          'NOT_IN_SNAPSHOT',
          `${path} was over the size cap at seq ${point.seq}: it is listed, not stored`,
        )
      }
      if (!point.tree)
        throw new ChronicleError('NOT_IN_SNAPSHOT', `no workspace snapshot was recorded at or before seq ${point.seq}`)
      const { content, binary } = await shadow.read(point.tree, path)
      return {
        ...point,
        path,
        binary,
        encoding: binary ? 'base64' : 'utf8',
        content: content.toString(binary ? 'base64' : 'utf8'),
      }
    },
    async diff(sessionId, fromSeq, toSeq) {
      store.flush()
      const from = at(sessionId, fromSeq).point
      const to = at(sessionId, toSeq).point
      if (!from.tree && !to.tree) return { from, to, files: [], patch: '' }
      const { files, patch } = await shadow.diff(from.tree ?? EMPTY_TREE, to.tree ?? EMPTY_TREE)
      return { from, to, files, patch }
    },
  }
}
