import { constants, type Stats, statSync } from 'node:fs'
import { type FileHandle, open } from 'node:fs/promises'
import { realPathOfOpened } from './opened-path.js'
import { ToolFailure } from './tool.js'

/**
 * Opening files for the file tools without ever blocking the server. A FIFO
 * blocks open() until a writer (or reader) appears and then blocks reads;
 * /dev/zero and /dev/urandom never end; a terminal device may become our
 * controlling terminal. So files are opened non-blocking (O_NONBLOCK: a FIFO
 * opens at once, or fails with ENXIO when written without a reader), without
 * taking a terminal (O_NOCTTY), and the open descriptor is fstat'ed: only a
 * regular file is used, and what was checked is what is read or written (no
 * window between a stat and the open). O_NONBLOCK has no effect on regular
 * files. The tools pass real paths, confined before the open; a workspace
 * process may swap a name on the way (to a link out of the workspace, to the
 * data directory) in between, so the descriptor must also be the file the
 * real path names, after the open (docs/SECURITY.md).
 */

/** `a FIFO (named pipe)`, `a character device`, … — for "<path> is <kind>, not a regular file". */
export function kindOf(stat: Stats): string {
  if (stat.isDirectory()) return 'a directory'
  if (stat.isFIFO()) return 'a FIFO (named pipe)'
  if (stat.isCharacterDevice()) return 'a character device'
  if (stat.isBlockDevice()) return 'a block device'
  if (stat.isSocket()) return 'a socket'
  if (stat.isSymbolicLink()) return 'a symbolic link'
  return 'not a regular file'
}

export function notRegular(display: string, stat: Stats): ToolFailure {
  const kind = kindOf(stat)
  return new ToolFailure(
    'failed',
    kind === 'not a regular file' ? `${display} is not a regular file` : `${display} is ${kind}, not a regular file`,
  )
}

export interface OpenedFile {
  readonly handle: FileHandle
  /** fstat of the open descriptor */
  readonly stat: Stats
}

/** Opens an existing regular file for reading; anything else fails at once with a clear message. */
export async function openRegularForRead(real: string, display: string): Promise<OpenedFile> {
  const handle = await openOrFail(real, display, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY)
  return checked(handle, real, display)
}

/**
 * Opens a regular file for writing, creating it if absent, and empties it —
 * only after fstat says it is a regular file (O_TRUNC at open would already
 * act on whatever is there). O_NOFOLLOW: the tools pass real paths, so a last
 * component that is a symlink was swapped in after the path was resolved. A
 * directory on the way swapped for a link can still make the open create an
 * empty file elsewhere; it is refused before anything is truncated or written.
 */
export async function openRegularForWrite(real: string, display: string): Promise<OpenedFile> {
  const flags =
    constants.O_WRONLY | constants.O_CREAT | constants.O_NONBLOCK | constants.O_NOCTTY | constants.O_NOFOLLOW
  const opened = await checked(await openOrFail(real, display, flags), real, display)
  await opened.handle.truncate(0)
  return opened
}

/** Replaces a regular file's content (creating the file), refusing anything else without blocking. */
export async function writeRegular(real: string, display: string, content: string | Uint8Array): Promise<void> {
  const { handle } = await openRegularForWrite(real, display)
  try {
    await handle.writeFile(content)
  } finally {
    await handle.close()
  }
}

/** A regular file's whole content as UTF-8. */
export async function readRegularText(real: string, display: string): Promise<string> {
  const { handle } = await openRegularForRead(real, display)
  try {
    return await handle.readFile('utf8')
  } finally {
    await handle.close()
  }
}

async function openOrFail(real: string, display: string, flags: number): Promise<FileHandle> {
  try {
    return await open(real, flags, 0o666)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT') throw new ToolFailure('failed', `File not found: ${display}`)
    if (code === 'EACCES' || code === 'EPERM') throw new ToolFailure('failed', `Permission denied: ${display}`)
    if (code === 'ELOOP') throw new ToolFailure('failed', `${display} is a symbolic link, not a regular file`)
    // ENXIO: a FIFO opened for writing with no reader, or a socket; EISDIR: a directory
    const stat = statSync(real, { throwIfNoEntry: false })
    if (stat && !stat.isFile()) throw notRegular(display, stat)
    throw new ToolFailure('failed', `Cannot open ${display}: ${(err as Error).message}`)
  }
}

async function checked(handle: FileHandle, real: string, display: string): Promise<OpenedFile> {
  const stat = await handle.stat()
  if (stat.isFile() && realPathOfOpened(handle.fd, real, stat) === real) return { handle, stat }
  await handle.close()
  if (!stat.isFile()) throw notRegular(display, stat)
  throw new ToolFailure('failed', `${display} was replaced while it was being opened: try again`)
}
