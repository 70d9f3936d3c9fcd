import type { StoredEvent } from './envelope.js'

export type CommitListener = (events: readonly StoredEvent[]) => void

/**
 * Who hears of commits, and in what order: every listener hears every commit,
 * after it, once, in seq order. A listener that appends re-enters `publish`:
 * its commit is queued behind the one being delivered. A listener's failure
 * is its own: the commit stands, and the others still hear of it. Both
 * engines' logs publish through one.
 */
export class CommitListeners {
  private readonly listeners = new Set<CommitListener>()
  private publishing = false
  private unpublished: (readonly StoredEvent[])[] = []

  add(listener: CommitListener): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  publish(events: readonly StoredEvent[]): void {
    if (events.length === 0) return
    this.unpublished.push(events)
    if (this.publishing) return
    this.publishing = true
    try {
      for (let batch = this.unpublished.shift(); batch; batch = this.unpublished.shift()) {
        for (const listener of this.listeners) {
          try {
            listener(batch)
          } catch {
            // its own failure
          }
        }
      }
    } finally {
      this.publishing = false
    }
  }
}
