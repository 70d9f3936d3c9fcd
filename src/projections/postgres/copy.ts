import type pg from 'pg'
import { checkChain } from '../../events/chain-check.js'
import { eventHash } from '../../events/chain.js'
import { ChronicleError } from '../../events/errors.js'
import { PostgresEventLog } from '../../events/postgres/log.js'
import { redactUrl } from '../../events/postgres/url.js'
import { toEvent } from '../../events/rows.js'
import type { EventStore } from '../../events/store.js'
import { decodeStored, storedRows } from '../../events/stored-rows.js'
import type { Progress } from '../upkeep/rebuild.js'
import { Pipe } from '../../events/postgres/pipe.js'
import { createPgProjection } from './projection.js'

/**
 * `chronicle store copy --to postgres://…` (the server stopped): the SQLite
 * store's log, byte for byte — the same seqs, versions, texts, times and
 * hashes, so the same chain head digest — and its blobs into an empty
 * PostgreSQL database, the read models projected there by the same projector
 * as the events go in. One transaction: a copy that fails leaves the target
 * empty. A log older than the hash chain (SQLite schema migration 13) has
 * events with no hash, which PostgreSQL's log does not allow: that copy is
 * chained afresh from its first event, and says so.
 */

export interface CopyReport {
  readonly events: number
  readonly sessions: number
  readonly blobs: number
  /** the source had events logged before its chain began: every hash was computed anew */
  readonly rechained: boolean
  /** the source's head and whole-log digest (the copy's are the same unless rechained) */
  readonly sourceHead: { readonly seq: number; readonly digest: string }
  readonly ms: number
}

const CHUNK = 2000

export async function copyToPostgres(
  source: EventStore,
  url: string,
  options: { progress?: Progress } = {},
): Promise<CopyReport> {
  const started = performance.now()
  const db = source.reader()
  const total = db.prepare('SELECT COUNT(*) FROM event_log').pluck().get() as number
  const fromSeq = (db.prepare('SELECT from_seq FROM log_chain WHERE id = 1').pluck().get() as number | undefined) ?? 1
  const rechained = total > 0 && fromSeq > 1
  const target = await PostgresEventLog.open(url)
  try {
    return await target.exclusive(async (client) => {
      await refuseUnlessEmpty(client, url)
      const project = createPgProjection()
      const streams = new Map<string, { version: number; hash: Buffer }>()
      let chunk: Loaded[] = []
      let events = 0
      const flush = async () => {
        await insertChunk(client, chunk, streams)
        const pipe = new Pipe(client)
        await project(
          pipe,
          chunk.map((e) => toEvent(e.row)),
        )
        await pipe.settle()
        events += chunk.length
        chunk = []
        options.progress?.(events, total)
      }
      for (const stored of storedRows(db)) {
        const fields = decodeStored(stored)
        if (typeof fields === 'string')
          throw new ChronicleError('CORRUPT_EVENT', `event at seq ${stored.seq} cannot be copied: ${fields}`)
        const previous = streams.get(fields.sessionId)
        const hash = rechained || !stored.hash ? eventHash(previous?.hash ?? null, fields) : stored.hash
        streams.set(fields.sessionId, { version: fields.version, hash })
        chunk.push({
          row: {
            seq: fields.seq,
            session_id: fields.sessionId,
            version: fields.version,
            type: fields.type,
            schema_version: fields.schemaVersion,
            data: fields.data,
            meta: fields.meta,
            at: fields.at,
          },
          hash,
        })
        if (chunk.length === CHUNK) await flush()
      }
      if (chunk.length > 0) await flush()
      const blobs = await copyBlobs(client, db)
      const sessions = [...streams.keys()].filter((id) => !id.startsWith('sys_')).length
      const sourceHead = checkChain(db).head
      return { events, sessions, blobs, rechained, sourceHead, ms: Math.round(performance.now() - started) }
    })
  } finally {
    await target.close()
  }
}

interface Loaded {
  readonly row: Parameters<typeof toEvent>[0]
  readonly hash: Buffer
}

async function refuseUnlessEmpty(client: pg.ClientBase, url: string): Promise<void> {
  const { rows } = await client.query<{ seq: number; blobs: boolean }>(
    'SELECT seq, EXISTS (SELECT 1 FROM blobs) AS blobs FROM log_head WHERE id = 1',
  )
  const head = rows[0]
  if (head && (head.seq > 0 || head.blobs))
    throw new ChronicleError(
      'STORE_NOT_EMPTY',
      `${redactUrl(url)} already holds a log (its head is seq ${head.seq}): a store is copied into an empty database`,
    )
}

/** One chunk's events, their streams' heads and the log's head, as an append writes them. */
async function insertChunk(
  client: pg.ClientBase,
  chunk: readonly Loaded[],
  streams: ReadonlyMap<string, { version: number; hash: Buffer }>,
): Promise<void> {
  const touched = [...new Set(chunk.map((e) => e.row.session_id))]
  const last = chunk.at(-1) as Loaded
  await client.query(
    `WITH e AS (
       INSERT INTO events (seq, session_id, version, type, schema_version, data, meta, at, hash)
       SELECT * FROM unnest($1::bigint[], $2::text[], $3::integer[], $4::text[], $5::integer[], $6::text[],
         $7::text[], $8::bigint[], $9::bytea[])
     ), s AS (
       INSERT INTO streams (id, version, hash) SELECT * FROM unnest($10::text[], $11::integer[], $12::bytea[])
       ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version, hash = EXCLUDED.hash
     )
     UPDATE log_head SET seq = $13, hash = $14 WHERE id = 1`,
    [
      chunk.map((e) => e.row.seq),
      chunk.map((e) => e.row.session_id),
      chunk.map((e) => e.row.version),
      chunk.map((e) => e.row.type),
      chunk.map((e) => e.row.schema_version),
      chunk.map((e) => e.row.data),
      chunk.map((e) => e.row.meta),
      chunk.map((e) => e.row.at),
      chunk.map((e) => e.hash),
      touched,
      touched.map((id) => streams.get(id)?.version),
      touched.map((id) => streams.get(id)?.hash),
      last.row.seq,
      last.hash,
    ],
  )
}

async function copyBlobs(client: pg.ClientBase, db: EventStore['db']): Promise<number> {
  let count = 0
  let batch: { hash: string; content: string }[] = []
  const send = async () => {
    await client.query('INSERT INTO blobs (hash, content) SELECT * FROM unnest($1::text[], $2::text[])', [
      batch.map((b) => b.hash),
      batch.map((b) => b.content),
    ])
    count += batch.length
    batch = []
  }
  for (const blob of db.prepare('SELECT hash, content FROM blobs ORDER BY hash').iterate() as IterableIterator<{
    hash: string
    content: string
  }>) {
    batch.push(blob)
    if (batch.length === 200) await send()
  }
  if (batch.length > 0) await send()
  return count
}
