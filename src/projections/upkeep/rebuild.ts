import { type EventStore, isSystemStream } from '../../events/store.js'
import type { StoredEvent } from '../../events/envelope.js'
import { foldSession, type InheritFn } from '../fold/fold.js'
import { createProjector } from '../rows/projector.js'

export interface RebuildReport {
  readonly sessions: number
  readonly events: number
  readonly ms: number
}

export type Progress = (done: number, total: number) => void

/** Events projected at once: the live projection's batches, as large as a rebuild can afford. */
const CHUNK = 4096

/**
 * Drops the read models and re-projects them from seq 0 through the live
 * projection itself (src/projections/rows/projector.ts: the same evolve, the same
 * rows — forks read their parent's, src/projections/rows/shared-rows.ts), in seq
 * order and one transaction (readers never see a half rebuild). Memory is the
 * projection's bounded cache and one chunk of events.
 */
export function rebuild(store: EventStore, options: { progress?: Progress; inherit?: InheritFn } = {}): RebuildReport {
  const started = performance.now()
  const db = store.reader()
  const inherit = options.inherit ?? ((from) => foldSession(store, from.sessionId, from.seq))
  const project = createProjector(inherit, { cache: { entries: 4096, bytes: 64 * 2 ** 20, idleMs: Infinity } })
  const total = store.head()
  let sessions = 0
  let events = 0
  db.transaction(() => {
    db.exec(
      'DELETE FROM parts; DELETE FROM messages; DELETE FROM sessions; DELETE FROM inherits; DELETE FROM rewrites;',
    )
    let chunk: StoredEvent[] = []
    const flush = (done: number) => {
      project(db, chunk)
      chunk = []
      options.progress?.(done, total)
    }
    for (const event of store.iterateAll(0, CHUNK)) {
      if (isSystemStream(event.sessionId)) continue
      if (event.version === 1) sessions++
      chunk.push(event)
      events++
      if (chunk.length === CHUNK) flush(event.seq)
    }
    flush(total)
  }).immediate()
  store.resetProjection()
  return { sessions, events, ms: performance.now() - started }
}
