import type { ChangedFile } from '../../events/catalogue.js'
import { ChronicleError } from '../../events/errors.js'
import type { StorePorts } from '../../projections/store-ports.js'
import { firstSnapshot, requireSession } from './recorded.js'
import { EMPTY_TREE, type ShadowStore } from './shadow-store.js'

/**
 * The workspace at any seq (docs/TIME-TRAVEL.md): the files a session's
 * directory held, as recorded by the latest `workspace.snapshotted` at or
 * before that seq — in a fork, its parent's before the fork point; before
 * the session's first snapshot, that first one (its baseline). At a seq
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

type Large = readonly { path: string; size: number }[]

/**
 * A diff with the files over the size cap at either end: never stored, so
 * git's diff shows such a file as gone (or new) where it crossed the cap, and
 * not at all while it stays over it. Each is listed as `large` instead, and
 * the patch says it differs without its content.
 */
function withLargeFiles(
  stored: { files: ChangedFile[]; patch: string },
  from: Large,
  to: Large,
): { files: ChangedFile[]; patch: string } {
  const before = new Map(from.map((f) => [f.path, f.size]))
  const after = new Map(to.map((f) => [f.path, f.size]))
  const paths = [...new Set([...before.keys(), ...after.keys()])]
  const byPath = new Map(stored.files.map((f) => [f.path, f]))
  const notes: string[] = []
  for (const path of paths) {
    const [a, b] = [before.get(path), after.get(path)]
    const known = byPath.get(path)
    // over the cap at both ends with the same size: nothing to tell (its content is not known)
    if (a !== undefined && b !== undefined && a === b) continue
    const status =
      a !== undefined && b !== undefined
        ? 'modified'
        : known
          ? 'modified' // crossed the cap: stored at one end, listed at the other
          : a !== undefined
            ? 'deleted'
            : 'added'
    byPath.set(path, { path, status, large: true })
    notes.push(`Large files a/${path} and b/${path} differ (over the size cap: listed, not stored)\n`)
  }
  const files = [...byPath.values()].sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0))
  return { files, patch: stored.patch + notes.join('') }
}

/** The workspace history over the store's ports: the session or its state at a seq, and its first snapshot. */
export function createWorkspaceHistory(
  ports: Pick<StorePorts, 'log' | 'readModels' | 'timeTravel'>,
  shadow: ShadowStore,
): WorkspaceHistory {
  const at = async (sessionId: string, seq?: number) => {
    const session =
      seq === undefined
        ? await requireSession(ports.readModels, sessionId)
        : (await ports.timeTravel.stateAt(sessionId, seq)).session
    const workspace = session.workspace ?? (await firstSnapshot(ports.log, sessionId))
    return {
      point: { seq: seq ?? session.lastSeq, tree: workspace?.tree ?? null, snapshotSeq: workspace?.seq ?? null },
      large: workspace?.large ?? [],
    }
  }
  return {
    async files(sessionId, seq) {
      const { point, large } = await at(sessionId, seq)
      if (!point.tree) return { ...point, files: [] }
      const listed = (await shadow.list(point.tree)).map((f) => ({ path: f.path, size: f.size, type: f.type }))
      const files = [...listed, ...large.map((f) => ({ path: f.path, size: f.size, type: 'large' as const }))]
      return { ...point, files: files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)) }
    },
    async file(sessionId, path, seq) {
      const { point, large } = await at(sessionId, seq)
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
      const { point: from, large: largeFrom } = await at(sessionId, fromSeq)
      const { point: to, large: largeTo } = await at(sessionId, toSeq)
      const stored =
        from.tree || to.tree
          ? await shadow.diff(from.tree ?? EMPTY_TREE, to.tree ?? EMPTY_TREE)
          : { files: [], patch: '' }
      return { from, to, ...withLargeFiles(stored, largeFrom, largeTo) }
    },
  }
}
