import {
  chmodSync,
  closeSync,
  existsSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  type Stats,
  statSync,
} from 'node:fs'
import { join } from 'node:path'
import { ChronicleError } from './events/errors.js'

/**
 * The data directory holds the log, the token and every session's saved tool
 * outputs: at every start it is made private again (docs/SECURITY.md). The
 * directory is 0700 and its files 0600 — fixed when looser, as a directory
 * made with a default umask (0755, 0644) would be; refused when another user
 * owns them or when an entry is a symlink (it could point anywhere).
 */

export const DB_FILE = 'chronicle.db'
const PRIVATE_FILES = [DB_FILE, `${DB_FILE}-wal`, `${DB_FILE}-shm`, 'chronicle.json']
const OUTPUTS = 'tool-output'

export interface DataDirOptions {
  /** the owner everything must have (default: this process's user) */
  readonly uid?: number
  /** false: the store is elsewhere (PostgreSQL), so no SQLite file is made here */
  readonly sqlite?: boolean
}

/** Creates or repairs the data directory; throws FORBIDDEN naming what is unsafe. Returns the database path. */
export function secureDataDir(dir: string, options: DataDirOptions = {}): string {
  const uid = options.uid ?? process.getuid?.()
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const stat = statSync(dir)
  if (!stat.isDirectory()) throw unsafe(`the data directory ${dir} is not a directory`)
  ownedBy(dir, stat, uid)
  if ((stat.mode & 0o077) !== 0) chmodSync(dir, 0o700)
  for (const name of PRIVATE_FILES) privateFile(join(dir, name), uid)
  const db = join(dir, DB_FILE)
  // SQLite creates its files with the mode of the umask; an empty file it opens as a new database.
  if (options.sqlite !== false && !existsSync(db)) closeSync(openSync(db, 'a', 0o600))
  const outputs = join(dir, OUTPUTS)
  if (existsSync(outputs)) privateTree(outputs, uid)
  return db
}

/**
 * The token file must be this user's regular file that nobody else can read:
 * one that others could read (as a file a repository ships would be, mode
 * 0644) may be known to them, so the server refuses it rather than trust it.
 */
export function assertPrivateToken(file: string, options: DataDirOptions = {}): void {
  const stat = lstatSync(file)
  if (!stat.isFile()) throw unsafe(`the token file ${file} is not a regular file (a symlink or device is refused)`)
  ownedBy(file, stat, options.uid ?? process.getuid?.())
  if ((stat.mode & 0o077) !== 0) {
    throw unsafe(
      `the token file ${file} is accessible by group or others (mode ${(stat.mode & 0o777).toString(8)}): anyone who read it could use it. ` +
        'Delete it to have a new token generated, or `chmod 600` it if you know it was never exposed.',
    )
  }
}

function privateFile(path: string, uid: number | undefined): void {
  let stat: Stats
  try {
    stat = lstatSync(path)
  } catch {
    return
  }
  if (!stat.isFile())
    throw unsafe(`${path} is not a regular file (a symlink or device in the data directory is refused)`)
  ownedBy(path, stat, uid)
  if ((stat.mode & 0o077) !== 0) chmodSync(path, 0o600)
}

/** Saved outputs: directories 0700, files 0600, no symlinks. */
function privateTree(dir: string, uid: number | undefined): void {
  const stat = lstatSync(dir)
  if (!stat.isDirectory()) throw unsafe(`${dir} is not a directory`)
  ownedBy(dir, stat, uid)
  if ((stat.mode & 0o077) !== 0) chmodSync(dir, 0o700)
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) privateTree(path, uid)
    else privateFile(path, uid)
  }
}

function ownedBy(path: string, stat: Stats, uid: number | undefined): void {
  if (uid === undefined || stat.uid === uid) return
  throw unsafe(
    `${path} belongs to user ${stat.uid}, not to this server's user ${uid}: refusing to use a data directory another user controls`,
  )
}

function unsafe(message: string): ChronicleError {
  return new ChronicleError('FORBIDDEN', message)
}
