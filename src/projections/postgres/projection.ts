import type pg from 'pg'
import type { StoredEvent } from '../../events/envelope.js'
import { ChronicleError } from '../../events/errors.js'
import { type EventRow, toEvent } from '../../events/rows.js'
import { evolve, apply } from '../evolve.js'
import { inheritedView, type InheritFn } from '../fold.js'
import { messageRow } from '../message-rows.js'
import { emptyView, type Message, type Part, type Session, type SessionView } from '../model.js'
import { partJson, partThrough } from '../part-rows.js'
import type { ProjectionRows, RowKind } from '../projection-rows.js'
import { projectBatch, type ProjectorOptions, projectorCache } from '../projector.js'
import type { RowLevel } from '../shared-rows.js'
import { pgMessage, pgPart, pgSession, type Queryable } from './read-models.js'

/**
 * The live projection on PostgreSQL: the same projector (projectBatch), run in
 * the append's transaction, so a reader never sees events without their
 * projection. The projector reads rows synchronously; PostgreSQL answers
 * asynchronously. So the batch is projected against what has been fetched so
 * far, and a read of anything else stops the pass, naming it: it is fetched
 * and the batch projected again — evolve is pure, so a pass that stops
 * changes nothing but views the next pass no longer trusts. Writes are
 * buffered and sent once a pass completes. A fork's inherited state (the
 * owner's, folded from the log up to the fork point) is resolved before.
 */
export type PgProjectHook = (client: pg.ClientBase, events: readonly StoredEvent[]) => Promise<void>

export function createPgProjection(options: ProjectorOptions = {}): PgProjectHook & { reset(): void } {
  const cache = projectorCache(options)
  const project = async (client: pg.ClientBase, events: readonly StoredEvent[]): Promise<void> => {
    const inherited = new Map<string, SessionView>()
    for (const e of events) {
      if (e.type !== 'session.forked') continue
      const { sessionId, seq } = e.data.from
      inherited.set(`${sessionId}@${seq}`, await foldAt(client, sessionId, seq))
    }
    const inherit: InheritFn = (from) => inherited.get(`${from.sessionId}@${from.seq}`) as SessionView
    const rows = new FetchedRows()
    for (let pass = 0; ; pass++) {
      rows.writes = []
      try {
        projectBatch(rows, events, pass === 0 ? cache : projectorCache({ cache: { entries: 0 } }), inherit)
        break
      } catch (err) {
        if (!(err instanceof RowsNeeded) || pass > 100) throw err
        await rows.fetch(client, err.key)
      }
    }
    for (const write of rows.writes) await write(client)
  }
  return Object.assign(project, { reset: () => cache.clear() })
}

/**
 * The session's state right after event `seq`, folded from the log: a fork's starts from its parent's at the
 * fork point; a seq before the fork's own first event is in its inherited history, so the answer is the
 * ancestor's there (as src/projections/fold.ts's foldFrom).
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

/** A read the rows cannot answer yet: fetched, then the batch is projected again. */
class RowsNeeded extends Error {
  constructor(readonly key: string) {
    super(`rows needed: ${key}`)
  }
}

type Write = (client: pg.ClientBase) => Promise<unknown>

/** What the projector reads, as fetched so far; what it writes, buffered. */
class FetchedRows implements ProjectionRows {
  private readonly known = new Map<string, unknown>()
  writes: Write[] = []

  private read<T>(key: string): T {
    if (!this.known.has(key)) throw new RowsNeeded(key)
    return this.known.get(key) as T
  }

  /** Fetches what `key` names (the key says which query: see the reads below). */
  async fetch(db: Queryable, key: string): Promise<void> {
    const [kind, ...args] = key.split('\u0000') as [string, ...string[]]
    const [a = '', b = '', c = ''] = args
    let value: unknown
    switch (kind) {
      case 'session':
        value = await pgSession(db, a)
        break
      case 'message':
        value = await pgMessage(db, a, b)
        break
      case 'part':
        value = await pgPart(db, a, b, Number(c))
        break
      case 'forkPoint':
        value = (
          await db.query<{ owner: string; upto: number }>(
            'SELECT session_id AS owner, version AS upto FROM events WHERE seq = $1',
            [Number(a)],
          )
        ).rows[0]
        break
      case 'versioned':
        value =
          (await db.query<{ versioned: boolean }>('SELECT versioned FROM sessions WHERE id = $1', [a])).rows[0]
            ?.versioned === true
        break
      case 'rewrites':
        value = (
          await db.query<{ kind: RowKind; id: string }>(
            'SELECT DISTINCT kind, id FROM rewrites WHERE session_id = $1 AND version > $2',
            [a, Number(b)],
          )
        ).rows
        break
      case 'children':
        value = (
          await db.query<RowLevel>('SELECT session_id AS "sessionId", upto FROM inherits WHERE from_session = $1', [a])
        ).rows
        break
      case 'rowVersion': {
        const table = a === 'message' ? 'messages' : 'parts'
        const row = (
          await db.query<{ version: number | null }>(`SELECT version FROM ${table} WHERE session_id = $1 AND id = $2`, [
            b,
            c,
          ])
        ).rows[0]
        value = row === undefined ? undefined : row.version
        break
      }
      default:
        throw new Error(`unknown rows key ${kind}`)
    }
    this.known.set(key, value)
  }

  session(sessionId: string): Session | undefined {
    return this.read(`session\u0000${sessionId}`)
  }
  message(sessionId: string, id: string): Message | undefined {
    return this.read(`message\u0000${sessionId}\u0000${id}`)
  }
  part(sessionId: string, id: string, upTo: number): Part | undefined {
    return this.read(`part\u0000${sessionId}\u0000${id}\u0000${upTo}`)
  }
  forkPoint(seq: number): { owner: string; upto: number } {
    return this.read(`forkPoint\u0000${seq}`)
  }
  versioned(sessionId: string): boolean {
    return this.read(`versioned\u0000${sessionId}`)
  }
  rewritesSince(sessionId: string, upto: number): { kind: RowKind; id: string }[] {
    return this.read(`rewrites\u0000${sessionId}\u0000${upto}`)
  }
  children(sessionId: string): RowLevel[] {
    return this.read(`children\u0000${sessionId}`)
  }
  rowVersion(kind: RowKind, sessionId: string, id: string): number | null | undefined {
    return this.read(`rowVersion\u0000${kind}\u0000${sessionId}\u0000${id}`)
  }

  writeSession(session: Session, created: boolean): void {
    this.writes.push((db) =>
      created
        ? db.query(
            `INSERT INTO sessions (id, parent_id, archived, data, versioned) VALUES ($1, $2, $3, $4, true)
             ON CONFLICT (id) DO UPDATE SET parent_id = EXCLUDED.parent_id, archived = EXCLUDED.archived,
               data = EXCLUDED.data, versioned = true`,
            [session.id, session.parent?.sessionId ?? null, session.archived, JSON.stringify(session)],
          )
        : db.query('UPDATE sessions SET archived = $1, data = $2 WHERE id = $3', [
            session.archived,
            JSON.stringify(session),
            session.id,
          ]),
    )
  }
  writeMessage(sessionId: string, message: Message, version: number): void {
    const data = messageRow(sessionId, message.id, message)
    this.writes.push((db) =>
      db.query(
        `INSERT INTO messages (session_id, id, data, version) VALUES ($1, $2, $3, $4)
         ON CONFLICT (session_id, id) DO UPDATE SET data = EXCLUDED.data, version = EXCLUDED.version`,
        [sessionId, message.id, data, version],
      ),
    )
  }
  writePart(sessionId: string, part: Part, version: number, changed: number): void {
    const args = [sessionId, part.id, part.messageId, partJson(sessionId, part), partThrough(part, version), changed]
    this.writes.push((db) =>
      db.query(
        `INSERT INTO parts (session_id, id, message_id, data, through, version) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (session_id, id) DO UPDATE SET message_id = EXCLUDED.message_id, data = EXCLUDED.data,
           through = EXCLUDED.through, version = EXCLUDED.version`,
        args,
      ),
    )
  }
  writeInherits(child: string, owner: string, upto: number): void {
    this.writes.push((db) =>
      db.query('INSERT INTO inherits (session_id, from_session, upto) VALUES ($1, $2, $3)', [child, owner, upto]),
    )
  }
  writeRewrite(sessionId: string, version: number, kind: RowKind, id: string): void {
    this.writes.push((db) =>
      db.query('INSERT INTO rewrites (session_id, version, kind, id) VALUES ($1, $2, $3, $4)', [
        sessionId,
        version,
        kind,
        id,
      ]),
    )
  }
}
