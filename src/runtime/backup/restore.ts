import { chmod, copyFile, lstat, mkdir, readdir, rename, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { runGit } from '../workspace/git.js'
import { BACKUP_DB, BACKUP_WORKSPACES, invalid, type Manifest, readManifest } from './manifest.js'
import { isBackedUp } from './take.js'

/**
 * `chronicle restore <backup>`, the file side (docs/BACKUP.md "Restore"). A
 * backup is hostile input until checked: only the files a backup holds are
 * copied — regular files at the names it may have, never a symlink, never a
 * git config or hook — into a staging directory inside the data dir, and it is
 * that copy which is checked and then moved into place, so what was checked is
 * what is served. The store it replaces is moved aside, never deleted.
 */

export interface Staged {
  readonly manifest: Manifest
  /** `<dataDir>/.restore-<stamp>/` */
  readonly dir: string
  readonly storeFile: string
  readonly workspaces: string
}

export async function stageBackup(backup: string, dataDir: string, stamp: string): Promise<Staged> {
  const manifest = await readManifest(backup)
  const source = join(backup, BACKUP_DB)
  if (!(await lstat(source).catch(() => undefined))?.isFile()) throw invalid(`${source} is not a regular file`)
  const dir = join(dataDir, `.restore-${stamp}`)
  await mkdir(dir, { mode: 0o700 })
  const staged = { manifest, dir, storeFile: join(dir, BACKUP_DB), workspaces: join(dir, BACKUP_WORKSPACES) }
  try {
    await copyFile(source, staged.storeFile)
    await chmod(staged.storeFile, 0o600) // the data dir's files are private (docs/SECURITY.md)
    await copyTree(join(backup, BACKUP_WORKSPACES), staged.workspaces, '')
    return staged
  } catch (err) {
    await discard(staged)
    throw err
  }
}

async function copyTree(from: string, to: string, relative: string): Promise<void> {
  const st = await lstat(from).catch(() => undefined)
  if (st === undefined && relative === '') return // a backup of a server that never recorded a workspace
  if (!st?.isDirectory()) throw invalid(`${from} is not a directory`)
  await mkdir(to, { recursive: true, mode: 0o700 })
  for (const entry of await readdir(from, { withFileTypes: true })) {
    const name = relative === '' ? entry.name : `${relative}/${entry.name}`
    if (!isBackedUp(name) || (!entry.isFile() && !entry.isDirectory()))
      throw invalid(`${join(from, entry.name)} is not something a backup holds`)
    if (entry.isDirectory()) await copyTree(join(from, entry.name), join(to, entry.name), name)
    else {
      await copyFile(join(from, entry.name), join(to, entry.name))
      await chmod(join(to, entry.name), 0o600)
    }
  }
}

/**
 * Every object in the staged store hashes to its name (`git fsck`, with the
 * shadow store's own fresh config: the backup's was never copied). Unreferenced
 * objects are normal here — snapshots are named by the log, not by refs.
 */
export async function checkObjects(staged: Staged): Promise<void> {
  const gitDir = join(staged.workspaces, 'objects.git')
  if (!(await stat(gitDir).catch(() => undefined))) return
  const place = { gitDir, home: staged.workspaces }
  const init = await runGit(['init', '--quiet', '--bare'], place)
  if (init.code !== 0) throw invalid(`the backup's workspace store cannot be set up: ${init.stderr.trim()}`)
  const fsck = await runGit(['fsck', '--no-dangling', '--no-progress'], place)
  const said = fsck.stderr.trim().split('\n').filter(Boolean)
  if (fsck.code !== 0 || said.some((line) => /^(error|fatal)|corrupt|missing|hash mismatch/i.test(line)))
    throw invalid(`the backup's workspace objects are damaged: ${said.slice(0, 3).join(' / ')}`)
}

/**
 * Moves the data dir's store (db, WAL, workspaces) aside into `replaced-<stamp>/` and the staged one into
 * place. Returns where the replaced store went (undefined: there was none).
 */
export async function installBackup(staged: Staged, dataDir: string, stamp: string): Promise<string | undefined> {
  const aside = join(dataDir, `replaced-${stamp}`)
  const current = [BACKUP_DB, `${BACKUP_DB}-wal`, `${BACKUP_DB}-shm`, BACKUP_WORKSPACES]
  let moved = false
  for (const name of current) {
    if (!(await lstat(join(dataDir, name)).catch(() => undefined))) continue
    if (!moved) await mkdir(aside, { mode: 0o700 })
    moved = true
    await rename(join(dataDir, name), join(aside, name))
  }
  await rename(staged.storeFile, join(dataDir, BACKUP_DB))
  if (await stat(staged.workspaces).catch(() => undefined))
    await rename(staged.workspaces, join(dataDir, BACKUP_WORKSPACES))
  await discard(staged)
  return moved ? aside : undefined
}

export async function discard(staged: Pick<Staged, 'dir'>): Promise<void> {
  await rm(staged.dir, { recursive: true, force: true })
}
