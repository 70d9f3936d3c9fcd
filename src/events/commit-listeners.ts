import type { StoredEvent } from './envelope.js'

/**
 * `elsewhere`: the events were committed by another node of a cluster (docs/CLUSTER.md), heard by reading
 * the log: a listener that counts this server's own work (metrics, traces) passes them over.
 */
export type CommitListener = (events: readonly StoredEvent[], elsewhere?: boolean) => void

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
  private unpublished: { readonly events: readonly StoredEvent[]; readonly elsewhere: boolean }[] = []

  add(listener: CommitListener): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  publish(events: readonly StoredEvent[], elsewhere = false): void {
    if (events.length === 0) return
    this.unpublished.push({ events, elsewhere })
    if (this.publishing) return
    this.publishing = true
    try {
      for (let batch = this.unpublished.shift(); batch; batch = this.unpublished.shift()) {
        for (const listener of this.listeners) {
          try {
            listener(batch.events, batch.elsewhere)
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
