import type { StoredEvent } from '../../events/envelope.js'
import { ChronicleError } from '../../events/errors.js'
import type { PostgresEventLog } from '../../events/postgres/log.js'
import { type EventRow, toEvent } from '../../events/rows.js'
import { inheritedView } from '../fold/fold.js'
import { emptyView, type SessionView } from '../fold/model.js'
import {
  type HistoryEvent,
  type HistoryPage,
  type HistoryQuery,
  historyBounds,
  historyPage,
} from '../queries/history.js'
import { type Located, locatedIn, type Segment, segmentsOf } from '../time-travel/lineage.js'
import type { TimeTravel } from '../time-travel/port.js'
import { DeltaRecorder, mergeChain, SNAPSHOT_FORMAT, type SnapshotRow } from '../time-travel/snapshot-delta.js'
import {
  DEFAULT_SNAPSHOT_EVERY,
  type SessionState,
  stateOfView,
  type TimeTravelOptions,
} from '../time-travel/time-travel.js'
import type { Queryable } from './read-models.js'

/**
 * Time travel on PostgreSQL (docs/TIME-TRAVEL.md): SQLite's
 * (src/projections/time-travel/) asynchronously — the same lineage, the same
 * snapshot rows (snapshot-delta.ts) and the same evolve, so both engines give
 * the same state at every event. A state costs a chain of snapshot rows and
 * at most `snapshotEvery` events folded, whatever the session's length; a
 * fold at the chain's end records the rows it passes.
 *
 * `db` is what to read through: the pool once the session's appends have
 * committed (PostgresEventLog.reader), or an append's own transaction.
 */
export interface PgTimeTravelOptions extends TimeTravelOptions {
  /** record snapshot rows while folding (default true; the projection, inside an append, does not) */
  readonly write?: boolean
}

const COLUMNS = 'seq, session_id, version, type, schema_version, data, meta, at'
const PAGE = 5000

/** The session's state right after event `seq` (default: its latest); as src/projections/time-travel/stateAt. */
export async function pgStateAt(
  db: Queryable,
  sessionId: string,
  seq?: number,
  options: PgTimeTravelOptions = {},
): Promise<SessionState> {
  const reads = new Reads(db)
  const at = await locate(reads, sessionId, seq)
  return stateOfView(await foldWithSnapshots(reads, at, options), at.seq)
}

/** pgStateAt as a SessionView (maps), the fork's inheritance included. */
export async function pgViewAt(
  db: Queryable,
  sessionId: string,
  seq?: number,
  options: PgTimeTravelOptions = {},
): Promise<SessionView> {
  const reads = new Reads(db)
  return foldWithSnapshots(reads, await locate(reads, sessionId, seq), options)
}

/** A session's history paged by seq, as src/projections/queries/history.ts: one index range per segment. */
export async function pgHistory(db: Queryable, sessionId: string, query: HistoryQuery = {}): Promise<HistoryPage> {
  const bounds = historyBounds(query)
  const segments = await lineage(new Reads(db), sessionId)
  const events: HistoryEvent[] = []
  for (const segment of bounds.backward ? [...segments].reverse() : segments) {
    const wanted = bounds.limit + 1 - events.length
    if (wanted <= 0) break
    const from = Math.max(bounds.lo, segment.firstSeq - 1)
    const to = Math.min(bounds.hi, segment.upTo)
    if (from >= to) continue
    const rows = await read(
      db,
      `SELECT ${COLUMNS} FROM events WHERE session_id = $1 AND seq > $2 AND seq <= $3
       ORDER BY seq ${bounds.backward ? 'DESC' : 'ASC'} LIMIT $4`,
      [segment.sessionId, from, to, wanted],
    )
    for (const event of rows)
      events.push(segment.sessionId === sessionId ? event : Object.assign({}, event, { inherited: true as const }))
  }
  return historyPage(events, bounds)
}

/** A session's history as segments of the log (src/projections/time-travel/lineage.ts). */
async function lineage(reads: Reads, sessionId: string): Promise<Segment[]> {
  const first = await reads.first(sessionId)
  return segmentsOf(first, first.type === 'session.forked' ? await lineage(reads, first.data.from.sessionId) : [])
}

/** The reads of one answer: lineage, locate and the folds of a fork's ancestors ask for the same first events. */
class Reads {
  private readonly firsts = new Map<string, Promise<StoredEvent>>()
  constructor(readonly db: Queryable) {}

  /** The session's first event (session.created or session.forked); SESSION_NOT_FOUND. */
  first(sessionId: string): Promise<StoredEvent> {
    let first = this.firsts.get(sessionId)
    if (!first) {
      first = read(this.db, `SELECT ${COLUMNS} FROM events WHERE session_id = $1 AND version = 1`, [sessionId]).then(
        ([event]) => event ?? Promise.reject(new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)),
      )
      this.firsts.set(sessionId, first)
    }
    return first
  }
}

async function locate(reads: Reads, sessionId: string, seq?: number): Promise<Located> {
  const { db } = reads
  const segments = await lineage(reads, sessionId)
  if (seq === undefined) {
    const { rows } = await db.query<{ seq: number; version: number }>(
      'SELECT e.seq, e.version FROM streams s JOIN events e ON e.session_id = s.id AND e.version = s.version WHERE s.id = $1',
      [sessionId],
    )
    const latest = rows[0] as { seq: number; version: number } // lineage found its first event
    return { sessionId, seq: latest.seq, version: latest.version, inherited: false }
  }
  const event = Number.isSafeInteger(seq) && seq > 0 ? await eventAt(db, seq) : undefined
  return locatedIn(sessionId, segments, seq, event)
}

async function eventAt(db: Queryable, seq: number): Promise<{ sessionId: string; version: number } | undefined> {
  const { rows } = await db.query<{ session_id: string; version: number }>(
    'SELECT session_id, version FROM events WHERE seq = $1',
    [seq],
  )
  const row = rows[0]
  return row && { sessionId: row.session_id, version: row.version }
}

async function foldWithSnapshots(reads: Reads, at: Located, options: PgTimeTravelOptions): Promise<SessionView> {
  const { db } = reads
  const every = options.snapshotEvery ?? DEFAULT_SNAPSHOT_EVERY
  const first = await reads.first(at.sessionId)
  let view = emptyView()
  if (first.type === 'session.forked') {
    const { sessionId, seq } = first.data.from
    const parent = await foldWithSnapshots(reads, await locate(reads, sessionId, seq), options)
    view = inheritedView(() => parent, first)
  }
  const chain = await db.query<{ version: number; seq: number; baseVersion: number; json: string; packed: Buffer }>(
    `SELECT version, seq, base_version AS "baseVersion", json, packed FROM snapshots
     WHERE session_id = $1 AND version <= $2 AND format = $3 ORDER BY version`,
    [at.sessionId, at.version, SNAPSHOT_FORMAT],
  )
  const rows = chain.rows.map(
    (r): SnapshotRow => ({ version: r.version, seq: r.seq, baseVersion: r.baseVersion, data: r.json ?? r.packed }),
  )
  const base = mergeChain(view, rows)?.version ?? 0
  // Only a fold that passes a row's worth of events, from the chain's end, may add rows (the chain never branches).
  const writing =
    every > 0 && options.write !== false && at.version - base >= every && base === (await chainTail(db, at.sessionId))
  const recorder = new DeltaRecorder(view, base, writing ? every : 0)
  const recorded: SnapshotRow[] = []
  for (let after = base; after < at.version; ) {
    const events = await read(
      db,
      `SELECT ${COLUMNS} FROM events WHERE session_id = $1 AND version > $2 AND version <= $3 ORDER BY version LIMIT $4`,
      [at.sessionId, after, at.version, PAGE],
    )
    for (const event of events) {
      const row = recorder.fold(event)
      if (row) recorded.push(row)
    }
    const last = events[events.length - 1]
    if (!last) break
    after = last.version
  }
  if (recorded.length > 0) await record(db, at.sessionId, recorded)
  return view
}

/** The highest version with a row of this code's format (0 when none). */
async function chainTail(db: Queryable, sessionId: string): Promise<number> {
  const { rows } = await db.query<{ version: number }>(
    'SELECT version FROM snapshots WHERE session_id = $1 AND format = $2 ORDER BY version DESC LIMIT 1',
    [sessionId, SNAPSHOT_FORMAT],
  )
  return rows[0]?.version ?? 0
}

/** Adds rows to the chain (a row another fold wrote first is the same row); rows of older code make way. */
async function record(db: Queryable, sessionId: string, rows: readonly SnapshotRow[]): Promise<void> {
  await db.query(
    `INSERT INTO snapshots (session_id, version, seq, base_version, format, json, packed)
     SELECT $1, v, s, b, $6, j, p FROM unnest($2::integer[], $3::bigint[], $4::integer[], $5::text[], $7::bytea[])
       AS x(v, s, b, j, p)
     ON CONFLICT (session_id, version) DO UPDATE
       SET seq = EXCLUDED.seq, base_version = EXCLUDED.base_version, format = EXCLUDED.format,
           json = EXCLUDED.json, packed = EXCLUDED.packed
       WHERE snapshots.format <> EXCLUDED.format`,
    [
      sessionId,
      rows.map((r) => r.version),
      rows.map((r) => r.seq),
      rows.map((r) => r.baseVersion),
      rows.map((r) => (typeof r.data === 'string' ? r.data : null)),
      SNAPSHOT_FORMAT,
      rows.map((r) => (typeof r.data === 'string' ? null : r.data)),
    ],
  )
}

/** Rows written by other projection code are wrong for this code: dropped (as SQLite's SnapshotCache does). */
export async function dropStaleSnapshots(log: PostgresEventLog): Promise<void> {
  await (await log.reader()).query('DELETE FROM snapshots WHERE format <> $1', [SNAPSHOT_FORMAT])
}

async function read(db: Queryable, sql: string, params: unknown[]): Promise<StoredEvent[]> {
  return (await db.query<EventRow>(sql, params)).rows.map(toEvent)
}

/** PostgreSQL's time travel as the port (src/projections/time-travel/port.ts), reading its own writes. */
export function postgresTimeTravel(log: PostgresEventLog, options: TimeTravelOptions = {}): TimeTravel {
  return {
    stateAt: async (sessionId, seq) => pgStateAt(await log.reader(sessionId), sessionId, seq, options),
    viewAt: async (sessionId, seq) => {
      const view = await pgViewAt(await log.reader(sessionId), sessionId, seq, options)
      if (seq !== undefined) recentViews.get(log)?.keep(sessionId, seq, view)
      return view
    },
    history: async (sessionId, query) => pgHistory(await log.reader(sessionId), sessionId, query),
  }
}

/**
 * The last view read at a seq, outside any transaction: a fork reads its parent's state, then its append's
 * projection needs the very same one. The state at a committed event never changes, so it can be reused;
 * one read inside a transaction is never kept (its seqs may be rolled back and used again).
 */
export class RecentView {
  private last: { sessionId: string; seq: number; view: SessionView } | undefined

  keep(sessionId: string, seq: number, view: SessionView): void {
    this.last = { sessionId, seq, view }
  }

  get(sessionId: string, seq: number): SessionView | undefined {
    const last = this.last
    return last && last.sessionId === sessionId && last.seq === seq ? last.view : undefined
  }
}

const recentViews = new WeakMap<PostgresEventLog, RecentView>()

/** Lets the log's time travel hand the views it reads to the log's projection (src/projections/postgres/open.ts). */
export function shareRecentViews(log: PostgresEventLog, recent: RecentView): void {
  recentViews.set(log, recent)
}
