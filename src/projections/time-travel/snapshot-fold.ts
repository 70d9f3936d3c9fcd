import type { EventStore } from '../../events/store.js'
import { apply, evolve } from '../fold/evolve.js'
import { type InheritFn, inheritedView } from '../fold/fold.js'
import { eventsByVersion, firstEvent } from './lineage.js'
import { emptyView, type Part, type SessionView } from '../fold/model.js'
import { snapshotCache } from './snapshots.js'

/**
 * A fold of one session's own events that starts from the snapshot chain and
 * extends it: every `every` events past the chain's last row it records a
 * new row (the entities changed since). It can be advanced again later, so
 * a background maintainer folds each event once, not once per row.
 */
export class SnapshotFold {
  readonly view: SessionView
  /** the version the view is at */
  version: number
  /** the version of the chain's last row (0: none) */
  private base: number
  private readonly changed = { messages: new Set<string>(), parts: new Set<string>() }
  /** the changed parts' values at `base` (for storing only what a streamed string grew by) */
  private readonly prior = new Map<string, Part>()
  /** whether this fold may append rows: only at the chain's end, so the chain never branches */
  private readonly writing: boolean

  constructor(
    private readonly store: EventStore,
    readonly sessionId: string,
    upToVersion: number,
    private readonly every: number,
    inherit: InheritFn,
  ) {
    const cache = snapshotCache(store.reader(sessionId))
    const first = firstEvent(store, sessionId)
    this.view = first.type === 'session.forked' ? inheritedView(inherit, first) : emptyView()
    this.base = cache.mergeInto(this.view, sessionId, upToVersion)?.version ?? 0
    this.version = this.base
    this.writing = every > 0 && this.base === cache.tail(sessionId)
  }

  /** Folds the session's events up to `version`, recording rows on the way. */
  advance(version: number): SessionView {
    const db = this.store.reader(this.sessionId)
    const cache = snapshotCache(db)
    for (const event of eventsByVersion(db, this.sessionId, this.version, version)) {
      const changes = evolve(this.view, event)
      if (this.writing) {
        for (const p of changes.parts ?? []) {
          const before = this.view.parts.get(p.id)
          if (!this.changed.parts.has(p.id) && before) this.prior.set(p.id, before)
          this.changed.parts.add(p.id)
        }
        for (const m of changes.messages ?? []) this.changed.messages.add(m.id)
      }
      apply(this.view, changes)
      this.version = event.version
      if (this.writing && event.version - this.base >= this.every) {
        cache.write(
          this.sessionId,
          { version: event.version, seq: event.seq, baseVersion: this.base },
          this.view,
          this.changed,
          this.prior,
        )
        this.base = event.version
        this.changed.messages.clear()
        this.changed.parts.clear()
        this.prior.clear()
      }
    }
    return this.view
  }

  /** Still the end of the chain (nobody else added rows), so advancing it stays correct. */
  isChainEnd(): boolean {
    return this.writing && snapshotCache(this.store.reader(this.sessionId)).tail(this.sessionId) === this.base
  }
}
