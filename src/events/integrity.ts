import { statSync } from 'node:fs'
import Database from 'better-sqlite3'
import { checkChainTail } from './chain-check.js'

/**
 * Is this store file sound enough to serve? (docs/BACKUP.md "Damaged files")
 * SQLite's own check of its pages and b-trees, then the hash chain's last
 * events against the stored head. A full check of every event is
 * `chronicle verify`'s; this one's cost stays small on a large store:
 * quick_check reads each page once, the chain's tail is a few hundred rows.
 */

/** How many of the log's last events the start-up check hashes again. */
export const TAIL_EVENTS = 1000

export interface StoreCheck {
  /** empty: sound */
  readonly problems: readonly string[]
  readonly ms: number
}

/** PRAGMA quick_check (`full`: integrity_check, which also compares every index with its table) → its complaints. */
export function pageCheck(db: Database.Database, full = false): string[] {
  const rows = db.pragma(full ? 'integrity_check' : 'quick_check', { simple: false }) as Record<string, string>[]
  const lines = rows.map((row) => String(Object.values(row)[0]))
  return lines.length === 1 && lines[0] === 'ok' ? [] : lines
}

/**
 * Opens the file on its own connection (SQLite replays the WAL's complete
 * commits as it opens: a torn tail is dropped) and checks it; a file SQLite
 * cannot read at all is one problem. A new (empty) file has nothing to check.
 */
export function checkStoreFile(path: string, options: { full?: boolean; tail?: number } = {}): StoreCheck {
  const started = performance.now()
  if (statSync(path, { throwIfNoEntry: false })?.size === 0) return { problems: [], ms: 0 }
  let db: Database.Database | undefined
  const problems: string[] = []
  try {
    db = new Database(path, { fileMustExist: true })
    db.pragma('busy_timeout = 5000')
    problems.push(...pageCheck(db, options.full).map((line) => `SQLite: ${line}`))
    const hasLog = db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'event_log'").get() !== undefined
    if (problems.length === 0 && hasLog) {
      const tail = checkChainTail(db, options.tail ?? TAIL_EVENTS)
      for (const b of tail.breaks.slice(0, 5))
        problems.push(`hash chain: seq ${b.seq}${b.sessionId && ` (${b.sessionId})`}: ${b.reason}`)
    }
  } catch (err) {
    problems.push(`SQLite cannot read it: ${(err as Error).message}`)
  } finally {
    db?.close()
  }
  return { problems, ms: performance.now() - started }
}

/** The message a damaged store is refused with: the file, what is wrong, and what the user can do. */
export function damagedMessage(path: string, problems: readonly string[]): string {
  return (
    `the store ${path} is damaged and will not be served: ${problems.slice(0, 3).join('; ')}` +
    `${problems.length > 3 ? ` (and ${problems.length - 3} more)` : ''}. ` +
    '`chronicle verify` (server stopped) names every damaged event and read model; ' +
    '`chronicle restore <backup>` puts a backup back, keeping this store aside (docs/BACKUP.md)'
  )
}
