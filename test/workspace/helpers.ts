import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative } from 'node:path'

/** A fresh temporary directory (real path), removed by the returned cleanup. */
export function tempDir(prefix: string): { dir: string; cleanup: () => void } {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), `chronicle-ws-${prefix}-`)))
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) }
}

/** Writes files (creating parent directories): path → content. */
export function writeFiles(root: string, files: Record<string, string | Buffer>): void {
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true })
    writeFileSync(join(root, path), content)
  }
}

/**
 * Every file, symlink and directory under root with its content hash (a
 * symlink by its target, a directory by its mode), by relative path — the
 * directory as a value to compare with `toEqual`. `skip` names top-level
 * entries to leave out.
 */
export function hashTree(root: string, skip: readonly string[] = []): Record<string, string> {
  const out: Record<string, string> = {}
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const full = join(dir, name)
      const path = relative(root, full)
      if (skip.includes(path)) continue
      const st = lstatSync(full)
      if (st.isSymbolicLink()) out[path] = `symlink:${readlinkSync(full)}`
      else if (st.isDirectory()) {
        out[`${path}/`] = `dir:${(st.mode & 0o777).toString(8)}`
        walk(full)
      } else out[path] = `${(st.mode & 0o777).toString(8)}:${sha256(readFileSync(full))}`
    }
  }
  walk(root)
  return out
}

export function sha256(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex')
}

/** git's id of a blob with this content, abbreviated as the store's patches are. */
export function blobId(content: string, length = 12): string {
  const body = Buffer.from(content)
  return createHash('sha1')
    .update(Buffer.concat([Buffer.from(`blob ${body.length}\0`), body]))
    .digest('hex')
    .slice(0, length)
}

/** Runs the user's git in a directory (a repository of the user's own, not the store's). */
export function userGit(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=User', '-c', 'user.email=user@example.com', ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', HOME: cwd, GIT_CONFIG_NOSYSTEM: '1' },
    encoding: 'utf8',
  })
}

/** Deterministic bytes that do not compress: a stand-in for a large binary file. */
export function noise(bytes: number, seed = 1): Buffer {
  const out = Buffer.alloc(bytes)
  let state = seed >>> 0 || 1
  for (let i = 0; i < bytes; i++) {
    state ^= state << 13
    state ^= state >>> 17
    state ^= state << 5
    out[i] = state & 0xff
  }
  return out
}
