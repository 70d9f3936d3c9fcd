import { lstatSync, readlinkSync, realpathSync, type Stats } from 'node:fs'

/**
 * Where the file open on a descriptor is (docs/SECURITY.md). A path is checked
 * (confined, refused) before it is opened, and a workspace process can swap a
 * name on it in between — the file for a link to a secret, a directory on the
 * way for a link out of the workspace. No check of the path, before or after
 * the open, closes that window: a fast swapper passes each one in turn. The
 * descriptor does: Linux's /proc/self/fd names the file the open reached.
 * Without /proc (macOS) the real path must still name the file opened, which
 * narrows the window without closing it.
 */
export function realPathOfOpened(fd: number, path: string, opened: Stats): string | undefined {
  try {
    return readlinkSync(`/proc/self/fd/${fd}`)
  } catch {
    try {
      const real = realpathSync(path)
      const named = lstatSync(real)
      return named.ino === opened.ino && named.dev === opened.dev ? real : undefined
    } catch {
      return undefined // gone, or swapped away
    }
  }
}
