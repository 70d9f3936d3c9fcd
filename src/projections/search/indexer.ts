import Database from 'better-sqlite3'
import type { EventMeta, StoredEvent } from '../../events/envelope.js'
import { registerFunctions } from '../../events/schema.js'
import { indexEvent, type IndexerState, initialIndexerState, type IndexOp, replayFrom } from './documents.js'
import { clearIndex, type IndexPosition, indexWriter, readPosition } from './sqlite-index.js'

/**
 * The indexer: reads the log after the index's position through a
 * connection of its own (read-only; in WAL a reader never blocks the
 * store's writer) and applies what each event changes, a page of events per
 * transaction. The worker thread (index-worker.ts) runs it after commits;
 * `chronicle rebuild` and `verify` run it in their own thread.
 *
 * The events are read as the `events` view gives them, JSON parsed but not
 * checked against the catalogue again: the store checked each one before it
 * was written, and the indexer only reads the fields it names.
 */

export interface LogSource {
  /** events with seq > after, in seq order, at most `limit` */
  after(after: number, limit: number): StoredEvent[]
  /** the hash of the event at seq, hex ('' when it has none or there is no such event) */
  hashAt(seq: number): string | undefined
  head(): number
  close(): void
}

interface Row {
  seq: number
  session_id: string
  version: number
  type: string
  schema_version: number
  data: string
  meta: string
  at: number
}

/** The store's file, read-only, as the indexer reads it. */
export function openLogSource(path: string): LogSource {
  const db = new Database(path, { readonly: true, fileMustExist: true })
  db.pragma('busy_timeout = 5000')
  registerFunctions(db)
  const page = db.prepare(
    'SELECT seq, session_id, version, type, schema_version, data, meta, at FROM events WHERE seq > ? ORDER BY seq LIMIT ?',
  )
  const hash = db.prepare('SELECT hex(hash) FROM event_log WHERE seq = ?').pluck()
  const head = db.prepare('SELECT COALESCE(MAX(seq), 0) FROM event_log').pluck()
  let lastAt = Number.NaN
  let lastIso = ''
  return {
    after(after, limit) {
      return (page.all(after, limit) as Row[]).map((row) => {
        if (row.at !== lastAt) {
          lastAt = row.at
          lastIso = new Date(row.at).toISOString()
        }
        return {
          seq: row.seq,
          sessionId: row.session_id,
          version: row.version,
          type: row.type,
          schemaVersion: row.schema_version,
          data: JSON.parse(row.data) as unknown,
          meta: JSON.parse(row.meta) as EventMeta,
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
  /** indexes what the log holds after the position, up to its head; returns the new position */
  catchUp(): number
  readonly position: number
}

/** Events read and applied per transaction. */
const PAGE = 4096

/**
 * An indexer over an open index: it checks the index belongs to this log (the
 * hash at its position), empties it if not, and has the parts still streaming
 * at its position back by reading the log again from where they started.
 */
export function createIndexer(index: Database.Database, log: LogSource, pageSize = PAGE): Indexer {
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
    catchUp() {
      for (;;) {
        const events = log.after(position, pageSize)
        if (events.length === 0) return position
        const ops: IndexOp[] = []
        for (const event of events) for (const op of indexEvent(state, event)) ops.push(op)
        const last = (events[events.length - 1] as StoredEvent).seq
        const next: IndexPosition = { seq: last, hash: log.hashAt(last) ?? '', replayFrom: replayFrom(state) }
        write(ops, next)
        position = last
        if (events.length < pageSize) return position
      }
    },
  }
}

/** The fold's memory as it was at `through`: the events after `after` folded again, their changes dropped. */
function replay(state: IndexerState, log: LogSource, after: number, through: number): void {
  for (let at = after; at < through; ) {
    const events = log.after(at, PAGE)
    if (events.length === 0) return
    for (const event of events) {
      if (event.seq > through) return
      indexEvent(state, event)
    }
    at = (events[events.length - 1] as StoredEvent).seq
  }
}
