import { BoundedCache, type CacheBounds } from '../../events/bounded-cache.js'
import type { StoredEvent } from '../../events/envelope.js'
import { SessionLoads } from './loads.js'
import { fetchInto } from './attached-blobs.js'
import type { EventLog } from '../../events/log.js'
import { ChronicleError } from '../../events/errors.js'
import { apply, evolve } from '../../projections/fold/evolve.js'
import type { Part, SessionView } from '../../projections/fold/model.js'
import type { ReadModels } from '../../projections/read-models.js'
import { approxBytes, viewBytes } from '../../projections/fold/sizes.js'
import { Transcript } from './transcript.js'
import { ForkSeeds } from './fork-seeds.js'
import type { TimeTravel } from '../../projections/time-travel/port.js'

/**
 * The loop's view of a session, re-read at every step: the stored read model
 * once, then every event as it commits (store.onCommit), folded with the same
 * `evolve` the projector uses — so it always equals the read model, yet a
 * step costs O(new events), not O(history). Nothing here is decided from
 * memory the log does not hold.
 *
 * Events are folded when the view is next read, or once FOLD_AT of them wait:
 * a session whose run has ended (its answer's deltas committed, its user not
 * yet back, or never) costs its view nothing until it is read again. Views
 * are a bounded cache (DEFAULT_VIEW_BOUNDS, the config's `memory`): one idle
 * for `idleMs`, or the least recently read past the entries or bytes, is
 * dropped and loaded again from the read model when next read.
 *
 * Reads are asynchronous (the store is a port, docs/ARCHITECTURE.md "The
 * store port"): commits heard while a view loads are folded past the
 * version it read, and the contents of attached files (blobs) are fetched
 * before a read returns, so a transcript converts without waiting.
 */
export interface SessionState {
  readonly view: SessionView
  /** the history as chat messages, maintained from the same changes */
  readonly transcript: Transcript
}

/** Committed events a view holds unfolded at most: memory stays bounded for a session streaming long without a read. */
const FOLD_AT = 256

/**
 * Sized for the sessions that run at once (bench stream holds 400: a running
 * session whose view was evicted reloads its whole history at every step),
 * and for a heap of a few hundred MB: views, with their transcripts, are most
 * of what a session costs in memory.
 */
export const DEFAULT_VIEW_BOUNDS: CacheBounds = { entries: 512, bytes: 32 * 2 ** 20, idleMs: 120_000 }

/** A transcript holds the chat form of what its view holds, mostly the same strings: counted as much again. */
const TRANSCRIPT_FACTOR = 2

interface Cached {
  readonly state: SessionState
  /** committed since the view was last folded, in commit order */
  pending: StoredEvent[]
  /** approxBytes of the view */
  bytes: number
  /** the contents of the view's attached files, by blob hash: what its transcript reads */
  readonly blobs: Map<string, string>
  /** blobs folded in but not yet fetched */
  missing: string[]
}

export class SessionViews {
  private readonly views: BoundedCache<string, Cached>
  private readonly unsubscribe: () => void
  private readonly loads = new SessionLoads<SessionState>()
  private readonly forks: ForkSeeds | undefined

  private readonly log: EventLog
  private readonly readModels: ReadModels

  /** with `timeTravel`, a new fork's first view is built from its fork point's state (fork-seeds.ts) */
  constructor(
    ports: { readonly log: EventLog; readonly readModels: ReadModels; readonly timeTravel?: TimeTravel },
    bounds: CacheBounds = DEFAULT_VIEW_BOUNDS,
    now: () => number = Date.now,
  ) {
    this.log = ports.log
    this.readModels = ports.readModels
    this.views = new BoundedCache(bounds, now)
    this.forks = ports.timeTravel && new ForkSeeds(ports.timeTravel)
    this.unsubscribe = this.log.onCommit((events) => {
      for (const e of events) {
        const cached = this.views.peek(e.sessionId) // a commit is no read: the view's idle time goes on
        if (!cached) {
          this.loads.hear(e)
          this.forks?.hear(e)
          continue
        }
        cached.pending.push(e)
        if (cached.pending.length >= FOLD_AT) this.fold(e.sessionId, cached)
      }
    })
  }

  /** Folds what waits into the view; false when a fold failed and the view was dropped (reloaded on next read). */
  private fold(sessionId: string, cached: Cached): boolean {
    const { pending, state } = cached
    if (pending.length === 0) return true
    cached.pending = []
    try {
      for (const e of pending) {
        const changes = evolve(state.view, e)
        for (const m of changes.messages ?? [])
          cached.bytes += approxBytes(m) - approxBytes(state.view.messages.get(m.id))
        for (const p of changes.parts ?? []) {
          cached.bytes += approxBytes(p) - approxBytes(state.view.parts.get(p.id))
          const blob = attachedBlob(p)
          if (blob !== undefined && !cached.blobs.has(blob)) cached.missing.push(blob)
        }
        apply(state.view, changes)
        state.transcript.apply(changes)
      }
      this.views.resize(sessionId, cached.bytes * TRANSCRIPT_FACTOR)
      return true
    } catch {
      this.views.delete(sessionId)
      return false
    }
  }

  /** The session's current state, including everything appended before this call. */
  async read(sessionId: string): Promise<SessionView> {
    return (await this.state(sessionId)).view
  }

  /** The view and its transcript, including everything appended before this call. */
  async state(sessionId: string): Promise<SessionState> {
    // Read-your-writes: what the session queued committed (only its own events change its view), which the
    // listener above hears before the view is folded.
    await this.log.settled(sessionId)
    return this.committed(sessionId)
  }

  /** The view and its transcript as committed: without what is still queued (see loop.ts, a run's start). */
  async committed(sessionId: string): Promise<SessionState> {
    const cached = this.views.get(sessionId) // the most recently used now
    if (!cached || !this.fold(sessionId, cached)) return this.load(sessionId)
    if (cached.missing.length > 0) await fetchBlobs(this.log, cached)
    return cached.state
  }

  private load(sessionId: string): Promise<SessionState> {
    return this.loads.load(sessionId, (heard) => this.loadView(sessionId, heard))
  }

  private async loadView(sessionId: string, heard: readonly StoredEvent[]): Promise<SessionState> {
    const view = (await this.forks?.view(sessionId)) ?? (await this.readModels.view(sessionId, { committed: true }))
    if (!view.session) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
    const blobs = new Map<string, string>()
    const state = { view, transcript: new Transcript(view, (hash) => blobs.get(hash)) }
    const bytes = viewBytes(view)
    const missing = [...view.parts.values()].flatMap((p) => attachedBlob(p) ?? [])
    // what committed while the read was out and is not in what it read
    const pending = heard.filter((e) => e.version > (view.session?.version ?? 0))
    const cached: Cached = { state, pending, bytes, blobs, missing }
    this.views.set(sessionId, cached, bytes * TRANSCRIPT_FACTOR)
    this.fold(sessionId, cached)
    if (cached.missing.length > 0) await fetchBlobs(this.log, cached)
    return state
  }

  forget(sessionId: string): void {
    this.views.delete(sessionId)
    this.forks?.forget(sessionId)
  }

  /** Drops the views idle for the bounds' idleMs (a server with no traffic then holds none). */
  sweep(): void {
    this.views.sweep()
  }

  /** how many views are held, and their estimated bytes */
  get held(): { readonly views: number; readonly bytes: number } {
    return { views: this.views.size, bytes: this.views.bytes }
  }

  close(): void {
    this.unsubscribe()
    this.views.clear()
  }
}

/** The content hash of an attached file's part (src/runtime/inbox/attach.ts), which the transcript reads. */
function attachedBlob(p: Part): string | undefined {
  return p.type === 'file' ? p.blob : undefined
}

async function fetchBlobs(log: EventLog, cached: Cached): Promise<void> {
  const wanted = cached.missing
  cached.missing = []
  await fetchInto(log.blobs, wanted, cached.blobs)
}
