import { constants, createWriteStream } from 'node:fs'
import { lstat, mkdir, open, readdir, rm, writeFile } from 'node:fs/promises'
import { pipeline } from 'node:stream/promises'
import { join } from 'node:path'
import type { GitHead } from '../../events/catalogue.js'
import { type GitPlace, git, gitFailed, runGit } from './git.js'
import { findRepository, isBranchRef, objectDirectories, readRepositoryFile } from './repository.js'

/**
 * A fork's directory as a repository (docs/TIME-TRAVEL.md "Fork with
 * files"): at the commit and branch the parent's repository HEAD named at
 * the fork point, with the snapshot's files as its working tree, so `git
 * status`, `git diff` and `git log` in the fork answer as they would have
 * in the parent there. The user's repository is never written: the fork's
 * `.git` is new, made by this server's git with no user or system config
 * and no templates (so no hooks), and borrows the parent's objects through
 * `objects/info/alternates` (what `git clone --shared` does) — git only
 * reads an alternate. A fork of a fork copies its parent fork's own objects
 * (the commits made there: that `.git` lies in the data dir, which the
 * child's sandbox hides) and borrows what that one borrowed. The parent's repository is only read as files
 * (src/runtime/workspace/repository.ts); git is never run in it, so nothing
 * its config or hooks name runs. Its `info/exclude` and `shallow` are copied,
 * so the fork ignores what the parent ignored and a shallow history reads
 * the same.
 *
 * The index is HEAD's tree: what the parent had staged shows as unstaged.
 */

export interface ForkRepositoryOptions {
  /** the directory whose repository was recorded: the parent session's */
  readonly source: string
  readonly head: GitHead
  /** whether a real path is one the fork's sandbox hides: no object directory borrowed may be */
  readonly hidden: (real: string) => boolean
  /**
   * whether the parent's object directory, hidden, is one to copy: a fork's
   * own (under the forks directory), which the child's sandbox could not read
   */
  readonly copied: (real: string) => boolean
}

const EXCLUDE_MAX = 1024 * 1024
const SHALLOW_MAX = 16 * 1024 * 1024

/**
 * Makes `directory` (the fork's checkout, holding the snapshot's files) a
 * repository at `head`. Resolves with why it cannot be one (the parent's
 * repository is gone, borrows from a hidden place), or undefined when it
 * is; a git failure (the commit is no longer there) throws. Either way the
 * caller keeps the plain directory, and nothing of a `.git` is left.
 */
export async function makeForkRepository(
  directory: string,
  options: ForkRepositoryOptions,
): Promise<string | undefined> {
  const { head } = options
  const branch = head.branch === undefined ? undefined : `refs/heads/${head.branch}`
  if (branch !== undefined && !isBranchRef(branch))
    return `the branch name ${JSON.stringify(head.branch)} is not one git accepts`
  if (!head.commit && !branch) return 'HEAD named neither a commit nor a branch'
  const source = await findRepository(options.source)
  if (!source) return `${options.source} is no longer a repository's top level`
  const found = head.commit ? await objectDirectories(source.objects, options.hidden, options.copied) : []
  if (found === undefined) return `the objects of ${options.source} lie, or borrow from, where the sandbox hides`
  // a parent fork's own objects are copied, and what it borrows is borrowed; anything else is borrowed
  const copy = found[0] !== undefined && options.hidden(found[0]) ? found[0] : undefined
  const borrowed = copy ? found.slice(1) : found.slice(0, 1)

  const dotGit = join(directory, '.git')
  // the snapshot never holds a .git; should one be there, it is not ours to write through
  if (
    await lstat(dotGit).then(
      () => true,
      () => false,
    )
  )
    return `${dotGit} exists`
  // HOME where nothing is: no user config is read
  const place: GitPlace = { gitDir: dotGit, home: join(dotGit, 'no-home'), cwd: directory }
  try {
    const format = head.commit?.length === 64 ? ['--object-format=sha256'] : []
    await git(['init', '--quiet', '--template=', ...format], place)
    if (copy) await copyObjects(copy, join(dotGit, 'objects'))
    if (borrowed.length > 0) {
      await mkdir(join(dotGit, 'objects', 'info'), { recursive: true })
      await writeFile(join(dotGit, 'objects', 'info', 'alternates'), borrowed.map((dir) => `${dir}\n`).join(''))
    }
    await copyFile(join(source.commonDir, 'info', 'exclude'), join(dotGit, 'info', 'exclude'), EXCLUDE_MAX)
    await copyFile(join(source.commonDir, 'shallow'), join(dotGit, 'shallow'), SHALLOW_MAX)
    if (head.commit) {
      // update-ref checks the commit is there (through the alternate) and is a commit
      await git(branch ? ['update-ref', branch, head.commit] : ['update-ref', '--no-deref', 'HEAD', head.commit], place)
    }
    if (branch) await git(['symbolic-ref', 'HEAD', branch], place)
    if (head.commit) {
      await git(['read-tree', head.commit], place)
      // the files' stat data in the index, so the first `git status` hashes nothing; 1: some differ from HEAD
      const refreshed = await runGit(['update-index', '-q', '--refresh'], { ...place, workTree: directory })
      if (refreshed.code > 1) throw gitFailed(['update-index'], refreshed)
    }
    return undefined
  } catch (err) {
    await rm(dotGit, { recursive: true, force: true })
    throw err
  }
}

const LOOSE_DIRECTORY = /^[0-9a-f]{2}$/
const LOOSE_OBJECT = /^(?:[0-9a-f]{38}|[0-9a-f]{62})$/
const PACK_FILE = /^pack-[0-9a-f]{40,64}\.(?:pack|idx|rev)$/

/**
 * Copies a parent fork's own objects — loose objects and packs, nothing
 * else (not its `info/`: what it borrows is listed afresh) — each a regular
 * file read through the descriptor that was checked (a symlink planted by
 * that fork's agent is not followed).
 */
async function copyObjects(from: string, to: string): Promise<void> {
  const copyIn = async (dir: string, name: RegExp) => {
    const entries = await readdir(join(from, dir), { withFileTypes: true }).catch(() => [])
    const files = entries.filter((e) => e.isFile() && name.test(e.name))
    if (files.length === 0) return
    await mkdir(join(to, dir), { recursive: true })
    for (const file of files) await copyRegular(join(from, dir, file.name), join(to, dir, file.name))
  }
  for (const entry of await readdir(from, { withFileTypes: true }))
    if (entry.isDirectory() && LOOSE_DIRECTORY.test(entry.name)) await copyIn(entry.name, LOOSE_OBJECT)
  await copyIn('pack', PACK_FILE)
}

async function copyRegular(from: string, to: string): Promise<void> {
  const handle = await open(from, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY)
  try {
    if (!(await handle.stat()).isFile()) return
    await pipeline(handle.createReadStream({ autoClose: false }), createWriteStream(to, { flags: 'wx', mode: 0o444 }))
  } finally {
    await handle.close()
  }
}

/** Copies a small regular file of the parent's repository, when there is one. */
async function copyFile(from: string, to: string, max: number): Promise<void> {
  const content = await readRepositoryFile(from, max).catch(() => undefined)
  if (content === undefined) return
  await mkdir(join(to, '..'), { recursive: true })
  await writeFile(to, content)
}
