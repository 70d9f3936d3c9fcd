import { randomBytes } from 'node:crypto'
import { cp, mkdir, rename, rm, stat, writeFile } from 'node:fs/promises'
import { basename, dirname, isAbsolute, join } from 'node:path'
import { ChronicleError } from '../../events/errors.js'
import type { EventStore } from '../../events/store.js'
import { BACKUP_DB, BACKUP_WORKSPACES, MANIFEST, type Manifest } from './manifest.js'

/**
 * `POST /admin/backup` and `chronicle backup` (docs/BACKUP.md): the running
 * server's store copied at a seq (src/events/backup.ts, in steps: the server
 * keeps serving), then the workspace object store, then the manifest. The
 * objects are copied after the store: an object is written before the event
 * naming it commits, and objects are never removed, so every object the
 * copied log names is there. The backup is built beside `out` and renamed
 * into place when whole: a directory at `out` is a finished backup.
 */

export interface BackupReport {
  readonly directory: string
  readonly seq: number
  readonly digest: string
  readonly events: number
  readonly objects: number
  readonly bytes: number
  readonly ms: number
  /** of which: copying the store's pages, reading the copy's seq and digest, copying the objects */
  readonly copyMs: number
  readonly checkMs: number
  readonly objectsMs: number
}

export interface Backups {
  take(out: string): Promise<BackupReport>
}

export function createBackups(deps: {
  readonly store: EventStore
  /** the workspace object store's root (`<dataDir>/workspaces`) */
  readonly workspaces: string
  readonly version: string
}): Backups {
  let running = false
  return {
    async take(out) {
      if (!isAbsolute(out)) throw new ChronicleError('BAD_REQUEST', `a backup goes to an absolute path, not ${out}`)
      if (running) throw new ChronicleError('BACKUP_REFUSED', 'a backup is already running: one at a time')
      if (await stat(out).catch(() => undefined))
        throw new ChronicleError('BACKUP_REFUSED', `${out} exists: a backup goes to a new path, never over anything`)
      if (!(await stat(dirname(out)).catch(() => undefined))?.isDirectory())
        throw new ChronicleError('BACKUP_REFUSED', `${dirname(out)} is not a directory`)
      running = true
      const started = performance.now()
      const partial = join(dirname(out), `.${basename(out)}.partial-${randomBytes(4).toString('hex')}`)
      try {
        await mkdir(partial, { mode: 0o700 })
        const db = await deps.store.backup(join(partial, BACKUP_DB))
        const objectsStarted = performance.now()
        const objects = await copyObjects(deps.workspaces, join(partial, BACKUP_WORKSPACES))
        const objectsMs = Math.round(performance.now() - objectsStarted)
        const manifest: Manifest = {
          format: 'chronicle-backup',
          formatVersion: 1,
          seq: db.seq,
          digest: db.digest,
          events: db.events,
          createdAt: new Date().toISOString(),
          chronicleVersion: deps.version,
        }
        await writeFile(join(partial, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600 })
        await rename(partial, out)
        const bytes = (await stat(join(out, BACKUP_DB))).size + objects.bytes
        return {
          directory: out,
          seq: db.seq,
          digest: db.digest,
          events: db.events,
          objects: objects.files,
          bytes,
          ms: Math.round(performance.now() - started),
          copyMs: db.copyMs,
          checkMs: db.checkMs,
          objectsMs,
        }
      } catch (err) {
        await rm(partial, { recursive: true, force: true })
        throw err
      } finally {
        running = false
      }
    },
  }
}

/** What of the workspace store a backup carries: its objects and each workspace's index and last tree. */
export function isBackedUp(relative: string): boolean {
  const parts = relative.split('/')
  if (parts[0] === 'objects.git') {
    if (parts.length === 1) return true
    if (parts[1] !== 'objects') return false // config, hooks, info: the restoring store makes its own
    const name = parts.at(-1) as string
    return !name.startsWith('tmp_') && !name.endsWith('.lock') // git's files while it writes them
  }
  if (parts[0] === 'ws') return parts.length <= 2 || (parts.length === 3 && WS_FILES.has(parts[2] as string))
  return false
}
const WS_FILES = new Set(['index', 'last', 'directory'])

async function copyObjects(from: string, to: string): Promise<{ files: number; bytes: number }> {
  let files = 0
  let bytes = 0
  if (!(await stat(from).catch(() => undefined))) return { files, bytes }
  await cp(from, to, {
    recursive: true,
    errorOnExist: true,
    filter: async (source) => {
      const relative = source === from ? '' : source.slice(from.length + 1)
      if (relative !== '' && !isBackedUp(relative)) return false
      const st = await stat(source).catch(() => undefined)
      if (st?.isFile()) {
        files++
        bytes += st.size
      }
      return st !== undefined
    },
  })
  return { files, bytes }
}
