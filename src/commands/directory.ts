import { statSync } from 'node:fs'
import { isAbsolute } from 'node:path'
import { ChronicleError } from '../events/errors.js'

/** A directory a session is to work in must be an absolute path to an existing directory (BAD_REQUEST otherwise). */
export function checkDirectory(directory: string): void {
  if (!isAbsolute(directory))
    throw new ChronicleError('BAD_REQUEST', `directory must be an absolute path: ${directory}`)
  const stat = statSync(directory, { throwIfNoEntry: false })
  if (!stat) throw new ChronicleError('BAD_REQUEST', `directory does not exist: ${directory}`)
  if (!stat.isDirectory()) throw new ChronicleError('BAD_REQUEST', `not a directory: ${directory}`)
}
