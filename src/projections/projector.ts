import type Database from 'better-sqlite3'
import type { StoredEvent } from '../events/envelope.js'
import type { ProjectHook } from '../events/store.js'
import { apply, evolve } from './evolve.js'
import { inheritedView, type InheritFn } from './fold.js'
import type { Message, Part, Session, SessionView } from './model.js'

/**
 * The live projection: runs inside the append transaction, folds the batch
 * with evolve, and writes each changed entity once per batch (a streaming
 * part is rewritten per flush, not per delta). Entities are loaded from the
 * read-model tables on first touch, so memory is bounded by the batch.
 */
export function createProjector(inherit: InheritFn): ProjectHook {
  return (db, events) => {
    const writer = new BatchWriter(db)
    for (const event of events) writer.apply(event, inherit)
    writer.write()
  }
}

class BatchWriter {
  private readonly views = new Map<string, SessionView>()
  private readonly dirty = new Map<string, { messages: Set<string>; parts: Set<string> }>()
  private readonly stmt

  constructor(private readonly db: Database.Database) {
    this.stmt = statements(db)
  }

  apply(event: StoredEvent, inherit: InheritFn): void {
    let view = this.views.get(event.sessionId)
    let dirty = this.dirty.get(event.sessionId)
    if (!dirty) {
      dirty = { messages: new Set(), parts: new Set() }
      this.dirty.set(event.sessionId, dirty)
    }
    if (event.type === 'session.forked') {
      // The child's read model starts as a copy of the parent's state at the fork point.
      view = inheritedView(inherit, event)
      for (const id of view.messages.keys()) dirty.messages.add(id)
      for (const id of view.parts.keys()) dirty.parts.add(id)
    } else if (!view) {
      view = this.load(event.sessionId)
    }
    this.views.set(event.sessionId, view)
    const changes = evolve(view, event)
    apply(view, changes)
    for (const m of changes.messages ?? []) dirty.messages.add(m.id)
    for (const p of changes.parts ?? []) dirty.parts.add(p.id)
  }

  write(): void {
    for (const [sessionId, view] of this.views) {
      const session = view.session as Session
      this.stmt.session.run(session.id, session.parent?.sessionId ?? null, session.archived ? 1 : 0, session.updatedAt, JSON.stringify(session))
      const dirty = this.dirty.get(sessionId)
      for (const id of dirty?.messages ?? []) {
        this.stmt.message.run(sessionId, id, JSON.stringify(view.messages.get(id) as Message))
      }
      for (const id of dirty?.parts ?? []) {
        const part = view.parts.get(id) as Part
        this.stmt.part.run(sessionId, id, part.messageId, JSON.stringify(part))
      }
    }
  }

  /** A view whose maps read through to the tables on a miss. */
  private load(sessionId: string): SessionView {
    const row = this.stmt.getSession.get(sessionId) as string | undefined
    const { getMessage, getPart } = this.stmt
    return {
      session: row === undefined ? null : (JSON.parse(row) as Session),
      messages: new ReadThroughMap<Message>((id) => getMessage.get(sessionId, id) as string | undefined),
      parts: new ReadThroughMap<Part>((id) => getPart.get(sessionId, id) as string | undefined),
    }
  }
}

class ReadThroughMap<V> extends Map<string, V> {
  constructor(private readonly fetch: (id: string) => string | undefined) {
    super()
  }
  override get(id: string): V | undefined {
    if (super.has(id)) return super.get(id)
    const row = this.fetch(id)
    if (row === undefined) return undefined
    const value = JSON.parse(row) as V
    super.set(id, value)
    return value
  }
}

const cache = new WeakMap<Database.Database, ReturnType<typeof prepare>>()
function statements(db: Database.Database) {
  let s = cache.get(db)
  if (!s) {
    s = prepare(db)
    cache.set(db, s)
  }
  return s
}

function prepare(db: Database.Database) {
  return {
    getSession: db.prepare('SELECT data FROM sessions WHERE id = ?').pluck(),
    getMessage: db.prepare('SELECT data FROM messages WHERE session_id = ? AND id = ?').pluck(),
    getPart: db.prepare('SELECT data FROM parts WHERE session_id = ? AND id = ?').pluck(),
    session: db.prepare(
      `INSERT INTO sessions (id, parent_id, archived, updated_at, data) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET archived = excluded.archived, updated_at = excluded.updated_at, data = excluded.data`,
    ),
    message: db.prepare(
      `INSERT INTO messages (session_id, id, data) VALUES (?, ?, ?)
       ON CONFLICT (session_id, id) DO UPDATE SET data = excluded.data`,
    ),
    part: db.prepare(
      `INSERT INTO parts (session_id, id, message_id, data) VALUES (?, ?, ?, ?)
       ON CONFLICT (session_id, id) DO UPDATE SET data = excluded.data`,
    ),
  }
}
