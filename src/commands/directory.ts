import { realpathSync, statSync } from 'node:fs'
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'
import { ChronicleError } from '../events/errors.js'

/** A directory a session is to work in must be an absolute path to an existing directory (BAD_REQUEST otherwise). */
export function checkDirectory(directory: string): void {
  if (!isAbsolute(directory))
    throw new ChronicleError('BAD_REQUEST', `directory must be an absolute path: ${directory}`)
  const stat = statSync(directory, { throwIfNoEntry: false })
  if (!stat) throw new ChronicleError('BAD_REQUEST', `directory does not exist: ${directory}`)
  if (!stat.isDirectory()) throw new ChronicleError('BAD_REQUEST', `not a directory: ${directory}`)
}

/**
 * DIRECTORY_FORBIDDEN for a session directory inside Chronicle's data dir —
 * its tools could not reach it (docs/SECURITY.md) and its files would mix with
 * the server's — except a fork's own, strictly inside `<dataDir>/forks`.
 */
export function checkNotInDataDir(directory: string, dataDir: string | undefined): void {
  if (dataDir === undefined) return
  const data = realNearest(dataDir)
  const inside = relative(data, realNearest(directory))
  if (inside.startsWith('..') || isAbsolute(inside)) return
  const [first, ...rest] = inside.split(sep)
  if (first === 'forks' && rest.length > 0) return
  throw new ChronicleError(
    'DIRECTORY_FORBIDDEN',
    `${directory} is inside Chronicle's data directory; a session works elsewhere (a fork's own directory goes under ${join(dataDir, 'forks')})`,
    { directory },
  )
}

/** The real path of the nearest existing ancestor, with the rest re-attached. */
function realNearest(path: string): string {
  const full = resolve(path)
  try {
    return realpathSync(full)
  } catch {
    const parent = dirname(full)
    return parent === full ? full : join(realNearest(parent), basename(full))
  }
}
