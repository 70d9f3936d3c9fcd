import type { EventStore } from '../events/store.js'
import { prepared } from './prepared.js'

/** Where an inputId was first accepted, and the digest of what it carried. */
export interface PriorAcceptance {
  readonly digest: string
  readonly seq: number
}

/**
 * Where each session's inputIds were accepted: built from the log on first
 * use (one scan per session per process), then kept current by store.onCommit
 * — so an idempotent resubmission costs O(1), however long the session.
 * Derived from the log only; dropping it changes no answer.
 */
export class InputIndex {
  private readonly sessions = new Map<string, Map<string, PriorAcceptance>>()
  private readonly unsubscribe: () => void

  constructor(
    private readonly store: EventStore,
    private readonly capacity = 256,
  ) {
    this.unsubscribe = store.onCommit((events) => {
      for (const e of events) {
        if (e.type !== 'input.accepted') continue
        this.sessions.get(e.sessionId)?.set(e.data.inputId, { digest: e.data.digest, seq: e.seq })
      }
    })
  }

  find(sessionId: string, inputId: string): PriorAcceptance | undefined {
    let ids = this.sessions.get(sessionId)
    if (!ids) {
      this.store.flush()
      ids = new Map()
      for (const e of this.store.iterateSession(sessionId)) {
        if (e.type === 'input.accepted') ids.set(e.data.inputId, { digest: e.data.digest, seq: e.seq })
      }
      this.sessions.set(sessionId, ids)
      if (this.sessions.size > this.capacity) {
        const oldest = this.sessions.keys().next().value
        if (oldest !== undefined) this.sessions.delete(oldest) // rebuilt from the log if needed again
      }
    }
    return ids.get(inputId)
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
      store.db,
      "SELECT 1 FROM events WHERE session_id = ? AND type = 'input.accepted' AND json_extract(data, '$.inputId') = ? LIMIT 1",
      true,
    ).get(sessionId, inputId) !== undefined
  )
}
