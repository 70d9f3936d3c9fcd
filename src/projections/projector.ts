import { isSystemStream } from '../events/store.js'
import type Database from 'better-sqlite3'
import { BoundedCache, type CacheBounds } from '../events/bounded-cache.js'
import type { StoredEvent } from '../events/envelope.js'
import type { ProjectHook } from '../events/store.js'
import { apply, evolve, grown } from './evolve.js'
import { inheritedView, type InheritFn } from './fold.js'
import type { Message, Part, Session, SessionView } from './model.js'
import { messageFromRow, messageRow } from './message-rows.js'
import { createPartWriter, PART_COLUMNS, type PartRow, type PartWriter, withTails } from './part-rows.js'
import { createSessionWriter, sessionReader, type SessionWriter } from './session-rows.js'
import { perConnection } from './prepared.js'
import { approxBytes } from './sizes.js'

/**
 * The live projection: runs inside the append transaction, folds the batch
 * with evolve, and writes each changed entity once per batch. A streamed
 * delta writes nothing: it only grows its part's string and moves the
 * session's head, and readers take both from the log (part-rows.ts,
 * session-rows.ts). So a streaming session costs its event rows and nothing
 * more until something else about it changes.
 *
 * Views of recently written sessions stay cached between batches, so a
 * streaming part is not re-read on every flush. A cached view is used only
 * when it is current at exactly the version before the event's: a
 * rolled-back batch, a rebuild or a write through another connection all
 * make it miss, and the view is loaded from the tables (and the log's
 * tails) again. Memory is bounded (DEFAULT_PROJECTOR_BOUNDS, the config's
 * `memory`): each session holds only the entities its latest batches touched
 * (anything else reads through), and the sessions held are bounded by count,
 * bytes and idle time — a session not written for `idleMs` (its run ended) is
 * forgotten.
 */
export interface ProjectorOptions {
  readonly cache?: Partial<CacheBounds>
}

const ENTITIES_PER_SESSION = 64

/**
 * Above the sessions that stream at once (bench stream: 400), or each batch
 * reloads the ones evicted; idle after a run: a view is worth keeping only
 * between the batches of a run (a tool's call may take a while).
 */
export const DEFAULT_PROJECTOR_BOUNDS: CacheBounds = { entries: 1024, bytes: 16 * 2 ** 20, idleMs: 60_000 }

export function createProjector(inherit: InheritFn, options: ProjectorOptions = {}): ProjectHook {
  const cache = new BoundedCache<string, Cached>(Object.assign({}, DEFAULT_PROJECTOR_BOUNDS, options.cache))
  const project: ProjectHook = (db, events) => {
    const writer = new BatchWriter(db, cache, inherit)
    for (const event of events) if (!isSystemStream(event.sessionId)) writer.apply(event)
    writer.write()
  }
  // After a rebuild the tables were rewritten behind the cached views: read them again.
  project.reset = () => cache.clear()
  project.sweep = () => cache.sweep()
  return project
}

/** What one batch did to one session. */
interface Touched {
  /** the version of the session's last event in the batch */
  version: number
  /** the batch creates the session's row (session.created, session.forked) */
  created: boolean
  /** something besides the head changed: the row is written */
  changed: boolean
  readonly messages: Set<string>
  /** parts changed otherwise than by a delta: written */
  readonly parts: Set<string>
  /** parts only grown by deltas: kept cached, not written */
  readonly grown: Set<string>
}

class BatchWriter {
  private readonly views = new Map<string, SessionView>()
  private readonly touched = new Map<string, Touched>()
  private readonly stmt: Statements

  constructor(
    db: Database.Database,
    private readonly cache: BoundedCache<string, Cached>,
    private readonly inherit: InheritFn,
  ) {
    this.stmt = statements(db)
  }

  apply(event: StoredEvent): void {
    let touched = this.touched.get(event.sessionId)
    if (!touched) {
      touched = { version: 0, created: false, changed: false, messages: new Set(), parts: new Set(), grown: new Set() }
      this.touched.set(event.sessionId, touched)
    }
    let view = this.views.get(event.sessionId)
    if (event.type === 'session.forked') {
      // The child's read model starts as a copy of the parent's state at the fork point.
      view = inheritedView(this.inherit, event)
      for (const id of view.messages.keys()) touched.messages.add(id)
      for (const id of view.parts.keys()) touched.parts.add(id)
      touched.created = true
    } else if (!view) {
      // The batch owns the cached view until it puts it back (a rolled-back batch leaves none).
      const cached = this.cache.get(event.sessionId)
      this.cache.delete(event.sessionId)
      view = cached && cached.version === event.version - 1 ? cached.view : this.load(event.sessionId)
      // What the view does not hold yet is read as of before this batch, whose events are in the log already.
      readThrough(view.messages, event.version - 1)
      readThrough(view.parts, event.version - 1)
    }
    this.views.set(event.sessionId, view)
    touched.version = event.version
    const part = view.session && grown(view, event)
    if (part) {
      view.parts.set(part.id, part)
      touched.grown.add(part.id)
      return
    }
    if (view.session === null) touched.created = true
    const changes = evolve(view, event)
    apply(view, changes)
    touched.changed = true
    for (const m of changes.messages ?? []) touched.messages.add(m.id)
    for (const p of changes.parts ?? []) touched.parts.add(p.id)
  }

  write(): void {
    for (const [sessionId, view] of this.views) {
      const session = view.session as Session
      const touched = this.touched.get(sessionId) as Touched
      if (touched.changed) this.stmt.sessions.write(session, touched.created)
      for (const id of touched.messages)
        this.stmt.message.run(sessionId, id, messageRow(sessionId, id, view.messages.get(id) as Message))
      for (const id of touched.parts) this.stmt.parts.write(sessionId, view.parts.get(id) as Part, touched.version)
      // Cache what this batch touched (bounded), on top of what the view already held.
      const messages = bounded(
        view.messages,
        touched.messages,
        () => new ReadThroughMap<Message>(this.stmt.getMessage, sessionId),
      )
      const parts = bounded(
        view.parts,
        [...touched.parts, ...touched.grown],
        () => new ReadThroughMap<Part>(this.stmt.getPart, sessionId),
      )
      this.cache.set(
        sessionId,
        { view: { session, messages, parts }, version: touched.version },
        approxBytes(session) + messages.bytes + parts.bytes,
      )
    }
  }

  /** A view whose maps read through to the tables on a miss. */
  private load(sessionId: string): SessionView {
    return {
      session: this.stmt.getSession(sessionId) ?? null,
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
function bounded<V>(
  from: Map<string, V>,
  touched: Iterable<string>,
  fresh: () => ReadThroughMap<V>,
): ReadThroughMap<V> {
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

function readThrough<V>(map: Map<string, V>, upTo: number): void {
  if (map instanceof ReadThroughMap) map.upTo = upTo
}

/**
 * A map that loads an entity from the tables on a miss (the loaded value then
 * stays), as of session version `upTo`.
 */
class ReadThroughMap<V> extends Map<string, V> {
  upTo = Number.MAX_SAFE_INTEGER
  /** approxBytes of the entities held */
  bytes = 0
  constructor(
    private readonly fetch: (sessionId: string, id: string, upTo: number) => V | undefined,
    private readonly sessionId: string,
  ) {
    super()
  }
  override get(id: string): V | undefined {
    const hit = super.get(id)
    if (hit !== undefined) return hit
    const value = this.fetch(this.sessionId, id, this.upTo)
    if (value !== undefined) this.set(id, value)
    return value
  }
  override set(id: string, value: V): this {
    this.bytes += approxBytes(value) - approxBytes(super.get(id))
    return super.set(id, value)
  }
  override delete(id: string): boolean {
    this.bytes -= approxBytes(super.get(id))
    return super.delete(id)
  }
  seed(id: string, value: V): void {
    this.set(id, value)
  }
}

/** A session's view as the last batch left it, current at session version `version`. */
interface Cached {
  readonly view: SessionView
  readonly version: number
}

type Statements = ReturnType<typeof prepare>
const statements = perConnection(prepare)

function prepare(db: Database.Database) {
  const message = db.prepare('SELECT data FROM messages WHERE session_id = ? AND id = ?').pluck()
  const part = db.prepare(`SELECT ${PART_COLUMNS} FROM parts p WHERE p.session_id = ? AND p.id = ?`)
  return {
    getSession: sessionReader(db),
    getMessage: (sessionId: string, id: string): Message | undefined => {
      const row = message.get(sessionId, id) as string | undefined
      return row === undefined ? undefined : messageFromRow(sessionId, id, row)
    },
    getPart: (sessionId: string, id: string, upTo: number): Part | undefined => {
      const row = part.get(sessionId, id) as PartRow | undefined
      return row && withTails(db, sessionId, [row], upTo)[0]
    },
    sessions: createSessionWriter(db) as SessionWriter,
    parts: createPartWriter(db) as PartWriter,
    message: db.prepare(
      `INSERT INTO messages (session_id, id, data) VALUES (?, ?, ?)
       ON CONFLICT (session_id, id) DO UPDATE SET data = excluded.data`,
    ),
  }
}
