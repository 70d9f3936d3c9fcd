import Database from 'better-sqlite3'
import { type ChainBreak, checkChainInSteps } from './chain-check.js'

/**
 * A consistent copy of the live store's file while it serves (docs/BACKUP.md):
 * SQLite's online backup, a few hundred pages a step with the event loop free
 * between steps. The copy is taken through the store's own connection, so an
 * append committed during it is copied too (SQLite updates the pages already
 * copied) instead of restarting it: the copy is the log as of the last step,
 * whole commits only. Then the copy becomes a single file (no WAL) and its
 * chain is checked, in slices, giving the seq and the head digest it holds.
 */

/** Pages a step copies: 256 × 2 KiB pages takes about a millisecond; the loop runs between steps. */
export const PAGES_PER_STEP = 256

export interface DatabaseCopy {
  /** the last seq the copy holds */
  readonly seq: number
  /** the whole-log digest at that seq (src/events/chain.ts) */
  readonly digest: string
  readonly events: number
  /** where the copy's chains break: none for a sound store */
  readonly breaks: readonly ChainBreak[]
  readonly pages: number
  /** copying the pages, then checking the chain */
  readonly copyMs: number
  readonly checkMs: number
}

export async function copyDatabase(
  db: Database.Database,
  dest: string,
  options: { pagesPerStep?: number } = {},
): Promise<DatabaseCopy> {
  const pagesPerStep = options.pagesPerStep ?? PAGES_PER_STEP
  const started = performance.now()
  const { totalPages } = await db.backup(dest, { progress: () => pagesPerStep })
  const copied = performance.now()
  const copy = new Database(dest, { fileMustExist: true })
  try {
    // the source is in WAL mode and so is its copy's header: one self-contained file is what a backup should be
    copy.pragma('journal_mode = DELETE')
    const chain = await checkChainInSteps(copy)
    return {
      seq: chain.head.seq,
      digest: chain.head.digest,
      events: chain.events,
      breaks: chain.breaks,
      pages: totalPages,
      copyMs: Math.round(copied - started),
      checkMs: Math.round(performance.now() - copied),
    }
  } finally {
    copy.close()
  }
}
