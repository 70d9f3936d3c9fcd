import { constants } from 'node:fs'
import { access, lstat } from 'node:fs/promises'
import { splitNul } from './git.js'

/**
 * What a snapshot hands to git. `git ls-files -t -z --others --modified
 * --exclude-standard` names every path that may have changed since the
 * workspace's index was last written: untracked files that are not ignored
 * (`?`, a nested repository as `dir/`) and tracked ones whose file differs
 * from the index by its stat data (`C`, deletions included). Each is looked
 * at here, before git reads a byte of it:
 *
 * - a regular file over the size cap is never given to git (not hashed, not
 *   stored); it is listed as large, and dropped from the index if it was in it;
 * - a tracked path that is gone, unreadable, no longer a file, symlink or
 *   directory (a fifo…), or that now lies beyond a symlink, is dropped from
 *   the index (`--force-remove`: `update-index` refuses paths beyond a symlink);
 * - a new nested repository is added on its own: one without a commit cannot
 *   be a gitlink, and `update-index` would stop on it;
 * - everything else is added (`--add --remove --replace`), a symlink as a
 *   symlink, a directory that was a tracked file by removing the file.
 *
 * Paths stay the bytes git gave (a name that is not UTF-8 still round-trips).
 */

export interface Candidates {
  /** for `update-index -z --add --remove --replace --stdin` */
  readonly add: Buffer[]
  /** for `update-index -z --force-remove --stdin` */
  readonly drop: Buffer[]
  /** untracked nested repositories, without the trailing slash */
  readonly repositories: Buffer[]
  /** files over the cap, by path */
  readonly large: { path: string; size: number }[]
  /** tracked files that are directories now (dropped): what they hold is listed only when git looked inside */
  readonly became: Buffer[]
}

export async function sortCandidates(directory: string, listed: Buffer, maxFileBytes: number): Promise<Candidates> {
  const sorted: Candidates = { add: [], drop: [], repositories: [], large: [], became: [] }
  const base = Buffer.from(`${directory}/`)
  const realDirectories = new Map<string, Promise<boolean>>()
  const isRealDirectory = (prefix: Buffer) => {
    const key = prefix.toString('latin1')
    let known = realDirectories.get(key)
    if (!known) {
      known = lstat(Buffer.concat([base, prefix])).then(
        (st) => st.isDirectory(),
        () => false,
      )
      realDirectories.set(key, known)
    }
    return known
  }
  const beyondSymlink = async (path: Buffer) => {
    for (let slash = path.indexOf(0x2f); slash !== -1; slash = path.indexOf(0x2f, slash + 1))
      if (!(await isRealDirectory(path.subarray(0, slash)))) return true
    return false
  }

  const seen = new Set<string>()
  const records: { path: Buffer; tracked: boolean }[] = []
  for (const record of splitNul(listed)) {
    const path = record.subarray(2) // `? path` or `C path`
    const key = path.toString('latin1')
    if (seen.has(key)) continue // a deleted file is listed once per flag it matches
    seen.add(key)
    records.push({ path, tracked: record[0] !== 0x3f })
  }

  await Promise.all(
    records.map(async ({ path, tracked }) => {
      if (!tracked && path[path.length - 1] === 0x2f) return void sorted.repositories.push(path.subarray(0, -1))
      if (tracked && (await beyondSymlink(path))) return void sorted.drop.push(path)
      const full = Buffer.concat([base, path])
      const st = await lstat(full).catch(() => undefined)
      if (!st) return void (tracked && sorted.drop.push(path))
      if (st.isFile()) {
        if (st.size > maxFileBytes) {
          sorted.large.push({ path: path.toString('utf8'), size: st.size })
          return void (tracked && sorted.drop.push(path))
        }
        const readable = await access(full, constants.R_OK).then(
          () => true,
          () => false,
        )
        if (!readable) return void (tracked && sorted.drop.push(path))
        return void sorted.add.push(path)
      }
      // a tracked file replaced by a directory leaves the index (adding a directory by name fails); its files
      // are candidates of their own
      const repository = async () =>
        lstat(Buffer.concat([full, Buffer.from('/.git')])).then(
          () => true,
          () => false,
        )
      // (a tracked directory that holds a repository is a gitlink: updated by name)
      if (tracked && st.isDirectory() && !(await repository())) {
        sorted.drop.push(path)
        return void sorted.became.push(path)
      }
      if (st.isSymbolicLink() || st.isDirectory()) return void sorted.add.push(path)
      if (tracked) sorted.drop.push(path)
    }),
  )
  sorted.large.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
  return sorted
}

/** NUL-terminated records, as `--stdin` with `-z` reads them. */
export function joinNul(paths: readonly Buffer[]): Buffer {
  return Buffer.concat(paths.flatMap((path) => [path, Buffer.alloc(1)]))
}
