import { createHash } from 'node:crypto'
import { readFileSync, statSync } from 'node:fs'
import { ToolFailure } from './tool.js'

/**
 * What each session has read, so edit and write refuse to overwrite a file the
 * model has not seen or that changed since (OpenCode's FileTime). Keyed by
 * session and real path; a stamp is the file's size, mtime and content hash.
 */
export interface FileTimes {
  /** remember the file as the session saw it now */
  record(sessionId: string, realPath: string): void
  /** throws ToolFailure('failed') unless the session read the file and it is unchanged since */
  assertUnchanged(sessionId: string, realPath: string, display: string): void
}

interface Stamp {
  readonly size: number
  readonly mtimeMs: number
  readonly hash: string
}

export function createFileTimes(): FileTimes {
  const sessions = new Map<string, Map<string, Stamp>>()
  return {
    record(sessionId, realPath) {
      let files = sessions.get(sessionId)
      if (!files) sessions.set(sessionId, (files = new Map()))
      files.set(realPath, stamp(realPath))
    },
    assertUnchanged(sessionId, realPath, display) {
      const seen = sessions.get(sessionId)?.get(realPath)
      if (!seen) {
        throw new ToolFailure('failed', `You must read ${display} with the read tool before changing it.`)
      }
      const now = stamp(realPath)
      if (now.size !== seen.size || now.mtimeMs !== seen.mtimeMs || now.hash !== seen.hash) {
        throw new ToolFailure(
          'failed',
          `${display} was modified since it was last read. Read it again before changing it.`,
        )
      }
    },
  }
}

function stamp(path: string): Stamp {
  const st = statSync(path)
  const hash = createHash('sha256').update(readFileSync(path)).digest('hex')
  return { size: st.size, mtimeMs: st.mtimeMs, hash }
}
