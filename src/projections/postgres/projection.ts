import { isDeepStrictEqual } from 'node:util'
import type { StoredEvent } from '../../events/envelope.js'
import { ChronicleError } from '../../events/errors.js'
import type { Pipe } from '../../events/postgres/pipe.js'
import { type EventRow, toEvent } from '../../events/rows.js'
import { evolve, apply } from '../fold/evolve.js'
import { inheritedView, type InheritFn } from '../fold/fold.js'
import { messageFromRow, messageRow } from '../rows/message-rows.js'
import { emptyView, type Message, type Part, type Session, type SessionView } from '../fold/model.js'
import { fromRow, type PartRow, partJson, partThrough } from '../rows/part-rows.js'
import type { ProjectionRows, RowKind } from '../rows/projection-rows.js'
import { projectBatch, type ProjectorOptions, projectorCache } from '../rows/projector.js'
import type { RowLevel } from '../rows/shared-rows.js'
import { pgMessage, pgPart, pgSessions, type Queryable } from './read-models.js'
import { pgViewAt, type RecentView } from './time-travel.js'

/**
 * The live projection on PostgreSQL: the same projector (projectBatch), run in
 * the append's transaction, so a reader never sees events without their
 * projection. The projector reads rows synchronously; PostgreSQL answers
 * asynchronously. So the batch is projected against what has been fetched so
 * far; a read of anything else is noted and answered as if there were no row,
 * and the pass goes on to the end. What it noted is then fetched: when every
 * answer was right (the usual case: the rows of a message or part the batch
 * creates), the pass stands; otherwise its writes and the views it cached
 * are dropped and the batch projected again on what was fetched — evolve is
 * pure. A pass can only read what earlier answers lead it to, so a few
 * passes fetch everything. Writes are buffered and sent once a pass stands. A fork's inherited state (the owner's at the fork point, by time
 * travel: snapshot rows and a bounded fold, src/projections/postgres/time-travel.ts) is resolved before.
 */
export type PgProjectHook = (pipe: Pipe, events: readonly StoredEvent[]) => Promise<void>

export function createPgProjection(
  options: ProjectorOptions & { readonly recent?: RecentView } = {},
): PgProjectHook & { reset(): void; forget(sessionIds: Iterable<string>): void } {
  const cache = projectorCache(options)
  const project = async (pipe: Pipe, events: readonly StoredEvent[]): Promise<void> => {
    const inherited = new Map<string, SessionView>()
    for (const e of events) {
      if (e.type !== 'session.forked') continue
      const { sessionId, seq } = e.data.from
      const known = options.recent?.get(sessionId, seq)
      inherited.set(`${sessionId}@${seq}`, known ?? (await pgViewAt(pipe, sessionId, seq, { write: false })))
    }
    const inherit: InheritFn = (from) => inherited.get(`${from.sessionId}@${from.seq}`) as SessionView
    const rows = new FetchedRows()
    for (let pass = 0; ; pass++) {
      rows.clearWrites()
      rows.assumed.clear()
      let failed: unknown
      try {
        projectBatch(rows, events, cache, inherit)
      } catch (err) {
        failed = err
      }
      if (rows.assumed.size === 0) {
        if (failed !== undefined) throw failed
        break
      }
      if (pass >= 32) throw new Error(`the projection still needs rows after ${pass} passes`)
      // What the pass read and had not fetched it took as absent — most often rightly: the rows of the
      // message or part an event creates. Fetched now: if every answer was right, the pass stands as it is.
      if (await rows.fetchAssumed(pipe)) {
        if (failed !== undefined) throw failed
        break
      }
      // It rests on a wrong answer: its writes are dropped, and so are the views it cached (or took out of
      // the cache and changed); the next pass reads those sessions from their rows.
      for (const e of events) cache.delete(e.sessionId)
    }
    rows.write(pipe)
  }
  return Object.assign(project, {
    reset: () => cache.clear(),
    // the transaction did not commit: the views it cached are of versions that never were (src/events/postgres/log.ts)
    forget: (sessionIds: Iterable<string>) => {
      for (const id of sessionIds) cache.delete(id)
    },
  })
}

/**
 * The session's state right after event `seq`, folded from the log alone (what verify compares the read
 * models with; time travel adds snapshots): a fork's starts from its parent's at the
 * fork point; a seq before the fork's own first event is in its inherited history, so the answer is the
 * ancestor's there (as src/projections/fold/fold.ts's foldFrom).
 */
export async function foldAt(db: Queryable, sessionId: string, seq: number): Promise<SessionView> {
  const read = async (sql: string, params: unknown[]) => (await db.query<EventRow>(sql, params)).rows.map(toEvent)
  const columns = 'seq, session_id, version, type, schema_version, data, meta, at'
  const [first] = await read(`SELECT ${columns} FROM events WHERE session_id = $1 AND version = 1`, [sessionId])
  if (!first) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
  if (first.type === 'session.forked' && seq < first.seq) return foldAt(db, first.data.from.sessionId, seq)
  let view = emptyView()
  if (first.type === 'session.forked') {
    const parent = await foldAt(db, first.data.from.sessionId, first.data.from.seq)
    view = inheritedView(() => parent, first)
  }
  for (const e of await read(`SELECT ${columns} FROM events WHERE session_id = $1 AND seq <= $2 ORDER BY version`, [
    sessionId,
    seq,
  ]))
    apply(view, evolve(view, e))
  return view
}

const SEP = '\u0000'
const key = (...parts: (string | number)[]) => parts.join(SEP)

/** Rows keyed by (session, id), as unnest's two arrays. */
const pairs = (keys: readonly (readonly string[])[]) => [keys.map((k) => k[0]), keys.map((k) => k[1])]

/**
 * What the projector reads, as fetched so far; what it writes, buffered and sent in a few statements (the
 * last write of a row wins, as it would one statement at a time).
 */
class FetchedRows implements ProjectionRows {
  private readonly known = new Map<string, unknown>()
  /** what this pass read that is not fetched yet, and the answer it got: as if there were no row */
  readonly assumed = new Map<string, unknown>()
  private sessions = new Map<string, { session: Session; created: boolean }>()
  private messages = new Map<string, [string, string, string, number]>()
  private parts = new Map<string, [string, string, string, string, number | null, number]>()
  private inherits: [string, string, number][] = []
  private rewrites: [string, number, RowKind, string][] = []

  /** What `key` names as fetched; else `absent` (as if there were no row), noting it. */
  private read<T>(k: string, absent: T): T {
    if (this.known.has(k)) return this.known.get(k) as T
    if (!this.assumed.has(k)) this.assumed.set(k, absent)
    return absent
  }

  /** Fetches what the pass assumed absent: whether every answer it got is what the database holds. */
  async fetchAssumed(db: Queryable): Promise<boolean> {
    await this.fetch(db, [...this.assumed.keys()])
    for (const [k, answer] of this.assumed) if (!isDeepStrictEqual(this.known.get(k), answer)) return false
    return true
  }

  /**
   * Fetches what the keys name, in one round trip (the statements sent together: src/events/postgres/pipe.ts):
   * sessions, entities as if their sessions were not forks, which of those sessions are forks, and row
   * versions, a statement per kind; then what that did not answer — an entity of a fork (read through its
   * ancestors), a streaming part with its tail, the rarer reads — one by one.
   */
  async fetch(db: Queryable, keys: readonly string[]): Promise<void> {
    const byKind = new Map<string, string[][]>()
    for (const k of keys) {
      const [kind, ...args] = k.split(SEP) as [string, ...string[]]
      let list = byKind.get(kind)
      if (!list) byKind.set(kind, (list = []))
      list.push(args)
    }
    const sessions = byKind.get('session') ?? []
    const messages = byKind.get('message') ?? []
    const parts = byKind.get('part') ?? []
    const entitySessions = [...new Set([...messages, ...parts].map((k) => k[0] as string))]
    const versions = (['message', 'part'] as const).map(
      (kind) => [kind, (byKind.get('rowVersion') ?? []).filter((k) => k[0] === kind).map((k) => k.slice(1))] as const,
    )
    const [found, forkRows, messageRows, partRows, ...versionRows] = await Promise.all([
      sessions.length > 0
        ? pgSessions(
            db,
            sessions.map((k) => k[0] as string),
          )
        : [],
      entitySessions.length > 0 ? db.query<{ id: string }>(READ.forks, [entitySessions]) : undefined,
      messages.length > 0
        ? db.query<{ session_id: string; id: string; data: string }>(READ.messages, pairs(messages))
        : undefined,
      parts.length > 0 ? db.query<PartRow & { data: string }>(READ.parts, pairs(parts)) : undefined,
      ...versions.map(([kind, wanted]) =>
        wanted.length > 0
          ? db.query<{ session_id: string; id: string; version: number | null }>(READ.versions[kind], pairs(wanted))
          : undefined,
      ),
    ])
    for (const k of sessions) this.known.set(key('session', k[0] as string), undefined)
    for (const session of found) this.known.set(key('session', session.id), session)
    const forks = new Set(forkRows?.rows.map((r) => r.id))
    for (const [i, [kind, wanted]] of versions.entries()) {
      for (const k of wanted) this.known.set(key('rowVersion', kind, ...k), undefined)
      for (const r of versionRows[i]?.rows ?? []) this.known.set(key('rowVersion', kind, r.session_id, r.id), r.version)
    }
    await this.fetchMessages(db, messages, forks, messageRows?.rows ?? [])
    await this.fetchParts(db, parts, forks, partRows?.rows ?? [])
    for (const [kind, list] of byKind) {
      if (kind === 'session' || kind === 'message' || kind === 'part' || kind === 'rowVersion') continue
      for (const args of list) this.known.set(key(kind, ...args), await fetchOne(db, kind, args))
    }
  }

  private async fetchMessages(
    db: Queryable,
    wanted: string[][],
    forks: ReadonlySet<string>,
    rows: readonly { session_id: string; id: string; data: string }[],
  ): Promise<void> {
    for (const k of wanted) if (!forks.has(k[0] as string)) this.known.set(key('message', ...k), undefined)
    for (const r of rows)
      if (!forks.has(r.session_id))
        this.known.set(key('message', r.session_id, r.id), messageFromRow(r.session_id, r.id, r.data))
    for (const k of wanted)
      if (forks.has(k[0] as string))
        this.known.set(key('message', ...k), await pgMessage(db, k[0] as string, k[1] as string))
  }

  private async fetchParts(
    db: Queryable,
    wanted: string[][],
    forks: ReadonlySet<string>,
    rows: readonly (PartRow & { data: string })[],
  ): Promise<void> {
    const found = new Map(rows.map((r) => [key(r.sessionId, r.id), r]))
    const oneByOne: string[][] = []
    for (const k of wanted) {
      const row = found.get(key(k[0] as string, k[1] as string))
      // a fork's part is read through its ancestors; a streaming part's row needs its tail of deltas, as of
      // the version asked
      if (forks.has(k[0] as string) || row?.through != null) oneByOne.push(k)
      else this.known.set(key('part', ...k), row && fromRow(row))
    }
    for (const k of oneByOne) {
      const [sessionId, id, upTo] = k as [string, string, string]
      this.known.set(key('part', ...k), await pgPart(db, sessionId, id, Number(upTo)))
    }
  }

  clearWrites(): void {
    this.sessions = new Map()
    this.messages = new Map()
    this.parts = new Map()
    this.inherits = []
    this.rewrites = []
  }

  /** Sends what the pass wrote, a statement per table, answered when the transaction commits (Pipe). */
  write(db: Pipe): void {
    const sessions = [...this.sessions.values()]
    const created = sessions.filter((s) => s.created).map((s) => s.session)
    const changed = sessions.filter((s) => !s.created).map((s) => s.session)
    if (created.length > 0)
      db.send(
        {
          name: 'chronicle_sessions_insert',
          text: `INSERT INTO sessions (id, parent_id, archived, data, versioned)
         SELECT i, p, a, d, true FROM unnest($1::text[], $2::text[], $3::boolean[], $4::text[]) AS x(i, p, a, d)
         ON CONFLICT (id) DO UPDATE SET parent_id = EXCLUDED.parent_id, archived = EXCLUDED.archived,
           data = EXCLUDED.data, versioned = true`,
        },
        sessionColumns(created),
      )
    if (changed.length > 0)
      db.send(
        {
          name: 'chronicle_sessions_update',
          text: `UPDATE sessions SET archived = x.a, data = x.d
         FROM unnest($1::text[], $2::text[], $3::boolean[], $4::text[]) AS x(i, p, a, d) WHERE sessions.id = x.i`,
        },
        sessionColumns(changed),
      )
    const messages = [...this.messages.values()]
    if (messages.length > 0)
      db.send(
        {
          name: 'chronicle_messages_upsert',
          text: `INSERT INTO messages (session_id, id, data, version)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[])
         ON CONFLICT (session_id, id) DO UPDATE SET data = EXCLUDED.data, version = EXCLUDED.version`,
        },
        [0, 1, 2, 3].map((i) => messages.map((m) => m[i])),
      )
    const parts = [...this.parts.values()]
    if (parts.length > 0)
      db.send(
        {
          name: 'chronicle_parts_upsert',
          text: `INSERT INTO parts (session_id, id, message_id, data, through, version)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::integer[], $6::integer[])
         ON CONFLICT (session_id, id) DO UPDATE SET message_id = EXCLUDED.message_id, data = EXCLUDED.data,
           through = EXCLUDED.through, version = EXCLUDED.version`,
        },
        [0, 1, 2, 3, 4, 5].map((i) => parts.map((p) => p[i])),
      )
    if (this.inherits.length > 0)
      db.send(
        {
          name: 'chronicle_inherits_insert',
          text: 'INSERT INTO inherits (session_id, from_session, upto) SELECT * FROM unnest($1::text[], $2::text[], $3::integer[])',
        },
        [0, 1, 2].map((i) => this.inherits.map((r) => r[i])),
      )
    if (this.rewrites.length > 0)
      db.send(
        {
          name: 'chronicle_rewrites_insert',
          text: 'INSERT INTO rewrites (session_id, version, kind, id) SELECT * FROM unnest($1::text[], $2::integer[], $3::text[], $4::text[])',
        },
        [0, 1, 2, 3].map((i) => this.rewrites.map((r) => r[i])),
      )
  }

  session(sessionId: string): Session | undefined {
    return this.read(key('session', sessionId), undefined)
  }
  message(sessionId: string, id: string): Message | undefined {
    return this.read(key('message', sessionId, id), undefined)
  }
  part(sessionId: string, id: string, upTo: number): Part | undefined {
    return this.read(key('part', sessionId, id, upTo), undefined)
  }
  forkPoint(seq: number): { owner: string; upto: number } {
    return this.read(key('forkPoint', seq), { owner: '', upto: 0 })
  }
  versioned(sessionId: string): boolean {
    return this.read(key('versioned', sessionId), true)
  }
  rewritesSince(sessionId: string, upto: number): { kind: RowKind; id: string }[] {
    return this.read(key('rewrites', sessionId, upto), [])
  }
  children(sessionId: string): RowLevel[] {
    return this.read(key('children', sessionId), [])
  }
  rowVersion(kind: RowKind, sessionId: string, id: string): number | null | undefined {
    return this.read(key('rowVersion', kind, sessionId, id), undefined)
  }

  writeSession(session: Session, created: boolean): void {
    const before = this.sessions.get(session.id)
    this.sessions.set(session.id, { session, created: created || before?.created === true })
  }
  writeMessage(sessionId: string, message: Message, version: number): void {
    this.messages.set(key(sessionId, message.id), [
      sessionId,
      message.id,
      messageRow(sessionId, message.id, message),
      version,
    ])
  }
  writePart(sessionId: string, part: Part, version: number, changed: number): void {
    this.parts.set(key(sessionId, part.id), [
      sessionId,
      part.id,
      part.messageId,
      partJson(sessionId, part),
      partThrough(part, version),
      changed,
    ])
  }
  writeInherits(child: string, owner: string, upto: number): void {
    this.inherits.push([child, owner, upto])
  }
  writeRewrite(sessionId: string, version: number, kind: RowKind, id: string): void {
    this.rewrites.push([sessionId, version, kind, id])
  }
}

/** The projection's reads of rows by key, prepared once a connection (named). */
const READ = {
  forks: {
    name: 'chronicle_fetch_forks',
    text: 'SELECT session_id AS id FROM inherits WHERE session_id = ANY($1::text[])',
  },
  messages: {
    name: 'chronicle_fetch_messages',
    text: 'SELECT session_id, id, data FROM messages WHERE (session_id, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))',
  },
  parts: {
    name: 'chronicle_fetch_parts',
    text: `SELECT session_id AS "sessionId", id, message_id AS "messageId", data, through FROM parts
           WHERE (session_id, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
  },
  versions: {
    message: {
      name: 'chronicle_fetch_message_versions',
      text: 'SELECT session_id, id, version FROM messages WHERE (session_id, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))',
    },
    part: {
      name: 'chronicle_fetch_part_versions',
      text: 'SELECT session_id, id, version FROM parts WHERE (session_id, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))',
    },
  },
}

const sessionColumns = (sessions: readonly Session[]) => [
  sessions.map((s) => s.id),
  sessions.map((s) => s.parent?.sessionId ?? null),
  sessions.map((s) => s.archived),
  sessions.map((s) => JSON.stringify(s)),
]

/** The reads a batch makes rarely (forks, versions of rows), one query each. */
async function fetchOne(db: Queryable, kind: string, args: readonly string[]): Promise<unknown> {
  const [a = '', b = ''] = args
  switch (kind) {
    case 'forkPoint':
      return (
        await db.query<{ owner: string; upto: number }>(
          'SELECT session_id AS owner, version AS upto FROM events WHERE seq = $1',
          [Number(a)],
        )
      ).rows[0]
    case 'versioned':
      return (
        (await db.query<{ versioned: boolean }>('SELECT versioned FROM sessions WHERE id = $1', [a])).rows[0]
          ?.versioned === true
      )
    case 'rewrites':
      return (
        await db.query<{ kind: RowKind; id: string }>(
          'SELECT DISTINCT kind, id FROM rewrites WHERE session_id = $1 AND version > $2',
          [a, Number(b)],
        )
      ).rows
    case 'children':
      return (
        await db.query<RowLevel>('SELECT session_id AS "sessionId", upto FROM inherits WHERE from_session = $1', [a])
      ).rows
    default:
      throw new Error(`unknown rows key ${kind}`)
  }
}
