import type { EventStore } from '../events/store.js'
import { foldSession, type InheritFn } from './fold.js'
import { apply, evolve } from './evolve.js'
import { inheritedView } from './fold.js'
import { emptyView, type SessionView } from './model.js'
import { messageRow } from './message-rows.js'
import { createPartWriter } from './part-rows.js'
import { createSessionWriter } from './session-rows.js'

export interface RebuildReport {
  readonly sessions: number
  readonly events: number
  readonly ms: number
}

export type Progress = (done: number, total: number) => void

/**
 * Drops the read models and re-projects them from seq 0 with the same evolve
 * the live projection uses, in one transaction (readers never see a half
 * rebuild). Session by session, so memory is one session's state.
 */
export function rebuild(store: EventStore, options: { progress?: Progress; inherit?: InheritFn } = {}): RebuildReport {
  const started = performance.now()
  const { db } = store
  store.flush()
  const inherit = options.inherit ?? ((from) => foldSession(store, from.sessionId, from.seq))
  const ids = db
    .prepare(
      "SELECT session_id FROM events WHERE version = 1 AND session_id NOT LIKE 'sys\\_%' ESCAPE '\\' ORDER BY seq",
    )
    .pluck()
    .all() as string[]
  const insertMessage = db.prepare('INSERT INTO messages (session_id, id, data) VALUES (?, ?, ?)')
  const sessions = createSessionWriter(db)
  const parts = createPartWriter(db)
  let events = 0
  db.transaction(() => {
    db.exec('DELETE FROM parts; DELETE FROM messages; DELETE FROM sessions;')
    ids.forEach((sessionId, i) => {
      let view: SessionView = emptyView()
      let first = true
      for (const event of store.iterateSession(sessionId)) {
        if (first && event.type === 'session.forked') view = inheritedView(inherit, event)
        first = false
        apply(view, evolve(view, event))
        events++
      }
      const s = view.session
      if (s) {
        sessions.write(s, true)
        for (const m of view.messages.values()) insertMessage.run(sessionId, m.id, messageRow(sessionId, m.id, m))
        for (const p of view.parts.values()) parts.write(sessionId, p, s.version)
      }
      options.progress?.(i + 1, ids.length)
    })
  }).immediate()
  store.resetProjection()
  return { sessions: ids.length, events, ms: performance.now() - started }
}
