import type { EventStore } from '../events/store.js'
import { ChronicleError } from '../events/errors.js'
import { apply, evolve } from '../projections/evolve.js'
import type { SessionView } from '../projections/model.js'
import { loadView } from '../projections/read-model.js'

/**
 * The loop's view of a session, re-read at every step: the stored read model
 * once, then every event as it commits (store.onCommit), folded with the same
 * `evolve` the projector uses — so it always equals the read model, yet a
 * step costs O(new events), not O(history). Nothing here is decided from
 * memory the log does not hold.
 */
export class SessionViews {
  private readonly views = new Map<string, SessionView>()
  private readonly unsubscribe: () => void

  constructor(
    private readonly store: EventStore,
    private readonly capacity = 32,
  ) {
    this.unsubscribe = store.onCommit((events) => {
      for (const e of events) {
        const view = this.views.get(e.sessionId)
        if (!view) continue
        try {
          apply(view, evolve(view, e))
        } catch {
          this.views.delete(e.sessionId) // reload from the read model on next read
        }
      }
    })
  }

  /** The session's current state, including everything queued before this call. */
  read(sessionId: string): SessionView {
    this.store.flush()
    let view = this.views.get(sessionId)
    if (view) {
      this.views.delete(sessionId) // re-inserted below: most recently used last
    } else {
      view = loadView(this.store.db, sessionId)
      if (!view.session) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
    }
    this.views.set(sessionId, view)
    while (this.views.size > this.capacity) {
      const oldest = this.views.keys().next().value
      if (oldest === undefined) break
      this.views.delete(oldest)
    }
    return view
  }

  forget(sessionId: string): void {
    this.views.delete(sessionId)
  }

  close(): void {
    this.unsubscribe()
    this.views.clear()
  }
}
