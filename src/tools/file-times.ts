import { createHash } from 'node:crypto'
import { BoundedCache, type CacheBounds } from '../events/bounded-cache.js'
import { openRegularForRead } from './regular-file.js'
import { ToolFailure } from './tool.js'

/**
 * What each session has read, so edit and write refuse to overwrite a file the
 * model has not seen or that changed since (OpenCode's FileTime). Keyed by
 * session and real path; a stamp is the file's size, mtime and content hash.
 * Stamping opens only regular files (non-blocking, checked on the descriptor:
 * a FIFO would hang the read) and hashes them in chunks, so a huge file costs
 * time but not memory. The sessions remembered are bounded (an idle one is
 * forgotten: its model reads a file again before changing it).
 */
export interface FileTimes {
  /** remember the file as the session saw it now */
  record(sessionId: string, realPath: string): Promise<void>
  /** rejects with ToolFailure('failed') unless the session read the file and it is unchanged since */
  assertUnchanged(sessionId: string, realPath: string, display: string): Promise<void>
}

interface Stamp {
  readonly size: number
  readonly mtimeMs: number
  readonly hash: string
}

const HASH_CHUNK_BYTES = 1024 * 1024

/** A stamp with its path, about. */
const STAMP_BYTES = 512

export const DEFAULT_FILE_TIMES_BOUNDS: CacheBounds = { entries: 4096, bytes: 8 * 2 ** 20, idleMs: 3_600_000 }

export function createFileTimes(bounds: CacheBounds = DEFAULT_FILE_TIMES_BOUNDS): FileTimes {
  const sessions = new BoundedCache<string, Map<string, Stamp>>(bounds)
  return {
    async record(sessionId, realPath) {
      const now = await stamp(realPath, realPath)
      const files = sessions.get(sessionId) ?? new Map<string, Stamp>()
      files.set(realPath, now)
      sessions.set(sessionId, files, files.size * STAMP_BYTES)
    },
    async assertUnchanged(sessionId, realPath, display) {
      const seen = sessions.get(sessionId)?.get(realPath)
      if (!seen) {
        throw new ToolFailure(
          'failed',
          `You must read ${display} with the read tool before changing it.`,
          'FILE_NOT_READ',
        )
      }
      const now = await stamp(realPath, display)
      if (now.size !== seen.size || now.mtimeMs !== seen.mtimeMs || now.hash !== seen.hash) {
        throw new ToolFailure(
          'failed',
          `${display} was modified since it was last read. Read it again before changing it.`,
          'FILE_CHANGED_SINCE_READ',
        )
      }
    },
  }
}

async function stamp(path: string, display: string): Promise<Stamp> {
  const { handle, stat } = await openRegularForRead(path, display)
  try {
    const hash = createHash('sha256')
    // No larger than the file (+1: the read that finds its end), unzeroed: a read of a small file allocated
    // and cleared a whole MiB, twice a read call with scanLines (`npm run test:soak`, a tenth of a turn's CPU
    // with the collections it set off). A file that grew since just takes more chunks.
    const chunk = Buffer.allocUnsafe(Math.min(HASH_CHUNK_BYTES, stat.size + 1))
    for (let position = 0; ; ) {
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, position)
      if (bytesRead === 0) break
      hash.update(chunk.subarray(0, bytesRead))
      position += bytesRead
    }
    return { size: stat.size, mtimeMs: stat.mtimeMs, hash: hash.digest('hex') }
  } finally {
    await handle.close()
  }
}
