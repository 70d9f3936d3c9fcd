import { type Dirent, readdirSync } from 'node:fs'
import { join, relative, sep } from 'node:path'

/** Directories the search tools skip unless asked for explicitly. */
export const DEFAULT_IGNORES = ['.git', 'node_modules', '.chronicle', 'dist', 'build', '.next', '.cache', '__pycache__', '.venv', 'coverage']

export interface WalkEntry {
  readonly path: string
  /** relative to the walk root, with forward slashes */
  readonly relative: string
  readonly dirent: Dirent
}

/**
 * Depth-first, pre-order walk in name order that does not follow symlinked directories (so a link
 * cannot lead a search outside the root), stopping after `limit` entries.
 */
export function* walk(
  root: string,
  opts: { ignore?: (relative: string, name: string, isDir: boolean) => boolean; limit?: number } = {},
): Generator<WalkEntry> {
  const limit = opts.limit ?? 100_000
  let seen = 0
  function* visit(dir: string): Generator<WalkEntry, boolean> {
    let entries: Dirent[]
    try {
      entries = readdirSync(dir, { withFileTypes: true })
    } catch {
      return true
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    for (const dirent of entries) {
      const path = join(dir, dirent.name)
      const rel = relative(root, path).split(sep).join('/')
      const isDir = dirent.isDirectory()
      if (opts.ignore?.(rel, dirent.name, isDir)) continue
      if (++seen > limit) return false
      yield { path, relative: rel, dirent }
      if (isDir && !(yield* visit(path))) return false
    }
    return true
  }
  yield* visit(root)
}

/**
 * A glob as a RegExp over forward-slash relative paths: `**` any number of
 * directories, `*` and `?` within one segment, `{a,b}` alternatives, `[…]`
 * classes. A pattern without a slash matches the base name anywhere.
 */
export function globToRegExp(glob: string): RegExp {
  const anywhere = !glob.includes('/')
  let re = ''
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i] as string
    if (c === '*') {
      if (glob[i + 1] === '*') {
        const slash = glob[i + 2] === '/'
        re += slash ? '(?:.*/)?' : '.*'
        i += slash ? 2 : 1
      } else re += '[^/]*'
    } else if (c === '?') re += '[^/]'
    else if (c === '{') {
      const end = glob.indexOf('}', i)
      if (end < 0) re += '\\{'
      else {
        re += `(?:${glob.slice(i + 1, end).split(',').map(escape).join('|')})`
        i = end
      }
    } else if (c === '[') {
      const end = glob.indexOf(']', i + 1)
      if (end < 0) re += '\\['
      else {
        re += `[${glob.slice(i + 1, end).replace(/^!/, '^').replace(/\\/g, '\\\\')}]`
        i = end
      }
    } else re += escape(c)
  }
  return new RegExp(anywhere ? `(?:^|/)${re}$` : `^${re.replace(/^\.\//, '')}$`)
}

function escape(s: string): string {
  return s.replace(/[.+^${}()|[\]\\*?]/g, '\\$&')
}
