import { existsSync, lstatSync, readdirSync, realpathSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { isWithin, realpathNearest } from '../paths.js'
import { isGlob, segmentMatches } from './entry.js'

/**
 * The paths hidden from tools (docs/SECURITY.md "What the sandbox hides"):
 * the user's credentials by default, plus `sandbox.hide`, less
 * `sandbox.reveal`. Both bash's sandbox (an empty directory or /dev/null
 * mounted over each) and the file tools (which ask `credentials`) read them
 * through a view taken when the command runs or the tool is called, so a
 * credentials file created after the server started is hidden too, and a
 * glob such as `~/.cargo/credentials*` names what exists then.
 *
 * The most specific entry covering a path decides: `reveal ~/.ssh/known_hosts`
 * takes that file back from a hidden `~/.ssh`, and `hide ~/.ssh/id_work`
 * inside a revealed `~/.ssh` stays hidden; a reveal of exactly a hidden path
 * wins. Paths compare as real paths (symlinks resolved), so `~/.ssh` that is
 * a link to `/mnt/keys/ssh` hides `/mnt/keys/ssh`. A session directory that
 * lies inside a hidden path is not hidden from its own session.
 */
export interface CredentialPathsOptions {
  /** absolute patterns to hide: the defaults (defaults.ts) and the user's `sandbox.hide` */
  readonly hide: readonly string[]
  /** absolute patterns taken back: the user's `sandbox.reveal` */
  readonly reveal?: readonly string[]
}

export interface CredentialMount {
  /** an existing real path */
  readonly path: string
  readonly action: 'hide' | 'reveal'
}

export interface CredentialView {
  /** the hidden path that covers `real` (a real path), or undefined when the tools may see it */
  hiding(real: string): string | undefined
  /** whether a walk of `dir` (a real path) may meet a hidden path, so its entries must be checked */
  reaches(dir: string): boolean
  /** what exists now to hide, or to take back inside a hidden path, for the sandbox */
  readonly mounts: readonly CredentialMount[]
}

export interface CredentialPaths {
  /** the hidden paths as they are now, seen from a session working in `workspace` */
  view(workspace: string): CredentialView
}

/** No path hidden: embedders and specs that do not exercise hiding. */
export const NOTHING_HIDDEN: CredentialPaths = {
  view: () => ({ hiding: () => undefined, reaches: () => false, mounts: [] }),
}

interface Pattern {
  readonly action: 'hide' | 'reveal'
  readonly segments: readonly string[]
  /** index of the first segment holding a wildcard, -1 when none */
  readonly firstGlob: number
}

/** A pattern as it is now: where it starts (real) and, for a glob, the segments still to match. */
interface Resolved {
  readonly action: 'hide' | 'reveal'
  /** a real path (for a path that does not exist: its nearest existing ancestor's real path, plus the rest) */
  readonly root: string
  /** segments after `root` a covered path must match (a glob's), empty for a plain path */
  readonly rest: readonly string[]
  /** what exists now: `root` itself, or the glob's matches */
  readonly existing: readonly string[]
}

export function credentialPaths(options: CredentialPathsOptions): CredentialPaths {
  const patterns = [
    ...options.hide.map((p) => compile(p, 'hide')),
    ...(options.reveal ?? []).map((p) => compile(p, 'reveal')),
  ]
  return {
    view(workspace) {
      const own = realpathNearest(workspace)
      const real = realPaths()
      const resolved = patterns.map((p) => resolve(p, real))
      const mounts = resolved.flatMap((r) => r.existing.map((path) => ({ path, action: r.action })))
      return {
        mounts,
        reaches: (dir) => resolved.some((r) => isWithin(dir, r.root) || isWithin(r.root, dir)),
        hiding(real) {
          let best: { root: string; depth: number; action: 'hide' | 'reveal' } | undefined
          const consider = (root: string, action: 'hide' | 'reveal') => {
            const depth = depthOf(root)
            // deeper is more specific; at the same path a reveal wins
            if (!best || depth > best.depth || (depth === best.depth && action === 'reveal'))
              best = { root, depth, action }
          }
          for (const r of resolved) {
            for (const path of r.existing) if (isWithin(path, real)) consider(path, r.action)
            const lexical = coveredBy(r, real)
            if (lexical !== undefined) consider(lexical, r.action)
          }
          if (best?.action !== 'hide') return undefined
          // a session directory inside a hidden path: its own files are its own
          if (isWithin(best.root, own) && isWithin(own, real)) return undefined
          return best.root
        },
      }
    },
  }
}

function compile(pattern: string, action: 'hide' | 'reveal'): Pattern {
  const segments = pattern.split('/').filter((s) => s !== '')
  return { action, segments, firstGlob: segments.findIndex(isGlob) }
}

function resolve(p: Pattern, real: RealPaths): Resolved {
  if (p.firstGlob < 0) {
    const { path, exists } = real(`/${p.segments.join('/')}`)
    return { action: p.action, root: path, rest: [], existing: exists ? [path] : [] }
  }
  const { path: root } = real(`/${p.segments.slice(0, p.firstGlob).join('/')}`)
  const rest = p.segments.slice(p.firstGlob)
  return { action: p.action, root, rest, existing: expand(root, rest) }
}

type RealPaths = (path: string) => { readonly path: string; readonly exists: boolean }

/**
 * realpathNearest (paths.ts) for many paths at once, as cheaply as a command's start needs: the
 * patterns share parents (HOME, ~/.config), which are resolved once, and most name nothing on a
 * given machine, so a missing path costs a stat, not a thrown error per level up.
 */
function realPaths(): RealPaths {
  const memo = new Map<string, { path: string; exists: boolean }>()
  const real: RealPaths = (path) => {
    const known = memo.get(path)
    if (known) return known
    let found: { path: string; exists: boolean }
    if (existsSync(path)) found = { path: realpathSync.native(path), exists: true }
    else if (isSymlink(path))
      found = { path: realpathNearest(path), exists: false } // dangling: where a write through it would land
    else {
      const parent = dirname(path)
      found = { path: parent === path ? path : join(real(parent).path, basename(path)), exists: false }
    }
    memo.set(path, found)
    return found
  }
  return real
}

/** The existing paths under `dir` whose segments match `rest`, as real paths. */
function expand(dir: string, rest: readonly string[]): string[] {
  const [head, ...tail] = rest
  if (head === undefined) {
    try {
      return [realpathSync(dir)]
    } catch {
      return [] // a dangling link: nothing there to read
    }
  }
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    return [] // absent, or not a directory
  }
  return names.filter((n) => segmentMatches(n, head)).flatMap((n) => expand(join(dir, n), tail))
}

/** The prefix of `real` a pattern names, when it does — for paths that need not exist (a file about to be written). */
function coveredBy(r: Resolved, real: string): string | undefined {
  if (!isWithin(r.root, real)) return undefined
  if (r.rest.length === 0) return r.root
  const below = real
    .slice(r.root.length)
    .split('/')
    .filter((s) => s !== '')
  if (below.length < r.rest.length) return undefined
  for (const [i, segment] of r.rest.entries()) if (!segmentMatches(below[i] as string, segment)) return undefined
  return join(r.root, ...below.slice(0, r.rest.length))
}

function isSymlink(path: string): boolean {
  try {
    return lstatSync(path, { throwIfNoEntry: false })?.isSymbolicLink() ?? false
  } catch {
    return false // ENOTDIR: a file where a directory would be
  }
}

function depthOf(path: string): number {
  return path.split('/').filter((s) => s !== '').length
}
