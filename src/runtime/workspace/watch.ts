import { type FSWatcher, watch } from 'node:fs'
import { join } from 'node:path'

/**
 * Whether a workspace may have changed since a snapshot began, without
 * starting git: inotify watches (`fs.watch`, one per directory) on the
 * directories its last snapshot recorded. A background step snapshot that
 * finds the workspace quiet is its previous one; anything else — an event in
 * a watched directory (a file written, created, removed, a directory added),
 * a directory not watched yet, a watch that failed, too many directories —
 * means "maybe", and git looks. Ignored directories are not watched: what
 * changes there is never recorded. Only background snapshots use this; a
 * snapshot someone waits for always asks git.
 */

export interface ChangeWatch {
  /** a snapshot of the workspace begins: what happens from now on makes it busy again */
  begin(key: string): void
  /**
   * watches the directories (relative, '' the root) the snapshot just taken
   * recorded, for `tree`; directories no longer in it are dropped. null: the
   * workspace cannot be watched (git looks every time)
   */
  arm(key: string, root: string, tree: string, directories: readonly string[] | null): void
  /** nothing happened in the workspace since its last snapshot of `tree` began */
  quiet(key: string, tree: string): boolean
  close(): void
}

/** beyond this many directories a workspace is not watched: git looks every time */
export const MAX_WATCHED_DIRECTORIES = 4000

interface Watched {
  tree: string | undefined
  armed: boolean
  busy: boolean
  readonly watchers: Map<string, FSWatcher>
}

export function createChangeWatch(maxDirectories = MAX_WATCHED_DIRECTORIES): ChangeWatch {
  const workspaces = new Map<string, Watched>()
  let closed = false
  const entry = (key: string): Watched => {
    let found = workspaces.get(key)
    if (!found) {
      found = { tree: undefined, armed: false, busy: true, watchers: new Map() }
      workspaces.set(key, found)
    }
    return found
  }
  const drop = (w: Watched) => {
    for (const watcher of w.watchers.values()) watcher.close()
    w.watchers.clear()
  }

  return {
    begin(key) {
      const w = entry(key)
      w.busy = false
      w.armed = false
    },

    arm(key, root, tree, directories) {
      if (closed) return // a snapshot's watch set up after the store closed
      const w = entry(key)
      if (directories === null || directories.length > maxDirectories) {
        drop(w)
        w.armed = false
        return
      }
      const wanted = new Set(directories)
      for (const [dir, watcher] of w.watchers)
        if (!wanted.has(dir)) {
          watcher.close()
          w.watchers.delete(dir)
        }
      for (const dir of wanted) {
        if (w.watchers.has(dir)) continue
        try {
          const watcher = watch(join(root, dir), { persistent: false }, () => {
            w.busy = true
          })
          // a watched directory that goes away (or a watch the system takes back) is "maybe" from then on
          watcher.on('error', () => {
            w.busy = true
            w.watchers.get(dir)?.close()
            w.watchers.delete(dir)
            w.armed = false
          })
          w.watchers.set(dir, watcher)
        } catch {
          // gone already, or no inotify watch left (ENOSPC): a directory not watched means "maybe"
          w.busy = true
          return
        }
      }
      w.tree = tree
      w.armed = true
    },

    quiet(key, tree) {
      const w = workspaces.get(key)
      return !!w && w.armed && !w.busy && w.tree === tree
    },

    close() {
      closed = true
      for (const w of workspaces.values()) drop(w)
      workspaces.clear()
    },
  }
}
