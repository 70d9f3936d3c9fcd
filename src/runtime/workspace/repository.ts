import { constants, type Stats } from 'node:fs'
import { lstat, open, realpath } from 'node:fs/promises'
import { dirname, isAbsolute, join, resolve } from 'node:path'
import type { GitHead } from '../../events/catalogue.js'

/**
 * The user's repository as a session directory holds it (docs/TIME-TRAVEL.md
 * "Fork with files"), read from its files: git is never run there. A
 * workspace is hostile input, and git run in it reads its config (an
 * fsmonitor, a pager, hooks are commands), so the few facts a fork needs —
 * which commit and branch HEAD names, where its objects are — are read here
 * with the rules below, and anything unusual reads as "no repository":
 *
 * - only a repository whose top level is the session directory (its `.git`
 *   is in it); a `.git` that is a symlink is not followed;
 * - a `.git` file is followed only to a linked worktree that names it back
 *   (git's `worktrees/<name>/gitdir`) — not to any repository it points at;
 * - files are opened without following a final symlink, non-blocking (a
 *   FIFO never stalls the server), and only regular files of a bounded size
 *   are read;
 * - HEAD names a branch under `refs/heads/` whose name passes git's rules,
 *   or a commit id; the branch's commit comes from its loose ref or
 *   `packed-refs` (a reftable repository reads as none).
 */

export interface Repository {
  readonly head: GitHead
  /** the repository's common directory: `.git`, or a linked worktree's main one */
  readonly commonDir: string
  /** where its objects are: `<commonDir>/objects` */
  readonly objects: string
}

const SMALL = 4096
const PACKED_REFS_MAX = 64 * 1024 * 1024
const OBJECT_ID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/

/** The repository whose top level is `directory`, or undefined. */
export async function findRepository(directory: string): Promise<Repository | undefined> {
  try {
    const dotGit = join(directory, '.git')
    const st = await lstat(dotGit).catch(() => undefined)
    let gitDir: string
    let commonDir: string
    if (st?.isDirectory()) {
      gitDir = dotGit
      commonDir = dotGit
    } else if (st?.isFile()) {
      const linked = await linkedWorktree(dotGit)
      if (!linked) return undefined
      ;({ gitDir, commonDir } = linked)
    } else return undefined
    const head = await readHead(gitDir, commonDir)
    return head && { head, commonDir, objects: join(commonDir, 'objects') }
  } catch {
    return undefined
  }
}

/** A `.git` file's linked worktree, only when that worktree's `gitdir` names this file back. */
async function linkedWorktree(dotGit: string): Promise<{ gitDir: string; commonDir: string } | undefined> {
  const pointer = /^gitdir: (.+)$/.exec(trimLine(await readSmall(dotGit)))
  if (!pointer?.[1]) return undefined
  const gitDir = resolve(dirname(dotGit), pointer[1])
  const back = trimLine(await readSmall(join(gitDir, 'gitdir')))
  if (!back || !isAbsolute(back)) return undefined
  const [named, self] = await Promise.all([realpath(back).catch(() => undefined), realpath(dotGit)])
  if (named !== self) return undefined
  const common = trimLine(await readSmall(join(gitDir, 'commondir')))
  if (!common) return undefined
  return { gitDir, commonDir: resolve(gitDir, common) }
}

async function readHead(gitDir: string, commonDir: string): Promise<GitHead | undefined> {
  const head = trimLine(await readSmall(join(gitDir, 'HEAD')))
  if (OBJECT_ID.test(head)) return { commit: head }
  const ref = /^ref: (refs\/heads\/.+)$/.exec(head)?.[1]
  if (!ref || !isBranchRef(ref)) return undefined
  const branch = ref.slice('refs/heads/'.length)
  const loose = await readSmall(join(commonDir, ref), true)
  if (loose !== undefined) {
    const commit = trimLine(loose)
    return OBJECT_ID.test(commit) ? { commit, branch } : undefined
  }
  const packed = await readRegular(join(commonDir, 'packed-refs'), PACKED_REFS_MAX, true)
  const commit = packed === undefined ? undefined : packedRef(packed, ref)
  if (commit === null) return undefined
  // no commit on the branch yet: a repository just made (`git status` says "No commits yet")
  return commit === undefined ? { branch } : { commit, branch }
}

/** The commit `packed-refs` names for `ref`: undefined when it names none, null when what it says is not an id. */
function packedRef(packed: Buffer, ref: string): string | null | undefined {
  // a ref name holds no space: ` <ref>\n` is the end of its line and nothing else
  const at = packed.indexOf(Buffer.from(` ${ref}\n`))
  if (at === -1) return undefined
  const id = packed.subarray(packed.lastIndexOf(10, at) + 1, at).toString('latin1')
  return OBJECT_ID.test(id) ? id : null
}

/**
 * A branch ref git would accept (git-check-ref-format): no empty, `.`-led
 * or `.lock` component, no `..`, `@{`, control characters, space or any of
 * `~^:?*[\`, no trailing `/` or `.`. It is also a path inside the common
 * directory: no component can climb out of it.
 */
export function isBranchRef(ref: string): boolean {
  if (!ref.startsWith('refs/heads/') || ref.length > 255) return false
  if (ref.includes('..') || ref.includes('@{') || ref.endsWith('.') || ref === 'refs/heads/@') return false
  if ([...ref].some((c) => c <= ' ' || c === '\x7f') || /[~^:?*[\\]/.test(ref)) return false
  return ref.split('/').every((part) => part !== '' && !part.startsWith('.') && !part.endsWith('.lock'))
}

/** Whether two recorded HEADs name the same commit and branch. */
export function sameHead(a: GitHead | undefined, b: GitHead | undefined): boolean {
  return a?.commit === b?.commit && a?.branch === b?.branch
}

function trimLine(text: Buffer | undefined): string {
  return text === undefined ? '' : text.toString('utf8').replace(/\r?\n$/, '')
}

function readSmall(path: string, absentOk = false): Promise<Buffer | undefined> {
  return readRegular(path, SMALL, absentOk)
}

/** A file of the repository, read by the same rules: undefined when absent; a throw when not a small regular file. */
export function readRepositoryFile(path: string, max: number): Promise<Buffer | undefined> {
  return readRegular(path, max, true)
}

/**
 * A regular file's bytes, at most `max` of them (a longer file is refused):
 * opened without following a final symlink and non-blocking, checked on the
 * descriptor. Absent: undefined when `absentOk`, else a throw (as for
 * anything else).
 */
async function readRegular(path: string, max: number, absentOk = false): Promise<Buffer | undefined> {
  const flags = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY
  const handle = await open(path, flags).catch((err: NodeJS.ErrnoException) => {
    if (absentOk && err.code === 'ENOENT') return undefined
    throw err
  })
  if (!handle) return undefined
  try {
    const st: Stats = await handle.stat()
    if (!st.isFile() || st.size > max) throw new Error(`${path} is not a small regular file`)
    const buffer = Buffer.alloc(st.size)
    const { bytesRead } = await handle.read(buffer, 0, st.size, 0)
    return buffer.subarray(0, bytesRead)
  } finally {
    await handle.close()
  }
}

/**
 * The object directories git would read for `objects` — it and, following
 * each `info/alternates` (five deep, as git does), the ones it borrows from —
 * as real paths; undefined when any is `hidden` (what the sandbox hides: the
 * data dir, the user's credentials) — but for `objects` itself where
 * `copied` says so — or cannot be read as git would (a quoted entry).
 */
export async function objectDirectories(
  objects: string,
  hidden: (real: string) => boolean,
  /** a hidden place `objects` itself may lie in (it is copied, not borrowed: a fork's own `.git`) */
  copied?: (real: string) => boolean,
): Promise<string[] | undefined> {
  const found: string[] = []
  const visit = async (dir: string, depth: number): Promise<boolean> => {
    const real = await realpath(dir).catch(() => undefined)
    if (!real || !(await lstat(real)).isDirectory()) return depth > 0 // git skips a missing alternate
    if (real.includes('\n')) return false // an alternates file cannot name it unquoted
    if (hidden(real) && !(depth === 0 && copied?.(real))) return false
    if (found.includes(real)) return true
    found.push(real)
    const list = await readRegular(join(real, 'info', 'alternates'), SMALL * 16, true)
    if (list === undefined) return true
    if (depth >= 5) return false
    for (const line of list.toString('utf8').split('\n')) {
      if (line === '' || line.startsWith('#')) continue
      if (line.startsWith('"')) return false
      if (!(await visit(resolve(real, line), depth + 1))) return false
    }
    return true
  }
  try {
    return (await visit(objects, 0)) ? found : undefined
  } catch {
    return undefined
  }
}
