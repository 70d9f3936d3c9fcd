import { randomBytes } from 'node:crypto'
import { lstat, mkdir, readdir, rename, rm } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { ChronicleError } from '../../events/errors.js'
import { type GitPlace, git } from './git.js'

/**
 * Writing a snapshot into a new directory (a fork with its files). The tree
 * is checked out beside the target, into `<target>.partial-<random>` with an
 * index of its own, and renamed into place at the end: an interrupted or
 * failed run never leaves a half-written target (a crash may leave the
 * partial directory, never the target). No hard links: git writes each file
 * from its compressed object, and there is no plain copy to link to.
 */

/**
 * Checks `tree` out into `destination` (absent or an empty directory); `index`
 * is left for the caller. `prepare` runs on the checkout before it is renamed
 * into place (a fork's `.git` is made there: src/runtime/workspace/fork-repository.ts).
 */
export async function checkoutInto(
  store: GitPlace,
  tree: string,
  destination: string,
  index: string,
  prepare?: (checkout: string) => Promise<void>,
): Promise<{ files: number; bytes: number }> {
  await requireEmpty(destination)
  await mkdir(dirname(destination), { recursive: true })
  const partial = `${destination}.partial-${randomBytes(6).toString('hex')}`
  await mkdir(partial)
  try {
    await git(['read-tree', '-u', '--reset', tree], { ...store, workTree: partial, index })
    const counted = await countFiles(partial)
    await prepare?.(partial)
    // rename(2) replaces an empty directory and fails on one that is not empty (someone wrote there meanwhile)
    await rename(partial, destination).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOTEMPTY' || err.code === 'EEXIST' || err.code === 'ENOTDIR') throw notEmpty(destination)
      throw err
    })
    return counted
  } catch (err) {
    await rm(partial, { recursive: true, force: true })
    throw err
  }
}

function notEmpty(directory: string): ChronicleError {
  return new ChronicleError('DIRECTORY_NOT_EMPTY', `${directory} exists and is not an empty directory`, { directory })
}

/** DIRECTORY_NOT_EMPTY unless `directory` is absent or an empty directory. */
export async function requireEmpty(directory: string): Promise<void> {
  const st = await lstat(directory).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return undefined // absent: creating it says whether it can be
    throw err
  })
  if (st && (!st.isDirectory() || (await readdir(directory)).length > 0)) throw notEmpty(directory)
}

/** Files and symlinks under a directory, and their bytes (a gitlink's empty directory counts for nothing). */
async function countFiles(directory: string): Promise<{ files: number; bytes: number }> {
  let files = 0
  let bytes = 0
  const walk = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true })
    const sizes = await Promise.all(
      entries.filter((entry) => !entry.isDirectory()).map((entry) => lstat(join(dir, entry.name))),
    )
    for (const st of sizes) (files += 1), (bytes += st.size)
    for (const entry of entries) if (entry.isDirectory()) await walk(join(dir, entry.name))
  }
  await walk(directory)
  return { files, bytes }
}
