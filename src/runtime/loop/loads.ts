import type { StoredEvent } from '../../events/envelope.js'

/**
 * Loads of a per-session cache from the store, asynchronous as the store
 * port is: one load per session at a time (its callers share it), and the
 * session's events committed while it is out kept for it, so that what
 * commits between the read and the cache holding it is not lost. Used by the
 * loop's views and the input index.
 */
export class SessionLoads<T> {
  private readonly heard = new Map<string, StoredEvent[]>()
  private readonly loading = new Map<string, Promise<T>>()

  /** A commit of a session the cache does not hold: kept for the load that is out, if one is. */
  hear(e: StoredEvent): void {
    this.heard.get(e.sessionId)?.push(e)
  }

  /** `read` the session, handed what commits meanwhile (complete once its promise settles). */
  load(sessionId: string, read: (heard: readonly StoredEvent[]) => Promise<T>): Promise<T> {
    let loading = this.loading.get(sessionId)
    if (!loading) {
      const heard: StoredEvent[] = []
      this.heard.set(sessionId, heard)
      loading = read(heard).finally(() => {
        this.heard.delete(sessionId)
        this.loading.delete(sessionId)
      })
      this.loading.set(sessionId, loading)
    }
    return loading
  }
}
