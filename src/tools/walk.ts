import type { Dirent } from 'node:fs'
import { opendir } from 'node:fs/promises'
import { join } from 'node:path'
import { createTick, type Tick } from './search/time-slice.js'

/** Directories the search tools skip unless asked for explicitly. */
export const DEFAULT_IGNORES = [
  '.git',
  'node_modules',
  '.chronicle',
  'dist',
  'build',
  '.next',
  '.cache',
  '__pycache__',
  '.venv',
  'coverage',
]

/** Entries a walk visits at most, unless the caller sets `limit`. */
export const WALK_LIMIT = 100_000

export interface WalkEntry {
  readonly path: string
  /** relative to the walk root, with forward slashes */
  readonly relative: string
  readonly dirent: Dirent
}

export interface WalkOptions {
  /** leaves an entry out — for a directory, with everything under it */
  readonly skip?: (entry: WalkEntry) => boolean
  /** stop after this many entries (default WALK_LIMIT) */
  readonly limit?: number
  /** when to let the event loop run (default: every 10 ms of work, the consumer's included) */
  readonly tick?: Tick
}

/**
 * Depth-first, pre-order walk in name order that does not follow symlinked
 * directories (so a link cannot lead a search outside the root), stopping
 * after `limit` entries. Directories are read asynchronously and the walk
 * yields to the event loop every few milliseconds, so a tree of any size
 * never stalls the server; a directory with more than `limit` entries is read
 * only that far (which of them come first is then up to the file system).
 */
export async function* walk(root: string, opts: WalkOptions = {}): AsyncGenerator<WalkEntry> {
  const limit = opts.limit ?? WALK_LIMIT
  const tick = opts.tick ?? createTick()
  let seen = 0
  const stack: { dir: string; relative: string; entries: Dirent[]; next: number }[] = [
    { dir: root, relative: '', entries: await entriesOf(root, limit), next: 0 },
  ]
  while (stack.length > 0) {
    const top = stack[stack.length - 1] as (typeof stack)[number]
    const dirent = top.entries[top.next++]
    if (!dirent) {
      stack.pop()
      continue
    }
    const entry: WalkEntry = {
      path: join(top.dir, dirent.name),
      relative: top.relative ? `${top.relative}/${dirent.name}` : dirent.name,
      dirent,
    }
    await tick()
    if (opts.skip?.(entry)) continue
    if (++seen > limit) return
    yield entry
    if (dirent.isDirectory())
      stack.push({ dir: entry.path, relative: entry.relative, entries: await entriesOf(entry.path, limit), next: 0 })
  }
}

/** A directory's entries in name order (at most `cap` of them); none when it cannot be read. */
async function entriesOf(dir: string, cap: number): Promise<Dirent[]> {
  const entries: Dirent[] = []
  try {
    const handle = await opendir(dir, { bufferSize: 256 })
    try {
      for (let d = await handle.read(); d && entries.length < cap; d = await handle.read()) entries.push(d)
    } finally {
      await handle.close()
    }
  } catch {
    return []
  }
  return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
}
