import type { CacheBounds } from '../events/bounded-cache.js'
import type { MemoryConfig } from '../config.js'

/**
 * The config's `memory` as the bounds of each cache of per-session state
 * (docs/ARCHITECTURE.md "Memory"). The views and their transcripts are most of
 * it (two thirds of the bytes); the projection keeps what a run streams
 * between two commits, so it forgets a session sooner; input indexes and the
 * files each session has read are small.
 */
export interface MemoryBounds {
  readonly views: CacheBounds
  readonly projector: CacheBounds
  readonly inputs: CacheBounds
  readonly fileTimes: CacheBounds
}

export function memoryBounds(memory: MemoryConfig): MemoryBounds {
  const { idleMs, cacheBytes, cacheSessions } = memory
  return {
    views: { entries: cacheSessions, bytes: Math.round((cacheBytes * 2) / 3), idleMs },
    projector: { entries: cacheSessions * 2, bytes: Math.round(cacheBytes / 3), idleMs: Math.min(idleMs, 60_000) },
    inputs: { entries: Math.max(1, cacheSessions / 2), bytes: 4 * 2 ** 20, idleMs },
    // forgetting what a session read makes its model read a file again before an edit: kept longer
    fileTimes: { entries: cacheSessions * 8, bytes: 8 * 2 ** 20, idleMs: Math.max(idleMs, 3_600_000) },
  }
}
