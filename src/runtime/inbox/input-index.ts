import { BoundedCache, type CacheBounds } from '../../events/bounded-cache.js'
import type { StoredEvent } from '../../events/envelope.js'
import { SessionLoads } from '../loop/loads.js'
import type { EventLog } from '../../events/log.js'

import type { PriorAcceptance } from '../../commands/input.js'

/**
 * Where each session's inputIds were accepted: read from the log on first
 * use (one read per session per process), then kept current by the log's
 * commit listener — so an idempotent resubmission costs O(1), however long
 * the session. Derived from the log only; dropping it changes no answer: the
 * sessions held are a bounded cache (an idle one is forgotten and read again
 * on its next input). What commits while a session's inputs are read is
 * added to what the read found.
 */
export const DEFAULT_INPUT_INDEX_BOUNDS: CacheBounds = { entries: 256, bytes: 4 * 2 ** 20, idleMs: 120_000 }

/** About what one remembered inputId costs: its id, the digest's hex and the entry. */
const ENTRY_BYTES = 256

type Accepted = Map<string, PriorAcceptance>

export class InputIndex {
  private readonly sessions: BoundedCache<string, Accepted>
  private readonly unsubscribe: () => void
  private readonly loads = new SessionLoads<Accepted>()

  constructor(
    private readonly log: EventLog,
    bounds: CacheBounds = DEFAULT_INPUT_INDEX_BOUNDS,
  ) {
    this.sessions = new BoundedCache(bounds)
    this.unsubscribe = log.onCommit((events) => {
      for (const e of events) {
        if (e.type !== 'input.accepted') continue
        const ids = this.sessions.peek(e.sessionId)
        if (!ids) {
          this.loads.hear(e)
          continue
        }
        remember(ids, e)
        this.sessions.resize(e.sessionId, ids.size * ENTRY_BYTES)
      }
    })
  }

  /** `fresh`: what is held of the session is read again first (it may lag another node's acceptance) */
  async find(sessionId: string, inputId: string, fresh = false): Promise<PriorAcceptance | undefined> {
    if (fresh) this.sessions.delete(sessionId)
    const ids = this.sessions.get(sessionId) ?? (await this.load(sessionId))
    return ids.get(inputId)
  }

  private load(sessionId: string): Promise<Accepted> {
    return this.loads.load(sessionId, (heard) => this.read(sessionId, heard))
  }

  private async read(sessionId: string, heard: readonly StoredEvent[]): Promise<Accepted> {
    const ids: Accepted = new Map()
    for (const e of await this.log.readSessionOfType(sessionId, 'input.accepted')) remember(ids, e)
    for (const e of heard) remember(ids, e)
    this.sessions.set(sessionId, ids, ids.size * ENTRY_BYTES)
    return ids
  }

  /** how many sessions' inputIds are held */
  get size(): number {
    return this.sessions.size
  }

  sweep(): void {
    this.sessions.sweep()
  }

  /** what is held of the session dropped (another node may append to it: read again on next use) */
  forget(sessionId: string): void {
    this.sessions.delete(sessionId)
  }

  close(): void {
    this.unsubscribe()
    this.sessions.clear()
  }
}

/** The first acceptance of an inputId is the one that counts. */
function remember(ids: Accepted, e: StoredEvent): void {
  if (e.type === 'input.accepted' && !ids.has(e.data.inputId))
    ids.set(e.data.inputId, { digest: e.data.digest, seq: e.seq })
}
