import type { EventStore } from '../../events/store.js'
import { ChronicleError } from '../../events/errors.js'
import { apply, evolve } from '../../projections/evolve.js'
import type { SessionView } from '../../projections/model.js'
import { loadView } from '../../projections/read-model.js'
import { Transcript } from './transcript.js'

/**
 * The loop's view of a session, re-read at every step: the stored read model
 * once, then every event as it commits (store.onCommit), folded with the same
 * `evolve` the projector uses — so it always equals the read model, yet a
 * step costs O(new events), not O(history). Nothing here is decided from
 * memory the log does not hold.
 */
export interface SessionState {
  readonly view: SessionView
  /** the history as chat messages, maintained from the same changes */
  readonly transcript: Transcript
}

export class SessionViews {
  private readonly views = new Map<string, SessionState>()
  private readonly unsubscribe: () => void

  constructor(
    private readonly store: EventStore,
    // Sized for the sessions that run at once (bench stream holds 400): a
    // running session whose view was evicted reloads its whole history at
    // every step.
    private readonly capacity = 512,
  ) {
    this.unsubscribe = store.onCommit((events) => {
      for (const e of events) {
        const state = this.views.get(e.sessionId)
        if (!state) continue
        try {
          const changes = evolve(state.view, e)
          apply(state.view, changes)
          state.transcript.apply(changes)
        } catch {
          this.views.delete(e.sessionId) // reload from the read model on next read
        }
      }
    })
  }

  /** The session's current state, including everything queued before this call. */
  read(sessionId: string): SessionView {
    return this.state(sessionId).view
  }

  /** The view and its transcript, including everything queued before this call. */
  state(sessionId: string): SessionState {
    this.store.flushFor(sessionId) // only this session's events change its view
    return this.committed(sessionId)
  }

  /** The view and its transcript as committed: without what is still queued (see loop.ts, a run's start). */
  committed(sessionId: string): SessionState {
    let state = this.views.get(sessionId)
    if (state) {
      this.views.delete(sessionId) // re-inserted below: most recently used last
    } else {
      const view = loadView(this.store, sessionId)
      if (!view.session) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
      state = { view, transcript: new Transcript(view, (hash) => this.store.blobs.get(hash)) }
    }
    this.views.set(sessionId, state)
    while (this.views.size > this.capacity) {
      const oldest = this.views.keys().next().value
      if (oldest === undefined) break
      this.views.delete(oldest)
    }
    return state
  }

  forget(sessionId: string): void {
    this.views.delete(sessionId)
  }

  close(): void {
    this.unsubscribe()
    this.views.clear()
  }
}
