import { type CredentialPaths, NOTHING_HIDDEN } from '../credentials/credential-paths.js'
import { isWithin, realpathNearest, type ResolvedPath } from '../paths.js'
import type { ToolContext } from '../tool.js'
import { DEFAULT_IGNORES, type WalkEntry } from '../walk.js'

/**
 * What glob, grep and list may see under their root. The walk never enters a
 * forbidden root (Chronicle's data directory, even inside the workspace), the
 * user's hidden credentials (`~/.ssh`, …: left out without asking, unless the
 * walk starts inside the one it meets — its root asked `credentials`), a
 * dependency or VCS directory (DEFAULT_IGNORES, by name), or a directory whose
 * `read` the rules deny — listing a directory is reading it. Entries are
 * named for the rules as the read tool names them: relative to the session
 * directory when inside it, else absolute, so `read .env ask` and
 * `read secrets/* deny` mean the same to every tool.
 */
export interface SearchScope {
  /** the path the read rules see for an entry */
  display(entry: WalkEntry): string
  /** whether the walk leaves the entry (and everything under it) out */
  skip(entry: WalkEntry): boolean
}

export function createSearchScope(
  ctx: ToolContext,
  root: ResolvedPath,
  forbidden: readonly string[],
  credentials: CredentialPaths = NOTHING_HIDDEN,
): SearchScope {
  // a forbidden root that holds the session directory (a fork's, under the data dir) closes everything but it
  const own = realpathNearest(ctx.directory)
  const closed = forbidden.map(realpathNearest)
  const hidden = credentials.view(ctx.directory)
  const meetsHidden = hidden.reaches(root.real)
  const isHidden = (path: string) => {
    const covering = meetsHidden ? hidden.hiding(path) : undefined
    return covering !== undefined && !isWithin(covering, root.real)
  }
  const prefix = root.inside && root.display !== '.' ? `${root.display}/` : ''
  const display = (entry: WalkEntry) => (root.inside ? prefix + entry.relative : entry.path)
  return {
    display,
    skip(entry) {
      if (closed.some((c) => isWithin(c, entry.path) && !(c !== own && isWithin(c, own) && isWithin(own, entry.path))))
        return true
      if (isHidden(entry.path)) return true
      if (!entry.dirent.isDirectory()) return false
      return (
        DEFAULT_IGNORES.includes(entry.dirent.name) ||
        ctx.check({ permission: 'read', patterns: [display(entry)] }) === 'deny'
      )
    },
  }
}
