import Database from 'better-sqlite3'
import type { EventMeta, StoredEvent } from '../../events/envelope.js'
import { inflated, withPartId } from '../../events/schema.js'
import {
  INDEXED_TYPES,
  indexEvent,
  type IndexerState,
  initialIndexerState,
  type IndexOp,
  replayFrom,
} from './documents.js'
import { clearIndex, indexWriter, readPosition } from './sqlite-index.js'

/**
 * The indexer: reads the log after the index's position through a
 * connection of its own (read-only; in WAL a reader never blocks the
 * store's writer) and applies what each event changes, a window of seqs per
 * transaction. The worker thread (index-worker.ts) runs it after commits;
 * `chronicle rebuild` and `verify` run it in their own thread.
 */

export interface LogSource {
  /**
   * the events the index reads with after < seq <= through (those of the types it indexes: the others,
   * a tool's streamed input among them, are skipped unread), in seq order
   */
  between(after: number, through: number): StoredEvent[]
  /** the hash of the event at seq, hex ('' when it has none); undefined: no such event */
  hashAt(seq: number): string | undefined
  head(): number
  close(): void
}

interface Row {
  seq: number
  stream: number
  version: number
  type: number
  schema_version: number
  data: string | Buffer
  meta: number
  part: number | null
  at: number
}

/**
 * The store's file, read-only, as the indexer reads it: `event_log` with its
 * interned columns (docs/ARCHITECTURE.md "Performance notes": session ids,
 * types, metas and part ids are integers there) looked up once each and
 * kept, the data inflated and its leading part id put back as the `events`
 * view does, only for the types the index reads. JSON parsed, not checked
 * against the catalogue again: the store checked each event before writing
 * it, and the indexer reads only the fields it names.
 */
export function openLogSource(path: string): LogSource {
  const db = new Database(path, { readonly: true, fileMustExist: true })
  db.pragma('busy_timeout = 5000')
  const rows = db.prepare(`
    SELECT seq, stream, version, type, schema_version, data, meta, part, at FROM event_log
    WHERE seq > ? AND seq <= ? AND type IN (SELECT id FROM event_types WHERE type IN (SELECT value FROM json_each(?)))
    ORDER BY seq`)
  const types = JSON.stringify(INDEXED_TYPES)
  const hash = db.prepare('SELECT hex(hash) FROM event_log WHERE seq = ?').pluck()
  const head = db.prepare('SELECT COALESCE(MAX(seq), 0) FROM event_log').pluck()
  const lookup = <T>(sql: string, parse: (value: string) => T, bound: number) => {
    const statement = db.prepare(sql).pluck()
    const known = new Map<number, T>()
    return (id: number): T => {
      let value = known.get(id)
      if (value === undefined) {
        if (known.size >= bound) known.clear() // a long log's metas (a run's own ids) are many; each is read once a run
        value = parse(statement.get(id) as string)
        known.set(id, value)
      }
      return value
    }
  }
  const sessionOf = lookup('SELECT session_id FROM streams WHERE id = ?', (v) => v, 65_536)
  const typeOf = lookup('SELECT type FROM event_types WHERE id = ?', (v) => v, 1024)
  const metaOf = lookup('SELECT meta FROM event_metas WHERE id = ?', (v) => JSON.parse(v) as EventMeta, 8192)
  const partOf = lookup('SELECT part_id FROM event_parts WHERE id = ?', (v) => v, 65_536)
  let lastAt = Number.NaN
  let lastIso = ''
  return {
    between(after, through) {
      return (rows.all(after, through, types) as Row[]).map((row) => {
        if (row.at !== lastAt) {
          lastAt = row.at
          lastIso = new Date(row.at).toISOString()
        }
        const rest = inflated(row.data)
        return {
          seq: row.seq,
          sessionId: sessionOf(row.stream),
          version: row.version,
          type: typeOf(row.type),
          schemaVersion: row.schema_version,
          data: JSON.parse(row.part === null ? rest : withPartId(partOf(row.part), rest)) as unknown,
          meta: metaOf(row.meta),
          at: lastIso,
        } as StoredEvent
      })
    },
    hashAt(seq) {
      const found = hash.get(seq) as string | null | undefined
      return found === undefined ? undefined : (found ?? '')
    },
    head: () => head.get() as number,
    close: () => db.close(),
  }
}

export interface Indexer {
  /** indexes what the log holds after the position, up to its head (or `through`); returns the new position */
  catchUp(through?: number): number
  readonly position: number
}

/** The seqs read and applied per transaction (fewer events: only the types the index reads). */
const WINDOW = 8192

/**
 * An indexer over an open index: it checks the index belongs to this log (the
 * hash at its position), empties it if not, and has the parts still streaming
 * at its position back by reading the log again from where they started.
 */
export function createIndexer(index: Database.Database, log: LogSource, seqsPerRun = WINDOW): Indexer {
  let stored = readPosition(index)
  if (stored.seq > 0 && log.hashAt(stored.seq) !== stored.hash) {
    clearIndex(index)
    stored = readPosition(index)
  }
  const write = indexWriter(index)
  const state: IndexerState = initialIndexerState()
  if (stored.replayFrom !== undefined) replay(state, log, stored.replayFrom - 1, stored.seq)
  let position = stored.seq
  return {
    get position() {
      return position
    },
    catchUp(through = Number.POSITIVE_INFINITY) {
      const until = Math.min(through, log.head())
      while (position < until) {
        const last = Math.min(position + seqsPerRun, until)
        const ops: IndexOp[] = []
        for (const event of log.between(position, last)) for (const op of indexEvent(state, event)) ops.push(op)
        write(ops, { seq: last, hash: log.hashAt(last) ?? '', replayFrom: replayFrom(state) })
        position = last
      }
      return position
    },
  }
}

/** The fold's memory as it was at `through`: the events after `after` folded again, their changes dropped. */
function replay(state: IndexerState, log: LogSource, after: number, through: number): void {
  for (let at = after; at < through; at = Math.min(at + WINDOW, through))
    for (const event of log.between(at, Math.min(at + WINDOW, through))) indexEvent(state, event)
}
