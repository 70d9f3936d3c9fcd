import { type FSWatcher, watch } from 'node:fs'
import { mkdir, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'

/**
 * What may have changed in a workspace since a snapshot began, without
 * starting git: inotify watches (`fs.watch`, one per directory) on the
 * directories its last snapshot recorded, each event noted by directory and
 * name.
 *
 * - A background step snapshot of a quiet workspace (no event at all) is its
 *   previous one: no git process starts.
 * - A snapshot someone waits for first sets a barrier: it writes a file in
 *   the store's own watched directory and waits for that event. Every watch
 *   of the process shares one inotify queue, delivered in order, so once the
 *   barrier's event arrives every write made before it (a tool's, before the
 *   tool exited) has been noted. git then looks only at the paths noted.
 *
 * Anything uncertain sends git over the whole workspace: a workspace not yet
 * watched (or not for its last tree), a directory watched only since the
 * snapshot began, an event without a name, a `.gitignore` changed, a tree with
 * a nested repository, more than 4,000 directories or 2,000 changed paths, a
 * failed watch, a barrier that does not arrive. Ignored directories are not
 * watched: what changes there is never recorded.
 */

export interface ChangeWatch {
  /** a snapshot of the workspace begins: what happens from now on is noted for the next one */
  begin(key: string): void
  /**
   * watches the directories (relative, '' the root) the snapshot just taken
   * recorded, for `tree`; directories no longer in it are dropped. null: the
   * workspace cannot be watched
   */
  arm(key: string, root: string, tree: string, directories: readonly string[] | null): void
  /** nothing happened in the workspace since its last snapshot of `tree` began */
  quiet(key: string, tree: string): boolean
  /**
   * the paths (relative) that may have changed since the last snapshot of
   * `tree` began, after a barrier; undefined when that is not known (git must
   * look at everything)
   */
  changedPaths(key: string, tree: string): Promise<string[] | undefined>
  close(): void
}

/** beyond this many directories a workspace is not watched */
export const MAX_WATCHED_DIRECTORIES = 4000
/** beyond this many changed paths git looks at everything */
export const MAX_CHANGED_PATHS = 2000
const BARRIER_TIMEOUT_MS = 250

/** per directory: the names events named, or 'all' (a nameless event, or watched only since the snapshot began) */
type Noted = Map<string, Set<string> | 'all'>

interface Watched {
  tree: string | undefined
  armed: boolean
  noted: Noted
  readonly watchers: Map<string, FSWatcher>
}

export function createChangeWatch(barrierDir: string, maxDirectories = MAX_WATCHED_DIRECTORIES): ChangeWatch {
  const workspaces = new Map<string, Watched>()
  const barriers = new Map<string, () => void>()
  let barrierWatch: Promise<FSWatcher | undefined> | undefined
  let counter = 0
  let closed = false

  const entry = (key: string): Watched => {
    let found = workspaces.get(key)
    if (!found) {
      found = { tree: undefined, armed: false, noted: new Map(), watchers: new Map() }
      workspaces.set(key, found)
    }
    return found
  }
  const drop = (w: Watched) => {
    for (const watcher of w.watchers.values()) watcher.close()
    w.watchers.clear()
    w.armed = false
  }
  const note = (w: Watched, dir: string, name: string | null) => {
    const prior = w.noted.get(dir)
    if (prior === 'all') return
    if (name === null) return void w.noted.set(dir, 'all')
    if (prior) prior.add(name)
    else w.noted.set(dir, new Set([name]))
  }

  /** The store's own directory whose events mark barriers. */
  const barrierWatcher = () =>
    (barrierWatch ??= (async () => {
      try {
        await mkdir(barrierDir, { recursive: true, mode: 0o700 })
        const watcher = watch(barrierDir, { persistent: false }, (_event, name) => {
          const done = name ? barriers.get(name.toString()) : undefined
          if (done) done()
        })
        watcher.on('error', () => undefined)
        return watcher
      } catch {
        return undefined
      }
    })())

  /** Resolves true once every event queued before it has been noted; false when that cannot be known. */
  async function barrier(): Promise<boolean> {
    if (!(await barrierWatcher())) return false
    const name = `b-${process.pid}-${++counter}`
    const file = join(barrierDir, name)
    let timer: NodeJS.Timeout | undefined
    const arrived = new Promise<boolean>((resolve) => {
      barriers.set(name, () => resolve(true))
      timer = setTimeout(() => resolve(false), BARRIER_TIMEOUT_MS)
    })
    try {
      await writeFile(file, '')
      return await arrived
    } catch {
      return false
    } finally {
      clearTimeout(timer)
      barriers.delete(name)
      void rm(file, { force: true })
    }
  }

  return {
    begin(key) {
      const w = entry(key)
      w.noted = new Map()
      w.armed = false
    },

    arm(key, root, tree, directories) {
      if (closed) return // a snapshot's watch set up after the store closed
      const w = entry(key)
      if (directories === null || directories.length > maxDirectories) return drop(w)
      const wanted = new Set(directories)
      for (const [dir, watcher] of w.watchers)
        if (!wanted.has(dir)) {
          watcher.close()
          w.watchers.delete(dir)
        }
      for (const dir of wanted) {
        if (w.watchers.has(dir)) continue
        // what happened in it between the snapshot's start and now went unnoted
        note(w, dir, null)
        try {
          const watcher = watch(join(root, dir), { persistent: false }, (_event, name) =>
            note(w, dir, name === null ? null : name.toString()),
          )
          // a watched directory that goes away (or a watch the system takes back): unknown from then on
          watcher.on('error', () => drop(w))
          w.watchers.set(dir, watcher)
        } catch {
          // gone already, or no inotify watch left (ENOSPC)
          return drop(w)
        }
      }
      w.tree = tree
      w.armed = true
    },

    quiet(key, tree) {
      const w = workspaces.get(key)
      return !!w && w.armed && w.tree === tree && w.noted.size === 0
    },

    async changedPaths(key, tree) {
      const ready = () => {
        const w = workspaces.get(key)
        return w?.armed && w.tree === tree ? w : undefined
      }
      if (!ready() || !(await barrier())) return undefined
      const w = ready()
      if (!w) return undefined
      const paths: string[] = []
      for (const [dir, names] of w.noted) {
        if (names === 'all') {
          if (dir === '') return undefined
          paths.push(dir)
          continue
        }
        for (const name of names) {
          if (name === '.gitignore') return undefined // what is ignored may have changed anywhere below
          paths.push(dir === '' ? name : `${dir}/${name}`)
        }
        if (paths.length > MAX_CHANGED_PATHS) return undefined
      }
      return paths
    },

    close() {
      closed = true
      for (const w of workspaces.values()) drop(w)
      workspaces.clear()
      void barrierWatch?.then((watcher) => watcher?.close())
    },
  }
}
