import { createHash } from 'node:crypto'
import { deflateRawSync, inflateRawSync } from 'node:zlib'
import type Database from 'better-sqlite3'
import { apply, evolve } from '../fold/evolve.js'
import { rekey } from '../fold/fold.js'
import type { Message, Part, Session, SessionView } from '../fold/model.js'
import { perConnection } from '../rows/prepared.js'

/**
 * The snapshot cache behind time travel: a derived table, never the source
 * of truth. Each row is a *delta*: the session object plus every message and
 * part that the session's events with base_version < version <= version
 * changed, with their values right after `version`. The rows of a session
 * chain from base 0 (empty view, or for a fork the inherited view) upwards;
 * merging the chain up to row r and folding the events after it gives the
 * state at any later event.
 *
 * Deltas rather than full copies keep the table linear in the log: a full
 * view every K events would grow with the square of the session's length.
 * Rows are never updated (the log is immutable, so a row stays true); a row
 * written by an older evolve is recognised by `format` and dropped.
 *
 * A part still streaming when a row is written appears in several rows; its
 * streamed string (a text's `text`, a tool's `rawInput`) is then stored as
 * `[prefixLength, part-with-only-the-new-suffix]`, so a long part costs its
 * length once, not once per row it spans.
 *
 * A row's JSON over COMPRESS_FROM bytes is stored deflated, as a BLOB (the
 * storage class tells the two apart): rows repeat keys, ids and text, and
 * deflate shrinks them several times over. Small rows stay plain JSON, where
 * deflate would save little.
 */
const COMPRESS_FROM = 4096

/** Changes when the projection code changes, so a snapshot from older code is never used. */
export const SNAPSHOT_FORMAT = createHash('sha256')
  .update(`delta-2\n${evolve.toString()}\n${apply.toString()}\n${rekey.toString()}`)
  .digest('hex')
  .slice(0, 16)

export interface ChainRow {
  readonly version: number
  readonly seq: number
  readonly baseVersion: number
}

/** A part as a row stores it: whole, or as the suffix of its streamed string after `prefixLength` units. */
type StoredPart = Part | readonly [prefixLength: number, part: Part]

interface Delta {
  readonly session: Session
  readonly messages: readonly Message[]
  readonly parts: readonly StoredPart[]
}

type Streamed = 'text' | 'rawInput'
function streamed(part: Part): Streamed | undefined {
  return part.type === 'text' || part.type === 'reasoning' ? 'text' : part.type === 'tool' ? 'rawInput' : undefined
}
const field = (part: Part, name: Streamed): string => (part as unknown as Record<Streamed, string>)[name]

export class SnapshotCache {
  private readonly stmt

  constructor(readonly db: Database.Database) {
    // A cache written by other projection code is wrong for this code: drop it
    // (and never read it, should this delete be rolled back with a transaction).
    db.prepare('DELETE FROM snapshots WHERE format <> ?').run(SNAPSHOT_FORMAT)
    this.stmt = {
      chain: db.prepare(
        `SELECT version, seq, base_version AS baseVersion, data FROM snapshots
         WHERE session_id = ? AND version <= ? AND format = '${SNAPSHOT_FORMAT}' ORDER BY version`,
      ),
      rows: db.prepare(
        `SELECT version, seq, base_version AS baseVersion FROM snapshots
         WHERE session_id = ? AND version <= ? AND format = '${SNAPSHOT_FORMAT}' ORDER BY version`,
      ),
      tail: db.prepare('SELECT MAX(version) FROM snapshots WHERE session_id = ?').pluck(),
      insert: db.prepare(
        `INSERT OR IGNORE INTO snapshots (session_id, version, seq, base_version, format, data) VALUES (?, ?, ?, ?, '${SNAPSHOT_FORMAT}', ?)`,
      ),
    }
  }

  /**
   * Merges the unbroken chain of rows up to `version` into `view` (in place)
   * and returns the last row used, or undefined when there is none. A gap
   * (a row whose base is not the previous row) ends the chain: what follows
   * is folded from the log instead.
   */
  mergeInto(view: SessionView, sessionId: string, version: number): ChainRow | undefined {
    let last: ChainRow | undefined
    for (const row of this.stmt.chain.iterate(sessionId, version) as Iterable<ChainRow & { data: string | Buffer }>) {
      if (row.baseVersion !== (last?.version ?? 0)) break
      const delta = decode(row.data)
      if (!delta) break // an unreadable row ends the chain: the log answers from there
      const parts = delta.parts.map((p) =>
        Array.isArray(p) ? appended(view, p as readonly [number, Part]) : (p as Part),
      )
      if (parts.includes(undefined)) break // a suffix that does not fit: treat as the chain's end
      view.session = delta.session
      for (const m of delta.messages) view.messages.set(m.id, m)
      for (const p of parts as Part[]) view.parts.set(p.id, p)
      last = { version: row.version, seq: row.seq, baseVersion: row.baseVersion }
    }
    return last
  }

  /** The highest version with a row (0 when none): new rows are only ever added after it. */
  tail(sessionId: string): number {
    return (this.stmt.tail.get(sessionId) as number | null) ?? 0
  }

  /**
   * Records the entities changed since `baseVersion`, as they are in `view`
   * right after event (version, seq). `prior` holds the parts' values at
   * `baseVersion`, for storing a streamed string's growth only.
   */
  write(
    sessionId: string,
    row: ChainRow,
    view: SessionView,
    changed: { messages: Set<string>; parts: Set<string> },
    prior: ReadonlyMap<string, Part>,
  ): void {
    const delta: Delta = {
      session: view.session as Session,
      messages: [...changed.messages].map((id) => view.messages.get(id) as Message),
      parts: [...changed.parts].map((id) => storedPart(view.parts.get(id) as Part, prior.get(id))),
    }
    const json = JSON.stringify(delta)
    this.stmt.insert.run(
      sessionId,
      row.version,
      row.seq,
      row.baseVersion,
      json.length < COMPRESS_FROM ? json : deflateRawSync(json),
    )
  }
}

function decode(data: string | Buffer): Delta | undefined {
  try {
    return JSON.parse(typeof data === 'string' ? data : inflateRawSync(data).toString()) as Delta
  } catch {
    return undefined
  }
}

function storedPart(part: Part, before: Part | undefined): StoredPart {
  const name = streamed(part)
  if (!name || !before || before.type !== part.type) return part
  const was = field(before, name)
  const now = field(part, name)
  if (was.length === 0 || !now.startsWith(was)) return part
  return [was.length, Object.assign({}, part, { [name]: now.slice(was.length) })]
}

function appended(view: SessionView, [prefixLength, part]: readonly [number, Part]): Part | undefined {
  const name = streamed(part)
  const before = view.parts.get(part.id)
  if (!name || !before || before.type !== part.type || field(before, name).length !== prefixLength) return undefined
  return Object.assign({}, part, { [name]: field(before, name) + field(part, name) }) as Part
}

/** The snapshot cache of a database connection (one per connection). */
export const snapshotCache = perConnection((db) => new SnapshotCache(db))
