import { BoundedCache, type CacheBounds } from '../events/bounded-cache.js'
import type { StoredEvent } from '../events/envelope.js'
import { reaches, type SessionReader } from './authorize.js'
import type { Principal } from './principals.js'

/**
 * Which sessions a limited token's subscription may carry (docs/SECURITY.md
 * "Principals and tokens"), asked for each event as it is sent, so it must
 * not wait on the store per event. An answer is read once through the read
 * models (`reaches`) and kept. A session made after the subscription learns
 * its answer from its first event as that passes: a fork (`session.forked`,
 * `from`) or a sub-agent's child (`session.created`, `parent`) is reached
 * when the session it names is, exactly as `reaches` walks the read models.
 * So only a session seen for the first time, whose first event did not pass
 * here, costs a read. Answers never change (a session's ancestors are fixed
 * at its creation, a token's sessions at its grant; a revoked token's
 * sockets are closed), so the cache only saves reads: it is bounded
 * (docs/ARCHITECTURE.md "Memory"), and an answer dropped is read again.
 */

const BOUNDS: CacheBounds = { entries: 4096, bytes: 512 * 1024, idleMs: 10 * 60_000 }

export class SubscriptionReach {
  private readonly known: BoundedCache<string, boolean>

  constructor(
    private readonly sessions: SessionReader,
    private readonly principal: Principal & { readonly sessions: readonly string[] },
    bounds: CacheBounds = BOUNDS,
  ) {
    this.known = new BoundedCache(bounds)
  }

  /** Whether the event's session is reached, learned from the event itself when it is the session's first; undefined: not known yet (`resolve`). */
  of(event: StoredEvent): boolean | undefined {
    const known = this.known.get(event.sessionId)
    if (known !== undefined) return known
    const origin = originOf(event)
    if (origin === undefined) return undefined
    // an origin whose answer is not at hand is read with the session, never taken as unreached
    const reached =
      this.principal.sessions.includes(event.sessionId) || (origin === null ? false : this.known.get(origin))
    if (reached === undefined) return undefined
    this.remember(event.sessionId, reached)
    return reached
  }

  /** Whether the session is reached, read through the read models (one session and its ancestors), then kept. */
  async resolve(sessionId: string): Promise<boolean> {
    const reached = await reaches(this.sessions, this.principal, sessionId)
    this.remember(sessionId, reached)
    return reached
  }

  get size(): number {
    return this.known.size
  }

  private remember(sessionId: string, reached: boolean): void {
    this.known.set(sessionId, reached, 64 + 2 * sessionId.length)
  }
}

/**
 * A session's first event names where it comes from: the session a fork or a sub-agent's child descends from,
 * null for a session of its own; undefined for any other event.
 */
function originOf(event: StoredEvent): string | null | undefined {
  if (event.version !== 1) return undefined
  if (event.type === 'session.forked') return event.data.from.sessionId
  if (event.type === 'session.created') return event.data.parent?.sessionId ?? null
  return undefined
}
