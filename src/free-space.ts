import { statfsSync } from 'node:fs'
import { ChronicleError } from './events/errors.js'

/**
 * Free space on the data directory's filesystem (docs/BACKUP.md "A full
 * disk"). A server started with almost none would fail its first commits;
 * it says so at start instead, naming the directory, what is free and the
 * bound (`limits.minFreeBytes`).
 */
export function freeBytes(dir: string): number {
  const fs = statfsSync(dir)
  return fs.bavail * fs.bsize
}

export function checkFreeSpace(dir: string, minBytes: number): void {
  const free = freeBytes(dir)
  if (free >= minBytes) return
  throw new ChronicleError(
    'STORAGE_FULL',
    `only ${mib(free)} free on the filesystem of ${dir}, below the ${mib(minBytes)} the server needs to start (limits.minFreeBytes): free some space, or move the data directory (CHRONICLE_DATA_DIR)`,
    { dir, free, minBytes },
  )
}

export const mib = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(1)} MiB`
