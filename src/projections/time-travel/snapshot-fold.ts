import type { EventStore } from '../../events/store.js'
import { type InheritFn, inheritedView } from '../fold/fold.js'
import { emptyView, type SessionView } from '../fold/model.js'
import { eventsByVersion, firstEvent } from './lineage.js'
import { DeltaRecorder } from './snapshot-delta.js'
import { snapshotCache } from './snapshots.js'

/**
 * A fold of one session's own events that starts from the snapshot chain and
 * extends it: every `every` events past the chain's last row it records a
 * new row (the entities changed since). It can be advanced again later, so
 * a background maintainer folds each event once, not once per row.
 */
export class SnapshotFold {
  /** the version the view is at */
  version: number
  private readonly recorder: DeltaRecorder
  /** whether this fold may append rows: only at the chain's end, so the chain never branches */
  private readonly writing: boolean

  constructor(
    private readonly store: EventStore,
    readonly sessionId: string,
    upToVersion: number,
    every: number,
    inherit: InheritFn,
  ) {
    const cache = snapshotCache(store.reader(sessionId))
    const first = firstEvent(store, sessionId)
    const view = first.type === 'session.forked' ? inheritedView(inherit, first) : emptyView()
    const base = cache.mergeInto(view, sessionId, upToVersion)?.version ?? 0
    this.version = base
    this.writing = every > 0 && base === cache.tail(sessionId)
    this.recorder = new DeltaRecorder(view, base, this.writing ? every : 0)
  }

  get view(): SessionView {
    return this.recorder.view
  }

  /** Folds the session's events up to `version`, recording rows on the way. */
  advance(version: number): SessionView {
    const db = this.store.reader(this.sessionId)
    const cache = snapshotCache(db)
    for (const event of eventsByVersion(db, this.sessionId, this.version, version)) {
      const row = this.recorder.fold(event)
      if (row) cache.write(this.sessionId, row)
      this.version = event.version
    }
    return this.recorder.view
  }

  /** Still the end of the chain (nobody else added rows), so advancing it stays correct. */
  isChainEnd(): boolean {
    return this.writing && snapshotCache(this.store.reader(this.sessionId)).tail(this.sessionId) === this.recorder.base
  }
}
