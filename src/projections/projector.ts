import type Database from 'better-sqlite3'
import type { StoredEvent } from '../events/envelope.js'
import type { ProjectHook } from '../events/store.js'
import { apply, evolve } from './evolve.js'
import { inheritedView, type InheritFn } from './fold.js'
import type { Message, Part, Session, SessionView } from './model.js'
import { messageFromRow, messageRow } from './message-rows.js'
import { createPartWriter, fromRow, PART_COLUMNS, type PartRow, type PartWriter } from './part-rows.js'

/**
 * The live projection: runs inside the append transaction, folds the batch
 * with evolve, and writes each changed entity once per batch (a streaming
 * part is rewritten per flush, not per delta).
 *
 * Views of recently written sessions stay cached between batches, so a
 * streaming part is not re-read and re-parsed on every flush. A cached view
 * is used only when its session version is exactly the one before the
 * event's: a rolled-back batch, a rebuild or a write through another
 * connection all make it miss, and the view is loaded from the tables again.
 * Memory is bounded: at most `cacheSessions` sessions, each holding only the
 * entities its latest batches touched; anything else reads through.
 */
export interface ProjectorOptions {
  readonly cacheSessions?: number
}

const ENTITIES_PER_SESSION = 64

export function createProjector(inherit: InheritFn, options: ProjectorOptions = {}): ProjectHook {
  const cache = new ViewCache(options.cacheSessions ?? 256)
  const project: ProjectHook = (db, events) => {
    const writer = new BatchWriter(db, cache, inherit)
    for (const event of events) writer.apply(event)
    writer.write()
  }
  // After a rebuild the cached views still hold the right state, but a part's
  // text slices may be cut differently: drop them and read the tables again.
  project.reset = () => cache.clear()
  return project
}

interface Dirty {
  readonly messages: Set<string>
  /** changed parts, each with its value before this batch (undefined: new) */
  readonly parts: Map<string, Part | undefined>
}

class BatchWriter {
  private readonly views = new Map<string, SessionView>()
  private readonly dirty = new Map<string, Dirty>()
  /** sessions whose row this batch creates (the others are updated in place) */
  private readonly fresh = new Set<string>()
  private readonly stmt: Statements

  constructor(
    db: Database.Database,
    private readonly cache: ViewCache,
    private readonly inherit: InheritFn,
  ) {
    this.stmt = statements(db)
  }

  apply(event: StoredEvent): void {
    let dirty = this.dirty.get(event.sessionId)
    if (!dirty) {
      dirty = { messages: new Set(), parts: new Map() }
      this.dirty.set(event.sessionId, dirty)
    }
    let view = this.views.get(event.sessionId)
    if (event.type === 'session.forked') {
      // The child's read model starts as a copy of the parent's state at the fork point.
      view = inheritedView(this.inherit, event)
      for (const id of view.messages.keys()) dirty.messages.add(id)
      for (const id of view.parts.keys()) dirty.parts.set(id, undefined)
    } else if (!view) {
      const cached = this.cache.take(event.sessionId)
      view = cached && cached.session?.version === event.version - 1 ? cached : this.load(event.sessionId)
    }
    if (view.session === null || event.type === 'session.forked') this.fresh.add(event.sessionId)
    this.views.set(event.sessionId, view)
    const changes = evolve(view, event)
    for (const p of changes.parts ?? []) if (!dirty.parts.has(p.id)) dirty.parts.set(p.id, view.parts.get(p.id))
    apply(view, changes)
    for (const m of changes.messages ?? []) dirty.messages.add(m.id)
  }

  write(): void {
    for (const [sessionId, view] of this.views) {
      const session = view.session as Session
      if (this.fresh.has(sessionId)) {
        this.stmt.session.run(session.id, session.parent?.sessionId ?? null, session.archived ? 1 : 0, session.updatedAt, JSON.stringify(session))
      } else {
        this.stmt.sessionUpdate.run(session.archived ? 1 : 0, session.updatedAt, JSON.stringify(session), session.id)
      }
      const dirty = this.dirty.get(sessionId) as Dirty
      for (const id of dirty.messages) this.stmt.message.run(sessionId, id, messageRow(sessionId, id, view.messages.get(id) as Message))
      for (const [id, prior] of dirty.parts) this.stmt.parts.write(sessionId, view.parts.get(id) as Part, prior)
      // Cache what this batch touched (bounded), on top of what the view already held.
      const messages = bounded(view.messages, dirty.messages, () => new ReadThroughMap<Message>(this.stmt.getMessage, sessionId))
      const parts = bounded(view.parts, dirty.parts.keys(), () => new ReadThroughMap<Part>(this.stmt.getPart, sessionId))
      this.cache.put(sessionId, { session, messages, parts })
    }
  }

  /** A view whose maps read through to the tables on a miss. */
  private load(sessionId: string): SessionView {
    const row = this.stmt.getSession.get(sessionId) as string | undefined
    return {
      session: row === undefined ? null : (JSON.parse(row) as Session),
      messages: new ReadThroughMap<Message>(this.stmt.getMessage, sessionId),
      parts: new ReadThroughMap<Part>(this.stmt.getPart, sessionId),
    }
  }
}

/**
 * The view's entity map as the cache keeps it: at most ENTITIES_PER_SESSION
 * entries, the ones this batch touched among them (moved to the end, so the
 * least recently written go first). A read-through map from an earlier batch
 * is trimmed in place; any other (a fork's inherited view) is replaced.
 */
function bounded<V>(from: Map<string, V>, touched: Iterable<string>, fresh: () => ReadThroughMap<V>): ReadThroughMap<V> {
  const into = from instanceof ReadThroughMap ? (from as ReadThroughMap<V>) : fresh()
  for (const id of touched) {
    const value = from.get(id) as V
    into.delete(id)
    into.seed(id, value)
  }
  for (const id of into.keys()) {
    if (into.size <= ENTITIES_PER_SESSION) break
    into.delete(id)
  }
  return into
}

/** A map that loads an entity row from its table on a miss (the loaded value then stays). */
class ReadThroughMap<V> extends Map<string, V> {
  constructor(
    private readonly fetch: (sessionId: string, id: string) => V | undefined,
    private readonly sessionId: string,
  ) {
    super()
  }
  override get(id: string): V | undefined {
    const hit = super.get(id)
    if (hit !== undefined) return hit
    const value = this.fetch(this.sessionId, id)
    if (value !== undefined) super.set(id, value)
    return value
  }
  seed(id: string, value: V): void {
    super.set(id, value)
  }
}

/** Least-recently-written sessions are forgotten first. */
class ViewCache {
  private readonly views = new Map<string, SessionView>()
  constructor(private readonly capacity: number) {}

  clear(): void {
    this.views.clear()
  }

  /** Removes and returns the cached view: the batch owns it until it puts it back. */
  take(sessionId: string): SessionView | undefined {
    const view = this.views.get(sessionId)
    this.views.delete(sessionId)
    return view
  }

  put(sessionId: string, view: SessionView): void {
    this.views.delete(sessionId)
    this.views.set(sessionId, view)
    if (this.views.size > this.capacity) {
      const oldest = this.views.keys().next().value
      if (oldest !== undefined) this.views.delete(oldest)
    }
  }
}

type Statements = ReturnType<typeof prepare>
const prepared = new WeakMap<Database.Database, Statements>()
function statements(db: Database.Database): Statements {
  let s = prepared.get(db)
  if (!s) {
    s = prepare(db)
    prepared.set(db, s)
  }
  return s
}

function prepare(db: Database.Database) {
  const message = db.prepare('SELECT data FROM messages WHERE session_id = ? AND id = ?').pluck()
  const part = db.prepare(`SELECT ${PART_COLUMNS} FROM parts p WHERE p.session_id = ? AND p.id = ?`)
  return {
    getSession: db.prepare('SELECT data FROM sessions WHERE id = ?').pluck(),
    getMessage: (sessionId: string, id: string): Message | undefined => {
      const row = message.get(sessionId, id) as string | undefined
      return row === undefined ? undefined : messageFromRow(sessionId, id, row)
    },
    getPart: (sessionId: string, id: string): Part | undefined => {
      const row = part.get(sessionId, id) as PartRow | undefined
      return row && fromRow(row)
    },
    parts: createPartWriter(db) as PartWriter,
    session: db.prepare(
      `INSERT INTO sessions (id, parent_id, archived, updated_at, data) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET parent_id = excluded.parent_id, archived = excluded.archived, updated_at = excluded.updated_at, data = excluded.data`,
    ),
    sessionUpdate: db.prepare('UPDATE sessions SET archived = ?, updated_at = ?, data = ? WHERE id = ?'),
    message: db.prepare(
      `INSERT INTO messages (session_id, id, data) VALUES (?, ?, ?)
       ON CONFLICT (session_id, id) DO UPDATE SET data = excluded.data`,
    ),
  }
}
