import { BoundedCache, type CacheBounds } from '../../events/bounded-cache.js'
import type { EventStore } from '../../events/store.js'
import { prepared } from '../rows/prepared.js'

/** Where an inputId was first accepted, and the digest of what it carried. */
export interface PriorAcceptance {
  readonly digest: string
  readonly seq: number
}

/**
 * Where each session's inputIds were accepted: built from the log on first
 * use (one scan per session per process), then kept current by store.onCommit
 * — so an idempotent resubmission costs O(1), however long the session.
 * Derived from the log only; dropping it changes no answer: the sessions held
 * are a bounded cache (an idle one is forgotten and rebuilt on its next input).
 */
export const DEFAULT_INPUT_INDEX_BOUNDS: CacheBounds = { entries: 256, bytes: 4 * 2 ** 20, idleMs: 120_000 }

/** About what one remembered inputId costs: its id, the digest's hex and the entry. */
const ENTRY_BYTES = 256

export class InputIndex {
  private readonly sessions: BoundedCache<string, Map<string, PriorAcceptance>>
  private readonly unsubscribe: () => void

  constructor(
    private readonly store: EventStore,
    bounds: CacheBounds = DEFAULT_INPUT_INDEX_BOUNDS,
  ) {
    this.sessions = new BoundedCache(bounds)
    this.unsubscribe = store.onCommit((events) => {
      for (const e of events) {
        if (e.type !== 'input.accepted' || !this.sessions.has(e.sessionId)) continue
        const ids = this.sessions.get(e.sessionId)
        ids?.set(e.data.inputId, { digest: e.data.digest, seq: e.seq })
        if (ids) this.sessions.resize(e.sessionId, ids.size * ENTRY_BYTES)
      }
    })
  }

  find(sessionId: string, inputId: string): PriorAcceptance | undefined {
    let ids = this.sessions.get(sessionId)
    if (!ids) {
      ids = new Map()
      for (const e of this.store.iterateSession(sessionId)) {
        if (e.type === 'input.accepted') ids.set(e.data.inputId, { digest: e.data.digest, seq: e.seq })
      }
      this.sessions.set(sessionId, ids, ids.size * ENTRY_BYTES)
    }
    return ids.get(inputId)
  }

  /** how many sessions' inputIds are held */
  get size(): number {
    return this.sessions.size
  }

  /** Forgets the sessions idle for the bounds' idleMs. */
  sweep(): void {
    this.sessions.sweep()
  }

  close(): void {
    this.unsubscribe()
    this.sessions.clear()
  }
}

/** Whether the session accepted an input with this id (a query of the log, for one-off checks). */
export function inputAccepted(store: EventStore, sessionId: string, inputId: string): boolean {
  return (
    prepared(
      store.reader(sessionId),
      "SELECT 1 FROM events WHERE session_id = ? AND type = 'input.accepted' AND json_extract(data, '$.inputId') = ? LIMIT 1",
      true,
    ).get(sessionId, inputId) !== undefined
  )
}
