import { createHash, randomBytes } from 'node:crypto'
import { lstat, mkdir, readdir, readFile, realpath, rename, rm, stat, writeFile } from 'node:fs/promises'
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'
import { ChronicleError } from '../../events/errors.js'
import { type Candidates, joinNul, sortCandidates } from './candidates.js'
import { excludeArgs, findGlobalExcludes } from './excludes.js'
import { type GitPlace, type GitResult, git, gitFailed, runGit, splitNul, startGit } from './git.js'
import { type FileChange, parseChanges, parseTree, type TreeEntry } from './git-output.js'
import { keyedLock } from './keyed-lock.js'
import { createChangeWatch } from './watch.js'
import { checkoutInto } from './materialize.js'

/**
 * Content-addressed snapshots of session directories (docs/TIME-TRAVEL.md
 * "The workspace at any seq"): a shadow git object store driven by plumbing,
 * which never touches the user's own `.git`. Under `root`:
 *
 *   objects.git/        one bare repository for every workspace: identical
 *                       content is stored once, and a fork's tree is already
 *                       there for its child
 *   ws/<key>/index      each workspace's index (`GIT_INDEX_FILE`); key = a hash of its real path
 *   ws/<key>/last       the tree of its last snapshot (what `changed` is measured against)
 *   ws/<key>/directory  the path, for whoever looks at the store
 *
 * A snapshot honours the workspace's `.gitignore` files, the user's global
 * excludes and the repository's `.git/info/exclude`; git never adds a `.git`
 * directory, and a nested repository is recorded as a gitlink (its commit),
 * never recursed into — one with no commit yet is left out until it has one.
 * A file over the size cap is not stored: it is listed in `large`, every
 * snapshot, for as long as it is over the cap. Bytes are stored and written
 * back exactly (no line-ending, ident or filter conversion, whatever the
 * workspace's `.gitattributes` say).
 *
 * Operations on one workspace run one at a time (two sessions may share a
 * directory); different workspaces run concurrently. Nothing refers to a
 * snapshot in git's sense (no refs), so git's gc must never run here: it is
 * off, and the store only grows.
 */

/** git's empty tree: a workspace before its first snapshot. */
export const EMPTY_TREE = '4b825dc642cb6eb9a060e54bf8d69288fbee4904'
export const DEFAULT_MAX_FILE_BYTES = 10 * 1024 * 1024

export type { FileChange, TreeEntry }

export interface LargeFile {
  readonly path: string
  readonly size: number
}

export interface Snapshot {
  readonly tree: string
  /** the workspace's previous snapshot, which `changed` is measured against (EMPTY_TREE for its first) */
  readonly previous: string
  readonly changed: FileChange[]
  /** the files over the size cap, now: listed, not stored */
  readonly large: LargeFile[]
}

export interface FileContent {
  readonly content: Buffer
  /** git's test: a NUL byte in the first 8000 */
  readonly binary: boolean
  /** a symlink's content is its target */
  readonly type: 'file' | 'symlink'
}

export interface Restored {
  /** the snapshot taken just before: restoring it undoes the restore */
  readonly before: Snapshot
  readonly tree: string
  /** what the restore changed: from `before.tree` to `tree` */
  readonly changed: FileChange[]
}

export interface Materialized {
  readonly directory: string
  /** files and symlinks written (a gitlink becomes an empty directory) */
  readonly files: number
  readonly bytes: number
}

export interface ShadowStore {
  /**
   * records the directory's files; WORKSPACE_MISSING when it is gone.
   * `background`: nothing waits for it, so fewer processes are started (slower when files changed)
   */
  snapshot(directory: string, options?: { background?: boolean }): Promise<Snapshot>
  /** every file of a snapshot, by path */
  list(tree: string): Promise<TreeEntry[]>
  /** one file of a snapshot; NOT_IN_SNAPSHOT when it holds no file at that path */
  read(tree: string, path: string): Promise<FileContent>
  /** the changes and the unified diff from one snapshot to another (`from` may be EMPTY_TREE) */
  diff(from: string, to: string): Promise<{ files: FileChange[]; patch: string }>
  /**
   * Makes the directory equal to the snapshot for every path the store tracks:
   * files in the tree written, tracked files not in it removed; ignored and
   * other untracked files are left alone — except where the tree has a file at
   * their path: a file now over the size cap is then overwritten by the
   * snapshot's version (it was never stored).
   */
  restore(directory: string, tree: string): Promise<Restored>
  /**
   * writes the snapshot into a new directory; DIRECTORY_NOT_EMPTY if `target` exists and is not empty.
   * `prepare` runs on the checkout before it is renamed into place
   */
  materialize(tree: string, target: string, prepare?: (checkout: string) => Promise<void>): Promise<Materialized>
  /** the size of the object store: the sum of its files' sizes, and what the filesystem allocates for them */
  bytesOnDisk(): Promise<{ bytes: number; allocated: number }>
  /** stops watching the workspaces */
  close(): void
}

export interface ShadowStoreOptions {
  /** where the store lives: `<dataDir>/workspaces` */
  readonly root: string
  /** files larger than this are listed, not stored (default 10 MiB) */
  readonly maxFileBytes?: number
  /**
   * the user's global excludes file; default: the one git would use for the
   * server's user (`core.excludesFile` in ~/.gitconfig, else
   * ~/.config/git/ignore), looked up once; null: none
   */
  readonly globalExcludes?: string | null
  /**
   * directories never recorded, wherever a workspace lies: the server's data
   * dir (a session directory may contain it). The store's own root always is.
   */
  readonly exclude?: readonly string[]
  /**
   * watch the recorded directories (inotify) so a background snapshot of a
   * quiet workspace starts no git process (default true; src/runtime/workspace/watch.ts)
   */
  readonly watch?: boolean
}

/** How long the change watch alone may decide what git looks at, before git looks at everything again. */
const FULL_LOOK_MS = 30_000

/** Attributes that win over a workspace's `.gitattributes` ($GIT_DIR/info/attributes comes first): bytes as they are. */
const RAW_BYTES = '* -text -ident -filter -working-tree-encoding\n'
const OBJECT_ID = /^[0-9a-f]{40}$/
const ADD = ['update-index', '-z', '--add', '--remove', '--replace', '--stdin']

interface Workspace {
  readonly key: string
  /** the directory's real path */
  readonly directory: string
  /** ws/<key> */
  readonly state: string
  readonly place: GitPlace
}

export function createShadowStore(options: ShadowStoreOptions): ShadowStore {
  const root = resolve(options.root)
  const gitDir = join(root, 'objects.git')
  const maxFileBytes = options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES
  // HOME for git is the store's root, which holds no .gitconfig: no user config changes what is stored or printed
  const store: GitPlace = { gitDir, home: root }
  const exclusive = keyedLock()
  const lastTrees = new Map<string, string>()
  /** the tree each workspace's index held when this process last finished an operation on it */
  const indexTrees = new Map<string, string>()
  /** the files over the cap at each workspace's last snapshot in this process (what a quiet one repeats) */
  const lastLarge = new Map<string, LargeFile[]>()
  const changes = options.watch === false ? undefined : createChangeWatch(join(root, 'barrier'))
  const lastFullLook = new Map<string, number>()
  /** per workspace, for the tree last watched: its directories, and the paths it holds files at */
  const watchedDirectories = new Map<
    string,
    { tree: string; directories: string[] | null; files: Set<string> | null }
  >()
  let ready: Promise<void> | undefined
  let globalExcludes: Promise<string | undefined> | undefined
  let excluded: Promise<string[]> | undefined

  const init = () =>
    (ready ??= (async () => {
      await mkdir(gitDir, { recursive: true, mode: 0o700 })
      await git(['init', '--quiet', '--bare'], store)
      const attributes = join(gitDir, 'info', 'attributes')
      if ((await readFile(attributes, 'utf8').catch(() => '')) !== RAW_BYTES) {
        await mkdir(dirname(attributes), { recursive: true })
        await writeFile(attributes, RAW_BYTES)
      }
    })().catch((err) => {
      ready = undefined
      throw err
    }))

  async function open(directory: string): Promise<Workspace> {
    await init()
    const real = await realpath(directory).catch(() => undefined)
    const isDirectory =
      real !== undefined &&
      (await stat(real).then(
        (st) => st.isDirectory(),
        () => false,
      ))
    if (!real || !isDirectory)
      throw new ChronicleError('WORKSPACE_MISSING', `the workspace directory ${directory} does not exist`, {
        directory,
      })
    const key = createHash('sha256').update(real).digest('hex').slice(0, 32)
    const state = join(root, 'ws', key)
    return { key, directory: real, state, place: { gitDir, home: root, workTree: real, index: join(state, 'index') } }
  }

  async function lastTree(ws: Workspace): Promise<string> {
    const known = lastTrees.get(ws.key)
    if (known) return known
    const saved = (await readFile(join(ws.state, 'last'), 'utf8').catch(() => '')).trim()
    const tree = OBJECT_ID.test(saved) ? saved : EMPTY_TREE
    lastTrees.set(ws.key, tree)
    return tree
  }

  async function setLastTree(ws: Workspace, tree: string): Promise<void> {
    const file = join(ws.state, 'last')
    await writeFile(`${file}.tmp`, `${tree}\n`)
    await rename(`${file}.tmp`, file)
    lastTrees.set(ws.key, tree)
  }

  /** `--exclude` patterns for the never-recorded directories that lie inside this workspace */
  async function excludedInside(ws: Workspace): Promise<string[]> {
    excluded ??= Promise.all([root, ...(options.exclude ?? [])].map((dir) => realpath(dir).catch(() => resolve(dir))))
    return (await excluded).flatMap((dir) => {
      const inside = relative(ws.directory, dir)
      if (inside === '' || inside.startsWith('..') || isAbsolute(inside)) return []
      return [`--exclude=/${inside.split(sep).map(escapePattern).join('/')}`]
    })
  }

  function globalExcludesFile(): Promise<string | undefined> {
    globalExcludes ??=
      options.globalExcludes === undefined
        ? findGlobalExcludes(gitDir)
        : Promise.resolve(options.globalExcludes ?? undefined)
    return globalExcludes
  }

  /** A snapshot, within the workspace's lock. */
  async function capture(ws: Workspace, background = false): Promise<Snapshot> {
    const known = lastLarge.get(ws.key)
    // git looks at everything now and then, whatever the watch says: a change it cannot see (an exclude file
    // edited, an event the system dropped) is found within FULL_LOOK_MS
    const watched = known && changes && Date.now() - (lastFullLook.get(ws.key) ?? 0) < FULL_LOOK_MS
    // nothing happened in the directories the last snapshot recorded (this process made it, so its state
    // directory exists): it stands, and no git process starts nor any file is touched
    const remembered = lastTrees.get(ws.key)
    if (watched && background && remembered && changes.quiet(ws.key, remembered))
      return { tree: remembered, previous: remembered, changed: [], large: known }
    const created = await mkdir(ws.state, { recursive: true, mode: 0o700 })
    if (created) await writeFile(join(ws.state, 'directory'), `${ws.directory}\n`)
    // only this process works on the store, one operation per workspace at a time: a lock left behind is a crash's
    await rm(`${ws.place.index}.lock`, { force: true })
    const previous = await lastTree(ws)
    // else git looks only where the watch saw something happen, when it can say
    const paths = watched ? await changes.changedPaths(ws.key, previous) : undefined
    changes?.begin(ws.key)
    if (paths && paths.length === 0) return { tree: previous, previous, changed: [], large: known ?? [] }
    if (!paths) lastFullLook.set(ws.key, Date.now())
    const indexTree = indexTrees.get(ws.key)
    indexTrees.delete(ws.key)
    // started at once, unless nothing waits for this snapshot: git's start and its reading of the index overlap
    // with ls-files looking at the directory — but each process started blocks the server's event loop for a
    // few milliseconds, and a background snapshot most often finds nothing to add
    const update = background ? undefined : startGit(ADD, ws.place)
    let sorted: Candidates
    try {
      // only files the last snapshot holds changed: they are tracked, so no ignore rule applies and ls-files
      // has nothing to add (a process fewer); anything new, a directory or a name that is not UTF-8 asks it
      const tracked = paths && watchedDirectories.get(ws.key)
      const allTracked =
        tracked && tracked.tree === previous && tracked.files
          ? paths?.every((p) => tracked.files?.has(p) && !p.includes('\uFFFD'))
          : false
      const lsFiles = async (within: readonly string[] | undefined) =>
        git(
          [
            'ls-files',
            '-z',
            '-t',
            '--others',
            '--modified',
            '--exclude-standard',
            ...(await excludeArgs(await globalExcludesFile(), ws.directory)),
            ...(await excludedInside(ws)),
            ...(within ? ['--', ...within] : []),
          ],
          ws.place,
        )
      const listed = allTracked ? joinNul((paths ?? []).map((p) => Buffer.from(`C ${p}`))) : await lsFiles(paths)
      sorted = await sortCandidates(ws.directory, listed, maxFileBytes)
      if (allTracked && sorted.became.length > 0) {
        // a file the watch named became a directory: git looks inside for what it now holds
        const inside = await sortCandidates(
          ws.directory,
          await lsFiles(sorted.became.map((p) => p.toString('utf8'))),
          maxFileBytes,
        )
        sorted = {
          ...sorted,
          add: [...sorted.add, ...inside.add],
          repositories: [...sorted.repositories, ...inside.repositories],
          large: [...sorted.large, ...inside.large].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)),
        }
      }
    } catch (err) {
      await update?.finish()
      throw err
    }
    const { add, drop, repositories } = sorted
    const adding = add.length > 0 ? joinNul(add) : undefined
    if (drop.length > 0) {
      // dropped first, by a process of their own (--force-remove applies to every path of a call)
      if (update) check(ADD, await update.finish())
      await git(['update-index', '-z', '--force-remove', '--stdin'], ws.place, joinNul(drop))
      if (adding) await git(ADD, ws.place, adding)
    } else if (update) check(ADD, await update.finish(adding))
    else if (adding) await git(ADD, ws.place, adding)
    for (const repository of repositories) {
      const result = await runGit(['update-index', '-z', '--add', '--stdin'], ws.place, joinNul([repository]))
      // a repository with no commit yet has nothing a gitlink could name: left out until it has one
      if (result.code !== 0 && !/is a directory/.test(result.stderr)) throw gitFailed(['update-index'], result)
    }

    const touched = add.length + drop.length + repositories.length > 0
    // nothing given to git: the index still holds the tree it held after this process last wrote it
    const [written, compared] =
      !touched && indexTree
        ? [indexTree, undefined]
        : await Promise.all([
            git(['write-tree'], ws.place).then((out) => out.toString('latin1').trim()),
            touched
              ? git(['diff-index', '--cached', '-z', '--no-renames', '--raw', '--numstat', previous], ws.place)
              : undefined,
          ])
    const changed =
      written === previous ? [] : parseChanges(compared ?? (await git(changesArgs(previous, written), store)))
    if (written !== previous) await setLastTree(ws, written)
    indexTrees.set(ws.key, written)
    // a look at some paths found the large files among them; the others are as they were
    const large = paths
      ? [
          ...(known ?? []).filter((f) => !paths.some((p) => f.path === p || f.path.startsWith(`${p}/`))),
          ...sorted.large,
        ].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
      : sorted.large
    lastLarge.set(ws.key, large)
    if (changes) void watchTree(ws, { previous, tree: written, changed, repositories: repositories.length > 0 })
    return { tree: written, previous, changed, large }
  }

  /**
   * Watches the directories of the tree just recorded: listed by git for a
   * workspace's first, then kept up from what changed (an added file's
   * directories join; a directory emptied stays watched, which costs nothing
   * but a watch). A tree with a gitlink is not watched.
   */
  async function watchTree(
    ws: Workspace,
    snap: { previous: string; tree: string; changed: readonly FileChange[]; repositories: boolean },
  ): Promise<void> {
    const { tree } = snap
    try {
      let dirs = watchedDirectories.get(ws.key)
      if (dirs && dirs.tree === snap.previous && dirs.tree !== tree) {
        const known = dirs.directories
        const directories = known === null || snap.repositories ? null : withParents(known, snap.changed)
        const files = dirs.files && !snap.repositories ? withChanges(dirs.files, snap.changed) : null
        dirs = { tree, directories, files }
        watchedDirectories.set(ws.key, dirs)
      } else if (dirs?.tree !== tree) {
        const listed = splitNul(
          await git(['ls-tree', '-r', '-t', '-z', '--format=%(objecttype) %(path)', tree], store),
        ).map((record) => record.toString('utf8'))
        // a nested repository's commit moves in its own .git, which no watch sees: such a tree is not watched
        const nested = listed.some((r) => r.startsWith('commit '))
        const directories = nested ? null : ['', ...listed.filter((r) => r.startsWith('tree ')).map((r) => r.slice(5))]
        const files = nested ? null : new Set(listed.filter((r) => r.startsWith('blob ')).map((r) => r.slice(5)))
        dirs = { tree, directories, files }
        watchedDirectories.set(ws.key, dirs)
      }
      changes?.arm(ws.key, ws.directory, tree, dirs.directories)
    } catch {
      // not watched: git looks every time
    }
  }

  /** Throws NOT_IN_SNAPSHOT unless each id names a tree in the store (BAD_REQUEST if it is not an id at all). */
  async function requireTrees(...trees: string[]): Promise<void> {
    for (const tree of trees)
      if (!OBJECT_ID.test(tree)) throw new ChronicleError('BAD_REQUEST', `not a snapshot id: ${JSON.stringify(tree)}`)
    const wanted = trees.filter((tree) => tree !== EMPTY_TREE)
    if (wanted.length === 0) return
    await init()
    const found = (await git(['cat-file', '--batch-check'], store, Buffer.from(`${wanted.join('\n')}\n`)))
      .toString('latin1')
      .split('\n')
    wanted.forEach((tree, i) => {
      if (!found[i]?.startsWith(`${tree} tree `))
        throw new ChronicleError('NOT_IN_SNAPSHOT', `no snapshot ${tree} in the workspace store`, { tree })
    })
  }

  return {
    async snapshot(directory, options = {}) {
      const ws = await open(directory)
      return exclusive(ws.key, () => capture(ws, options.background))
    },

    async list(tree) {
      await requireTrees(tree)
      const entries = parseTree(await git(['ls-tree', '-r', '-l', '-z', '--full-tree', tree], store))
      return entries.map(({ path, size, mode, type }) => ({ path, size, mode, type }))
    },

    async read(tree, path) {
      await requireTrees(tree)
      const missing = () =>
        new ChronicleError('NOT_IN_SNAPSHOT', `${path} is not a file in snapshot ${tree}`, { tree, path })
      if (!isTreePath(path)) throw missing()
      const listed = parseTree(await git(['ls-tree', '-z', '--full-tree', tree, '--', path], store))
      const entry = listed.find((e) => e.path === path && e.kind === 'blob')
      if (!entry?.id) throw missing()
      const content = await git(['cat-file', 'blob', entry.id], store)
      return {
        content,
        binary: content.subarray(0, 8000).includes(0),
        type: entry.mode === '120000' ? 'symlink' : 'file',
      }
    },

    async diff(from, to) {
      await requireTrees(from, to)
      const [changes, patch] = await Promise.all([
        git(changesArgs(from, to), store),
        git(
          [
            'diff-tree',
            '-r',
            '-p',
            '--no-renames',
            '--no-ext-diff',
            '--no-textconv',
            '--src-prefix=a/',
            '--dst-prefix=b/',
          ].concat(from, to),
          store,
        ),
      ])
      return { files: parseChanges(changes), patch: patch.toString('utf8') }
    },

    async restore(directory, tree) {
      await requireTrees(tree)
      const ws = await open(directory)
      return exclusive(ws.key, async () => {
        // the index must hold the directory as it is now, so read-tree knows what it may remove
        const before = await capture(ws)
        if (before.tree === tree) return { before, tree, changed: [] }
        indexTrees.delete(ws.key)
        await git(['read-tree', '-u', '--reset', tree], ws.place)
        await setLastTree(ws, tree)
        indexTrees.set(ws.key, tree)
        return { before, tree, changed: parseChanges(await git(changesArgs(before.tree, tree), store)) }
      })
    },

    async materialize(tree, target, prepare) {
      await requireTrees(tree)
      const destination = resolve(target)
      await mkdir(join(root, 'tmp'), { recursive: true, mode: 0o700 })
      const index = join(root, 'tmp', `${randomBytes(8).toString('hex')}.index`)
      try {
        const counted = await checkoutInto(store, tree, destination, index, prepare)
        await adopt(destination, index, tree)
        return { directory: destination, ...counted }
      } finally {
        await rm(index, { force: true })
      }
    },

    async bytesOnDisk() {
      await init()
      return sizeOf(gitDir)
    },

    close() {
      changes?.close()
    },
  }

  /**
   * The new directory's workspace starts from the index its checkout wrote
   * (renaming the directory leaves its files' stat data as it was), with the
   * tree as its last snapshot: its first snapshot finds nothing to hash. The
   * state is only a cache: if it cannot be kept, it is dropped.
   */
  async function adopt(directory: string, index: string, tree: string): Promise<void> {
    const ws = await open(directory)
    await exclusive(ws.key, async () => {
      try {
        await mkdir(ws.state, { recursive: true, mode: 0o700 })
        await writeFile(join(ws.state, 'directory'), `${ws.directory}\n`)
        indexTrees.delete(ws.key)
        await rename(index, join(ws.state, 'index'))
        await setLastTree(ws, tree)
        indexTrees.set(ws.key, tree)
      } catch {
        lastTrees.delete(ws.key)
        indexTrees.delete(ws.key)
        await rm(ws.state, { recursive: true, force: true })
      }
    })
  }
}

function check(args: readonly string[], result: GitResult): void {
  if (result.code !== 0) throw gitFailed(args, result)
}

function changesArgs(from: string, to: string): string[] {
  return ['diff-tree', '-r', '-z', '--no-renames', '--raw', '--numstat', from, to]
}

/** The paths a tree holds files at, after its changes (a new set: the old one may still be read). */
function withChanges(files: ReadonlySet<string>, changed: readonly FileChange[]): Set<string> {
  const next = new Set(files)
  for (const change of changed) {
    if (change.status === 'deleted') next.delete(change.path)
    else next.add(change.path)
  }
  return next
}

/** The directories, with those of every added file (and their parents). */
function withParents(directories: readonly string[], changed: readonly FileChange[]): string[] {
  const all = new Set(directories)
  for (const change of changed) {
    if (change.status !== 'added') continue
    for (let slash = change.path.lastIndexOf('/'); slash > 0; slash = change.path.lastIndexOf('/', slash - 1))
      all.add(change.path.slice(0, slash))
  }
  return [...all]
}

/** A literal path segment as a gitignore pattern: its wildcard and escape characters escaped. */
function escapePattern(segment: string): string {
  return segment.replace(/[\\*?[\]!#]/g, (c) => `\\${c}`)
}

/** A path as a tree holds it: relative, `/`-separated, no empty, `.` or `..` part. */
function isTreePath(path: string): boolean {
  return (
    path !== '' && !path.includes('\0') && path.split('/').every((part) => part !== '' && part !== '.' && part !== '..')
  )
}

async function sizeOf(directory: string): Promise<{ bytes: number; allocated: number }> {
  let bytes = 0
  let allocated = 0
  // one directory at a time (objects/xx holds a few hundred files): little memory, however large the store
  const walk = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true })
    const sizes = await Promise.all(
      entries.filter((entry) => !entry.isDirectory()).map((entry) => lstat(join(dir, entry.name))),
    )
    for (const st of sizes) (bytes += st.size), (allocated += st.blocks * 512)
    for (const entry of entries) if (entry.isDirectory()) await walk(join(dir, entry.name))
  }
  await walk(directory)
  return { bytes, allocated }
}
