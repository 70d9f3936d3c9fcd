import { lstatSync, readlinkSync, realpathSync } from 'node:fs'
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'
import type { CredentialPaths } from './credentials/credential-paths.js'
import { type ToolContext, ToolFailure } from './tool.js'

/**
 * Workspace confinement (docs/TOOLS.md, docs/SECURITY.md). A path resolves against
 * the session directory, then to its real path: symlinks resolved, and for a
 * path that does not exist yet, the real path of its nearest existing
 * ancestor plus the rest. It is inside when that real path equals the real
 * root or starts with the root plus a separator — so `/work-evil` is not
 * inside `/work`, and a symlink inside pointing outside is outside.
 */
export interface ResolvedPath {
  /** the real path (what the tool must operate on) */
  readonly real: string
  readonly inside: boolean
  /** relative to the session directory when inside, else the real path */
  readonly display: string
}

export function resolveInWorkspace(directory: string, filePath: string): ResolvedPath {
  const root = realpathNearest(directory)
  const real = realpathNearest(isAbsolute(filePath) ? resolve(filePath) : resolve(directory, filePath))
  const inside = isWithin(root, real)
  return { real, inside, display: inside ? relative(root, real) || '.' : real }
}

export function isWithin(root: string, candidate: string): boolean {
  return candidate === root || candidate.startsWith(root.endsWith(sep) ? root : root + sep)
}

/**
 * realpath of the nearest existing ancestor, with the missing tail re-attached.
 * A dangling symlink on the way is followed to where it points (a write
 * through `link → /elsewhere/new` lands there, so that is its real path).
 */
export function realpathNearest(path: string, hops = 0): string {
  const missing: string[] = []
  let current = resolve(path)
  for (;;) {
    try {
      return join(realpathSync(current), ...missing.reverse())
    } catch {
      const target = danglingTarget(current)
      if (target !== undefined && hops < MAX_LINK_HOPS)
        return join(realpathNearest(target, hops + 1), ...missing.reverse())
      const parent = dirname(current)
      if (parent === current) return resolve(path)
      missing.push(basename(current))
      current = parent
    }
  }
}

const MAX_LINK_HOPS = 40

/** Where a symlink that realpath cannot resolve points, or undefined when `path` is no symlink. */
function danglingTarget(path: string): string | undefined {
  try {
    if (!lstatSync(path).isSymbolicLink()) return undefined
    return resolve(dirname(path), readlinkSync(path))
  } catch {
    return undefined
  }
}

export interface AccessOptions {
  /** extra roots that need no external_directory permission (e.g. the session's own saved tool outputs) */
  readonly trusted?: readonly string[]
  /**
   * Roots no tool may touch, whatever the rules say: Chronicle's data directory
   * (database, token, every session's saved outputs) and its config file. They
   * are denied even when they lie inside the session directory.
   */
  readonly forbidden?: readonly string[]
  /**
   * The user's credentials (`~/.ssh`, …; docs/SECURITY.md "What the sandbox
   * hides"): a path inside one asks `credentials` (pattern: the real path), so
   * a symlink in the workspace pointing at a key asks too.
   */
  readonly credentials?: CredentialPaths
}

/**
 * Resolves a tool's path argument: a forbidden root is denied outright; a
 * path inside the user's hidden credentials asks `credentials`; a trusted
 * root or the session directory is accessed as is; anything else asks
 * `external_directory` for its directory (pattern `<dir>/*`).
 */
export async function accessPath(
  ctx: ToolContext,
  filePath: string,
  options: AccessOptions = {},
): Promise<ResolvedPath> {
  const resolved = resolveInWorkspace(ctx.directory, filePath)
  if (options.trusted?.some((t) => isWithin(realpathNearest(t), resolved.real))) return resolved
  assertNotForbidden(resolved, options.forbidden, ctx.directory)
  const hidden = options.credentials?.view(ctx.directory).hiding(resolved.real)
  if (hidden !== undefined) {
    await ctx.ask({
      permission: 'credentials',
      patterns: [resolved.real],
      always: [hidden, join(hidden, '*')],
      metadata: { filePath: resolved.real, hidden },
    })
  }
  if (resolved.inside) return resolved
  const dir = dirname(resolved.real)
  await ctx.ask({
    permission: 'external_directory',
    patterns: [resolved.real],
    always: [join(dir, '*')],
    metadata: { filePath: resolved.real },
  })
  return resolved
}

/** Throws `denied` when the path is, or lies inside, a forbidden root (the session's own directory excepted). */
export function assertNotForbidden(
  resolved: ResolvedPath,
  forbidden: readonly string[] = [],
  workspace?: string,
): void {
  if (!isForbidden(resolved.real, forbidden, workspace)) return
  throw new ToolFailure(
    'denied',
    `${resolved.display} is inside Chronicle's own data or configuration, which no tool may read or change.`,
    'PATH_FORBIDDEN',
  )
}

/**
 * Whether a path is, or lies inside, a forbidden root. A session directory
 * that lies strictly inside one (a fork's own directory under the data dir's
 * `forks/`; the server refuses any other there) stays open to its session:
 * that directory only, nothing else of the root.
 */
export function isForbidden(real: string, forbidden: readonly string[] = [], workspace?: string): boolean {
  const own = workspace === undefined ? undefined : realpathNearest(workspace)
  return forbidden.some((root) => {
    const closed = realpathNearest(root)
    if (!isWithin(closed, real)) return false
    return !(own !== undefined && own !== closed && isWithin(closed, own) && isWithin(own, real))
  })
}
