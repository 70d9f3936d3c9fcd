import { closeSync, constants, fstatSync, openSync, readSync, statSync } from 'node:fs'
import { sep } from 'node:path'
import { StringDecoder } from 'node:string_decoder'
import { realPathOfOpened } from './opened-path.js'

/** What `readInside` read: the head of the file, its real path and its full size. */
export interface ReadInside {
  readonly text: string
  readonly real: string
  readonly bytes: number
}

/**
 * The head of `path` (at most `maxBytes`) when it is a regular file inside
 * `root`, else undefined — for files the model is told as instructions
 * (AGENTS.md, SKILL.md: docs/SECURITY.md). Opened first, then checked through
 * the descriptor (src/tools/opened-path.ts): where the file opened is must be
 * inside, so a name swapped between a check and the read — to a link out of
 * the root, to a FIFO — is refused, never read. O_NONBLOCK: a FIFO swapped in
 * opens at once (and is refused) instead of stalling the server on open.
 */
export function readInside(root: string, path: string, maxBytes: number): ReadInside | undefined {
  if (!isFile(path)) return undefined // most directories have none: answered without opening anything
  let fd: number
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY)
  } catch {
    return undefined // gone since, or not readable
  }
  try {
    const opened = fstatSync(fd)
    if (!opened.isFile()) return undefined
    const real = realPathOfOpened(fd, path, opened)
    if (real === undefined || !within(root, real)) return undefined
    const buf = Buffer.allocUnsafe(maxBytes) // only the bytes read are decoded (a file may be huge)
    const text = new StringDecoder('utf8').write(buf.subarray(0, readSync(fd, buf, 0, maxBytes, 0)))
    return { text, real, bytes: opened.size }
  } catch {
    return undefined // swapped away while checked
  } finally {
    closeSync(fd)
  }
}

function within(root: string, path: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep)
}

/** Asked at every step for files most directories lack: a missing one is an answer, not a thrown error (~7 µs each). */
export function isFile(path: string): boolean {
  try {
    return statSync(path, { throwIfNoEntry: false })?.isFile() ?? false
  } catch {
    return false // not a directory on the way, no permission
  }
}
