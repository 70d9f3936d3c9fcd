import { BoundedCache, type CacheBounds } from '../../events/bounded-cache.js'
import { copyWith } from '../../events/copy.js'
import type { StoredEvent } from '../../events/envelope.js'
import { isSystemStream, type ProjectHook } from '../../events/store.js'
import { apply, evolve, grown } from '../fold/evolve.js'
import type { InheritFn } from '../fold/fold.js'
import { messageInFlight, partInFlight } from '../fold/in-flight.js'
import type { Message, Part, Session, SessionView } from '../fold/model.js'
import { type ProjectionRows, type RowKind, sqliteRows } from './projection-rows.js'
import type { RowLevel } from './shared-rows.js'
import { approxBytes } from '../fold/sizes.js'

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
  const cache = projectorCache(options)
  const project: ProjectHook = (db, events) => projectBatch(sqliteRows(db), events, cache, inherit)
  // After a rebuild the tables were rewritten behind the cached views: read them again.
  project.reset = () => cache.clear()
  project.sweep = () => cache.sweep()
  return project
}

/** The views the projection keeps between batches (the engine's projection owns one). */
export function projectorCache(options: ProjectorOptions = {}): ProjectorCache {
  return new BoundedCache<string, Cached>(Object.assign({}, DEFAULT_PROJECTOR_BOUNDS, options.cache))
}

export type ProjectorCache = BoundedCache<string, Cached>

/**
 * Projects one batch of committed events onto `rows`, inside their transaction: every engine's projection
 * is this one. What it throws rolls the append back. An engine that fetches rows ahead may run it on rows
 * it has not fetched yet and project the batch again when an answer was wrong (evolve is pure:
 * src/projections/postgres/projection.ts).
 */
export function projectBatch(
  rows: ProjectionRows,
  events: readonly StoredEvent[],
  cache: ProjectorCache,
  inherit: InheritFn,
): void {
  const writer = new BatchWriter(rows, cache, inherit)
  for (const event of events) if (!isSystemStream(event.sessionId)) writer.apply(event)
  writer.write()
}

/** What one batch did to one session. */
interface Touched {
  /** the version of the session's last event in the batch */
  version: number
  /** the batch creates the session's row (session.created, session.forked) */
  created: boolean
  /** something besides the head changed: the row is written */
  changed: boolean
  /** messages changed, each with the version of the event that last changed it (0: as the fork point had it) */
  readonly messages: Map<string, number>
  /** parts changed otherwise than by a delta: written, likewise */
  readonly parts: Map<string, number>
  /** parts only grown by deltas: kept cached, not written */
  readonly grown: Set<string>
}

/** A session made by a fork in this batch, reading `owner`'s rows up to `upto` (shared-rows.ts). */
interface Fork {
  readonly child: string
  readonly owner: string
  readonly upto: number
}

class BatchWriter {
  private readonly views = new Map<string, SessionView>()
  private readonly touched = new Map<string, Touched>()
  private readonly forks: Fork[] = []
  /** settled entities changed again, per session: what a fork at an earlier event must hold itself */
  private readonly rewrites: { sessionId: string; version: number; kind: Kind; id: string }[] = []
  /** copies a change makes for the forks that read the entity's row (copy on write) */
  private readonly copies: { sessionId: string; kind: Kind; entity: Message | Part }[] = []
  private readonly message = (sessionId: string, id: string) => this.rows.message(sessionId, id)
  private readonly part = (sessionId: string, id: string, upTo: number) => this.rows.part(sessionId, id, upTo)
  /** each session's forks that read its rows, as the table had them when this batch first asked */
  private readonly children = new Map<string, RowLevel[]>()
  /** each cached view's session as this batch took it, and its size: a batch of deltas leaves it as it was */
  private readonly sized = new Map<string, { readonly session: Session | null; readonly bytes: number }>()

  constructor(
    private readonly rows: ProjectionRows,
    private readonly cache: BoundedCache<string, Cached>,
    private readonly inherit: InheritFn,
  ) {}

  apply(event: StoredEvent): void {
    let touched = this.touched.get(event.sessionId)
    if (!touched) {
      touched = { version: 0, created: false, changed: false, messages: new Map(), parts: new Map(), grown: new Set() }
      this.touched.set(event.sessionId, touched)
    }
    let view = this.views.get(event.sessionId)
    if (event.type === 'session.forked') {
      // The child's state starts as the parent's at the fork point; its rows are the parent's (shared-rows.ts).
      const parent = this.inherit(event.data.from)
      view = {
        session: parent.session,
        messages: inherited(parent.messages, event),
        parts: inherited(parent.parts, event),
      }
      this.forked(event.sessionId, event.data.from.seq, parent, touched)
      touched.created = true
      this.views.set(event.sessionId, view)
    } else if (!view) {
      // The batch owns the cached view until it puts it back (a rolled-back batch leaves none).
      const cached = this.cache.take(event.sessionId)
      if (cached && cached.version === event.version - 1) {
        view = cached.view
        this.sized.set(event.sessionId, { session: view.session, bytes: cached.sessionBytes })
      } else view = this.load(event.sessionId)
      // What the view does not hold yet is read as of before this batch, whose events are in the log already.
      readThrough(view.messages, event.version - 1, this.message)
      readThrough(view.parts, event.version - 1, this.part)
      this.views.set(event.sessionId, view)
    }
    touched.version = event.version
    const part = view.session && grown(view, event)
    if (part) {
      view.parts.set(part.id, part)
      touched.grown.add(part.id)
      return
    }
    if (view.session === null) touched.created = true
    const changes = evolve(view, event)
    for (const m of changes.messages ?? []) {
      const prior = view.messages.get(m.id)
      this.changing(event, 'message', m.id, prior && !messageInFlight(prior) ? prior : undefined)
      touched.messages.set(m.id, event.version)
    }
    for (const p of changes.parts ?? []) {
      const prior = view.parts.get(p.id)
      this.changing(event, 'part', p.id, prior && !partInFlight(prior) ? prior : undefined)
      touched.parts.set(p.id, event.version)
    }
    apply(view, changes)
    touched.changed = true
  }

  /**
   * A fork: it reads the owner's rows as of the fork point, and holds itself what was in flight there (the
   * owner's rows of it move on; a fork made by the fork command settles it, but a log need not) and what the
   * owner has changed since (its rewrites) — or, when the owner's rows carry no versions (projected before
   * migration 14), all of them.
   */
  private forked(child: string, seq: number, view: SessionView, touched: Touched): void {
    const { owner, upto } = this.rows.forkPoint(seq)
    const ownerTouched = this.touched.get(owner)
    if (!(ownerTouched?.created || this.rows.versioned(owner))) {
      for (const id of view.messages.keys()) touched.messages.set(id, 0)
      for (const id of view.parts.keys()) touched.parts.set(id, 0)
      return
    }
    this.forks.push({ child, owner, upto })
    for (const m of view.messages.values()) if (messageInFlight(m)) touched.messages.set(m.id, 0)
    for (const p of view.parts.values()) if (partInFlight(p)) touched.parts.set(p.id, 0)
    const since = [
      ...this.rows.rewritesSince(owner, upto),
      ...this.rewrites.filter((r) => r.sessionId === owner && r.version > upto),
    ]
    for (const { kind, id } of since) {
      if (kind === 'message' ? view.messages.has(id) : view.parts.has(id)) touched[`${kind}s`].set(id, 0)
    }
  }

  /**
   * An entity of the event's session changes. `settled`: its value before, when that was settled (a revert
   * marking a message, a late patch): its row moves on, so forks at earlier events must not read it any more —
   * it is logged for the forks made later, and copied into each existing fork that read it (copy on write).
   */
  private changing(event: StoredEvent, kind: Kind, id: string, settled: Message | Part | undefined): void {
    if (!settled) return
    const sessionId = event.sessionId
    this.rewrites.push({ sessionId, version: event.version, kind, id })
    // none: the session reads it from an ancestor too, whose row stays as the forks read it
    const rowVersion = this.held(sessionId, kind, id)
    if (rowVersion === undefined) return
    for (const child of this.childrenOf(sessionId))
      if ((rowVersion ?? 0) <= child.upto) this.reads(child.sessionId, kind, settled)
  }

  /**
   * A fork reads the changing row through its chain: it is given the row as it was, unless it holds one of
   * its own — then its forks made before that row's version read past it, to the changing row, in turn.
   */
  private reads(sessionId: string, kind: Kind, settled: Message | Part): void {
    const own = this.held(sessionId, kind, settled.id)
    if (own === undefined) {
      this.copies.push({ sessionId, kind, entity: copyWith(settled, { sessionId }) })
      return
    }
    for (const child of this.childrenOf(sessionId))
      if ((own ?? 0) > child.upto) this.reads(child.sessionId, kind, settled)
  }

  /**
   * The version of the session's own row of the entity: changed earlier in this batch, copied into it earlier
   * in this batch (0: as its fork point had it), or as stored (null: projected before versions); none when the
   * session holds no row of it.
   */
  private held(sessionId: string, kind: Kind, id: string): number | null | undefined {
    const before = (
      kind === 'message' ? this.touched.get(sessionId)?.messages : this.touched.get(sessionId)?.parts
    )?.get(id)
    if (before !== undefined) return before
    if (this.copied(sessionId, kind, id)) return 0
    return this.rows.rowVersion(kind, sessionId, id)
  }

  private childrenOf(sessionId: string): RowLevel[] {
    let children = this.children.get(sessionId)
    if (!children) {
      children = this.rows.children(sessionId)
      this.children.set(sessionId, children)
    }
    const made = this.forks.filter((f) => f.owner === sessionId).map((f) => ({ sessionId: f.child, upto: f.upto }))
    return made.length === 0 ? children : [...children, ...made]
  }

  /** Whether this batch copied the entity into the fork (copy on write): its row, not written yet. */
  private copied(sessionId: string, kind: Kind, id: string): boolean {
    return this.copies.some((c) => c.sessionId === sessionId && c.kind === kind && c.entity.id === id)
  }

  write(): void {
    for (const fork of this.forks) this.rows.writeInherits(fork.child, fork.owner, fork.upto)
    for (const r of this.rewrites) this.rows.writeRewrite(r.sessionId, r.version, r.kind, r.id)
    for (const { sessionId, kind, entity } of this.copies) {
      if (kind === 'message') this.rows.writeMessage(sessionId, entity as Message, 0)
      else this.rows.writePart(sessionId, entity as Part, 0, 0)
    }
    for (const [sessionId, view] of this.views) {
      const session = view.session as Session
      const touched = this.touched.get(sessionId) as Touched
      if (touched.changed) this.rows.writeSession(session, touched.created)
      for (const [id, version] of touched.messages)
        this.rows.writeMessage(sessionId, view.messages.get(id) as Message, version)
      for (const [id, version] of touched.parts)
        this.rows.writePart(sessionId, view.parts.get(id) as Part, touched.version, version)
      // Cache what this batch touched (bounded), on top of what the view already held.
      const messages = bounded(view.messages, this.message, sessionId, touched.messages.keys())
      const parts = bounded(view.parts, this.part, sessionId, touched.parts.keys(), touched.grown)
      // sized again only when it changed (apply replaces the object): ~1 µs a session
      const sized = this.sized.get(sessionId)
      const sessionBytes = sized?.session === session ? sized.bytes : approxBytes(session)
      this.cache.set(
        sessionId,
        { view: { session, messages, parts }, version: touched.version, sessionBytes },
        sessionBytes + messages.bytes + parts.bytes,
      )
    }
  }

  /** A view whose maps read through to the tables on a miss. */
  private load(sessionId: string): SessionView {
    return {
      session: this.rows.session(sessionId) ?? null,
      messages: new ReadThroughMap<Message>(this.message, sessionId),
      parts: new ReadThroughMap<Part>(this.part, sessionId),
    }
  }
}

/** A fork's entities: its parent's at the fork point, each made the fork's when read (a fork reads few). */
function inherited<V extends Message | Part>(from: ReadonlyMap<string, V>, event: StoredEvent): Map<string, V> {
  return new InheritedMap(from, event.sessionId)
}

class InheritedMap<V extends Message | Part> extends Map<string, V> {
  constructor(
    private readonly from: ReadonlyMap<string, V>,
    private readonly sessionId: string,
  ) {
    super()
  }
  override get(id: string): V | undefined {
    const own = super.get(id)
    if (own !== undefined) return own
    const parent = this.from.get(id)
    if (parent === undefined) return undefined
    const value = copyWith(parent as Message | Part, { sessionId: this.sessionId }) as V
    super.set(id, value)
    return value
  }
  override has(id: string): boolean {
    return super.has(id) || this.from.has(id)
  }
  override get size(): number {
    let size = this.from.size
    for (const id of super.keys()) if (!this.from.has(id)) size++
    return size
  }
  override *keys(): MapIterator<string> {
    yield* this.from.keys()
    for (const id of super.keys()) if (!this.from.has(id)) yield id
  }
  override *values(): MapIterator<V> {
    for (const id of this.keys()) yield this.get(id) as V
  }
  override *entries(): MapIterator<[string, V]> {
    for (const id of this.keys()) yield [id, this.get(id) as V]
  }
  override [Symbol.iterator](): MapIterator<[string, V]> {
    return this.entries()
  }
  override forEach(f: (value: V, key: string, map: Map<string, V>) => void): void {
    for (const [id, value] of this.entries()) f(value, id, this)
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
  fetch: (sessionId: string, id: string, upTo: number) => V | undefined,
  sessionId: string,
  ...touched: Iterable<string>[]
): ReadThroughMap<V> {
  const into = from instanceof ReadThroughMap ? (from as ReadThroughMap<V>) : new ReadThroughMap<V>(fetch, sessionId)
  for (const ids of touched) {
    for (const id of ids) {
      if (into === from) into.promote(id)
      else into.set(id, from.get(id) as V)
    }
  }
  for (const id of into.keys()) {
    if (into.size <= ENTITIES_PER_SESSION) break
    into.delete(id)
  }
  return into
}

/** A cached map reads as of `upTo`, through this batch's rows (an engine's rows may be the batch's own). */
function readThrough<V>(
  map: Map<string, V>,
  upTo: number,
  fetch: (sessionId: string, id: string, upTo: number) => Message | Part | undefined,
): void {
  if (!(map instanceof ReadThroughMap)) return
  map.upTo = upTo
  map.fetch = fetch as (sessionId: string, id: string, upTo: number) => V | undefined
}

/**
 * A map that loads an entity from the tables on a miss (the loaded value then
 * stays), as of session version `upTo`.
 */
class ReadThroughMap<V> extends Map<string, V> {
  upTo = Number.MAX_SAFE_INTEGER
  /** approxBytes of the entities held as last sized, and of each */
  private sized = 0
  private readonly sizes = new Map<string, number>()
  /** entities set since the map was last sized: a part a batch grows delta by delta is sized once, at its end */
  private readonly unsized = new Set<string>()
  constructor(
    public fetch: (sessionId: string, id: string, upTo: number) => V | undefined,
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
    this.unsized.add(id)
    return super.set(id, value)
  }
  override delete(id: string): boolean {
    this.unsized.delete(id)
    this.sized -= this.sizes.get(id) ?? 0
    this.sizes.delete(id)
    return super.delete(id)
  }
  /** approxBytes of the entities held */
  get bytes(): number {
    for (const id of this.unsized) {
      const size = approxBytes(super.get(id))
      this.sized += size - (this.sizes.get(id) ?? 0)
      this.sizes.set(id, size)
    }
    this.unsized.clear()
    return this.sized
  }
  /** Moves an entity held to the end (the most recently written), as it is. */
  promote(id: string): void {
    const value = super.get(id)
    if (value === undefined) return
    super.delete(id)
    super.set(id, value)
  }
}

/** A session's view as the last batch left it, current at session version `version`. */
interface Cached {
  readonly view: SessionView
  readonly version: number
  /** approxBytes of the view's session (an object a change replaces, so it stands while the session does) */
  readonly sessionBytes: number
}

type Kind = RowKind
