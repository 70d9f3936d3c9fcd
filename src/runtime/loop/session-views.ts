import type { StoredEvent } from '../../events/envelope.js'
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
 *
 * Events are folded when the view is next read, or once FOLD_AT of them wait:
 * a session whose run has ended (its answer's deltas committed, its user not
 * yet back, or never) costs its view nothing until it is read again.
 */
export interface SessionState {
  readonly view: SessionView
  /** the history as chat messages, maintained from the same changes */
  readonly transcript: Transcript
}

/** Committed events a view holds unfolded at most: memory stays bounded for a session streaming long without a read. */
const FOLD_AT = 256

interface Cached {
  readonly state: SessionState
  /** committed since the view was last folded, in commit order */
  pending: StoredEvent[]
}

export class SessionViews {
  private readonly views = new Map<string, Cached>()
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
        const cached = this.views.get(e.sessionId)
        if (!cached) continue
        cached.pending.push(e)
        if (cached.pending.length >= FOLD_AT) this.fold(e.sessionId, cached)
      }
    })
  }

  /** Folds what waits into the view; false when a fold failed and the view was dropped (reloaded on next read). */
  private fold(sessionId: string, cached: Cached): boolean {
    const { pending, state } = cached
    cached.pending = []
    try {
      for (const e of pending) {
        const changes = evolve(state.view, e)
        apply(state.view, changes)
        state.transcript.apply(changes)
      }
      return true
    } catch {
      this.views.delete(sessionId)
      return false
    }
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
    let cached = this.views.get(sessionId)
    if (cached && this.fold(sessionId, cached)) {
      this.views.delete(sessionId) // re-inserted below: most recently used last
    } else {
      const view = loadView(this.store, sessionId)
      if (!view.session) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
      cached = { state: { view, transcript: new Transcript(view, (hash) => this.store.blobs.get(hash)) }, pending: [] }
    }
    this.views.set(sessionId, cached)
    while (this.views.size > this.capacity) {
      const oldest = this.views.keys().next().value
      if (oldest === undefined) break
      this.views.delete(oldest)
    }
    return cached.state
  }

  forget(sessionId: string): void {
    this.views.delete(sessionId)
  }

  close(): void {
    this.unsubscribe()
    this.views.clear()
  }
}
