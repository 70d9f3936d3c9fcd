import type { EventStore } from '../../events/store.js'
import { SnapshotFold } from './snapshot-fold.js'
import { DEFAULT_SNAPSHOT_EVERY, viewAt } from './time-travel.js'

/**
 * Keeps snapshot chains current in the background, so the first stateAt or
 * fork of a long session is as cheap as the next one. After a commit in
 * which a session reaches a multiple of `every` events, the session is
 * folded forward once the event loop is free (setImmediate), continuing from
 * the fold kept for it — each event is folded once more in total, not once
 * per row. Best effort: it is a cache, and stateAt folds from the log
 * without it. Memory: the views of the `sessions` most recently maintained.
 */
export interface MaintainOptions {
  readonly every?: number
  readonly sessions?: number
}

export function maintainSnapshots(store: EventStore, options: MaintainOptions = {}): () => void {
  const every = options.every ?? DEFAULT_SNAPSHOT_EVERY
  const capacity = options.sessions ?? 4
  if (every <= 0) return () => {}
  const folds = new Map<string, SnapshotFold>() // least recently used first
  const pending = new Set<string>()
  let scheduled = false

  const run = () => {
    scheduled = false
    for (const sessionId of pending) {
      pending.delete(sessionId)
      if (store.isClosed) return
      try {
        let fold = folds.get(sessionId)
        folds.delete(sessionId)
        const version = store.version(sessionId)
        if (!fold?.isChainEnd()) {
          const inherit = (from: { sessionId: string; seq: number }) =>
            viewAt(store, from.sessionId, from.seq, { snapshotEvery: every })
          fold = new SnapshotFold(store, sessionId, version, every, inherit)
        }
        fold.advance(version)
        folds.set(sessionId, fold)
        if (folds.size > capacity) folds.delete(folds.keys().next().value as string)
      } catch {
        // A failed maintenance leaves the chain shorter; stateAt still answers from the log.
      }
    }
  }

  return store.onCommit((events) => {
    for (const e of events) if (e.version % every === 0) pending.add(e.sessionId)
    if (pending.size > 0 && !scheduled) {
      scheduled = true
      setImmediate(run)
    }
  })
}
