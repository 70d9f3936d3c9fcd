import { existsSync, lstatSync, mkdtempSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { CredentialMount } from './credentials/credential-paths.js'
import { isWithin } from './paths.js'

/**
 * The bwrap mounts that layer the session directory, Chronicle's own files
 * and the user's hidden credentials over the read-only root
 * (docs/SECURITY.md "The sandbox"). Mounts stack in the order given, so they
 * go shallowest first: a hidden path that holds the session directory (a
 * fork's under the data dir, a project under `~/.docker`) is covered first and
 * the session directory bound back over it; a hidden path inside the session
 * directory goes after it, over it; a path revealed inside a hidden one is
 * bound back last. At one path, a hide goes before a reveal, and both before
 * the session directory — which is never hidden from itself. A directory is
 * hidden by an empty tmpfs, a file by an empty read-only file (not /dev/null:
 * a device in the sandbox's nodev mount reads as EACCES, and programs such as
 * npm treat an unreadable ~/.npmrc as an error, an empty one as none).
 */
export function layerMounts(
  workspace: string,
  chronicle: readonly string[],
  credentials: readonly CredentialMount[],
): string[] {
  const own = chronicle.filter((p) => existsSync(p)).map((p) => realpathSync(p))
  const revealed = new Set(credentials.filter((m) => m.action === 'reveal').map((m) => m.path))
  const layers: Layer[] = [
    ...own.map((path) => ({ path, kind: 'hide' as const })),
    // a reveal of exactly a hidden path takes it back: neither is mounted; Chronicle's own files are never revealed
    ...credentials
      .filter((m) => (m.action === 'hide' ? !revealed.has(m.path) : !own.some((o) => isWithin(o, m.path))))
      .map((m) => ({ path: m.path, kind: m.action })),
    { path: workspace, kind: 'workspace' as const },
  ].sort((a, b) => depthOf(a.path) - depthOf(b.path) || RANK[a.kind] - RANK[b.kind])

  const args: string[] = []
  const placed: Layer[] = []
  for (const layer of layers) {
    // what is at this path so far: the deepest layer placed that holds it (placed in order of depth)
    const under = placed.findLast((p) => isWithin(p.path, layer.path))?.kind
    if (layer.kind === 'workspace') args.push('--bind', layer.path, layer.path)
    else if (layer.kind === 'hide') {
      if (under === 'hide') continue // already hidden
      args.push(
        ...(isDirectory(layer.path) ? ['--tmpfs', layer.path] : ['--ro-bind', emptyFileIn(tmpdir()), layer.path]),
      )
    } else {
      if (under !== 'hide') continue // nothing hides it
      args.push(isWithin(workspace, layer.path) ? '--bind' : '--ro-bind', layer.path, layer.path)
    }
    placed.push(layer)
  }
  return args
}

interface Layer {
  readonly path: string
  readonly kind: 'hide' | 'reveal' | 'workspace'
}

const RANK = { hide: 0, reveal: 1, workspace: 2 } as const

function depthOf(path: string): number {
  return path.split('/').filter((s) => s !== '').length
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}

const empties = new Map<string, string>()

/**
 * An empty, read-only file in `dir` to bind over hidden files: one per user
 * (`chronicle-empty-<uid>`), made with O_EXCL and used only while it is still
 * ours, regular, empty and unwritable — a file another user planted there
 * would show its content in place of ~/.npmrc. Otherwise a private one for
 * this process, removed when it exits.
 */
export function emptyFileIn(dir: string): string {
  const known = empties.get(dir)
  if (known !== undefined && isOurEmptyFile(known)) return known
  const shared = join(dir, `chronicle-empty-${process.getuid?.() ?? 'user'}`)
  try {
    writeFileSync(shared, '', { flag: 'wx', mode: 0o444 })
  } catch {
    // it exists: checked below
  }
  let file = shared
  if (!isOurEmptyFile(shared)) {
    const own = mkdtempSync(join(dir, 'chronicle-empty-'))
    file = join(own, 'empty')
    writeFileSync(file, '', { mode: 0o444 })
    process.once('exit', () => rmSync(own, { recursive: true, force: true }))
  }
  empties.set(dir, file)
  return file
}

function isOurEmptyFile(path: string): boolean {
  const stat = lstatSync(path, { throwIfNoEntry: false })
  if (!stat?.isFile()) return false
  const uid = process.getuid?.()
  return stat.size === 0 && (stat.mode & 0o222) === 0 && (uid === undefined || stat.uid === uid)
}
