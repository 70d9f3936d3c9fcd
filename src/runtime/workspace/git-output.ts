import { splitNul } from './git.js'

/**
 * Reading git's `-z` outputs. A path is whatever lies between two NULs (or
 * after the tab of its record), so spaces, tabs, newlines and any Unicode
 * come through as they are. Paths are decoded as UTF-8.
 */

/** A file's change between two trees, with its line counts (none for a binary file). */
export interface FileChange {
  readonly path: string
  readonly status: 'added' | 'modified' | 'deleted'
  readonly added?: number
  readonly removed?: number
  readonly binary?: true
}

/** One entry of a tree, listed recursively. */
export interface TreeEntry {
  readonly path: string
  /** bytes (0 for a gitlink) */
  readonly size: number
  /** git's octal mode: `100644`, `100755`, `120000` (symlink), `160000` (gitlink) */
  readonly mode: string
  readonly type: 'file' | 'symlink' | 'gitlink'
}

const STATUS: Readonly<Record<string, FileChange['status']>> = {
  A: 'added',
  D: 'deleted',
  M: 'modified',
  T: 'modified', // a type change (a file became a symlink…) is a modification of the path
}

/**
 * `git diff-tree -r -z --no-renames --raw --numstat A B` (or `diff-index`):
 * first the raw records, each `:<modes> <ids> <status>` NUL `<path>` NUL, then
 * the numstat records, each `<added>\t<removed>\t<path>` NUL, `-` counts for
 * a binary file. Joined by path, in git's (path) order.
 */
export function parseChanges(output: Buffer): FileChange[] {
  const records = splitNul(output)
  const kinds: [string, FileChange['status']][] = []
  const counts = new Map<string, { added?: number; removed?: number; binary?: true }>()
  for (let i = 0; i < records.length; i++) {
    const record = (records[i] as Buffer).toString('utf8')
    if (record.startsWith(':')) {
      const letter = record.slice(record.lastIndexOf(' ') + 1, record.lastIndexOf(' ') + 2)
      const status = STATUS[letter]
      if (!status) throw new Error(`unexpected git status '${letter}' in ${record}`)
      kinds.push([(records[++i] as Buffer).toString('utf8'), status])
      continue
    }
    const firstTab = record.indexOf('\t')
    const secondTab = record.indexOf('\t', firstTab + 1)
    if (firstTab < 0 || secondTab < 0) throw new Error(`unexpected numstat record: ${JSON.stringify(record)}`)
    const added = record.slice(0, firstTab)
    const removed = record.slice(firstTab + 1, secondTab)
    counts.set(
      record.slice(secondTab + 1),
      added === '-' ? { binary: true } : { added: Number(added), removed: Number(removed) },
    )
  }
  return kinds.map(([path, status]) => ({ path, status, ...counts.get(path) }))
}

/** `git ls-tree -z [-r] [-l] <tree>`: each record `<mode> <type> <id>[ <size padded>]\t<path>`. */
export function parseTree(output: Buffer): (TreeEntry & { readonly id: string; readonly kind: string })[] {
  return splitNul(output).map((raw) => {
    const tab = raw.indexOf(9) // the first tab ends the header; the path may hold more
    const [mode = '', kind = '', id = '', size = '-'] = raw.subarray(0, tab).toString('latin1').split(/ +/)
    return {
      path: raw.subarray(tab + 1).toString('utf8'),
      size: size === '-' ? 0 : Number(size),
      mode,
      type: mode === '120000' ? 'symlink' : mode === '160000' ? 'gitlink' : 'file',
      id,
      kind,
    }
  })
}
