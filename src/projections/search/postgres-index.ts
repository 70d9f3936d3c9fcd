import type pg from 'pg'
import { copyWith } from '../../events/copy.js'
import type { EventMeta, StoredEvent } from '../../events/envelope.js'
import type { EventRow } from '../../events/rows.js'
import {
  coalesced,
  INDEXED_TYPES,
  indexEvent,
  type IndexerState,
  type IndexOp,
  initialIndexerState,
  MAX_DOC_CHARS,
  replayFrom,
  type SearchDoc,
} from './documents.js'
import { packMarks, unpackMarks } from './marks.js'

/**
 * PostgreSQL's search index (docs/SEARCH.md "PostgreSQL"): tables in the
 * store's own database, made by the index itself when missing,
 * folded from the log by the same `indexEvent` as SQLite's file, off the
 * append path, a window of seqs per transaction. Each document's words —
 * letters and digits, lower-cased, diacritics folded, as FTS5's `unicode61`
 * cuts them — are a `tsvector` under a GIN index; its file paths another.
 * The position (the last seq read), where to replay the parts still
 * streaming from, and the next ids are one row, locked by the transaction
 * that moves it: indexers on several nodes take turns, and one that finds
 * the position moved by another reads its streaming parts back first.
 *
 * Ids are counted here, not by a sequence (which a rolled-back window
 * would skip), so a document has the same id however often it is built:
 * `verify` compares a fresh build with the stored one id for id.
 */

/** `public`: the index; `pg_temp`: a fresh build, on one connection, that `verify` compares with it. */
type Schema = 'public' | 'pg_temp'

/** Bump to have every existing index built again (a change to what is indexed or how). */
export const PG_INDEX_FORMAT = 5

/**
 * The tables, as `schema` names them: `public` (the index) or `pg_temp` (a fresh build `verify` compares).
 * A document's row stays whole in its page up to 8 KB (toast_tuple_target): a phrase's candidates have
 * their words read to check positions, and a vector compressed out of line cost more to read than the disk
 * it saved (and the build more to compress).
 */
function tablesSql(schema: Schema): string {
  return `
    CREATE TABLE IF NOT EXISTS ${schema}.search_meta (
      id           integer PRIMARY KEY CHECK (id = 1),
      format       integer NOT NULL,
      position     bigint  NOT NULL,
      replay_from  bigint,
      next_doc     bigint  NOT NULL,
      next_session integer NOT NULL
    );
    INSERT INTO ${schema}.search_meta VALUES (1, ${PG_INDEX_FORMAT}, 0, NULL, 1, 1) ON CONFLICT (id) DO NOTHING;
    CREATE TABLE IF NOT EXISTS ${schema}.search_sessions (
      id         integer PRIMARY KEY,
      session_id text    NOT NULL UNIQUE,
      title      text    NOT NULL,
      up         integer,
      archived   boolean NOT NULL DEFAULT false
    );
    CREATE INDEX IF NOT EXISTS search_sessions_up ON ${schema}.search_sessions (up) WHERE up IS NOT NULL;
    CREATE TABLE IF NOT EXISTS ${schema}.search_docs (
      id      bigint   PRIMARY KEY,
      session integer  NOT NULL,
      key     text     NOT NULL,
      kind    text     NOT NULL,
      seq     bigint   NOT NULL,
      event   text     NOT NULL,
      at      bigint   NOT NULL,
      by      text     NOT NULL,
      by_id   text,
      tool    text,
      files   text     NOT NULL,
      marks   bytea    NOT NULL,
      text    text     NOT NULL,
      words   tsvector NOT NULL,
      paths   tsvector NOT NULL,
      UNIQUE (session, key)
    ) WITH (toast_tuple_target = 8160);
    CREATE INDEX IF NOT EXISTS search_docs_words ON ${schema}.search_docs USING gin (words);
    CREATE INDEX IF NOT EXISTS search_docs_paths ON ${schema}.search_docs USING gin (paths);
    CREATE INDEX IF NOT EXISTS search_docs_session ON ${schema}.search_docs (session, id);
    CREATE INDEX IF NOT EXISTS search_docs_kind ON ${schema}.search_docs (kind, id);
    CREATE INDEX IF NOT EXISTS search_docs_tool ON ${schema}.search_docs (tool, id) WHERE tool IS NOT NULL;
    CREATE INDEX IF NOT EXISTS search_docs_by ON ${schema}.search_docs (lower(by), id);
    CREATE INDEX IF NOT EXISTS search_docs_by_id ON ${schema}.search_docs (by_id, id) WHERE by_id IS NOT NULL;
    CREATE INDEX IF NOT EXISTS search_docs_at ON ${schema}.search_docs (at);
  `
}

/** An advisory lock key for creating the index's tables: "csearch!" in ASCII, folded into a bigint. */
const CREATE_LOCK = 0x6373656172636821n

/**
 * Creates the index's tables if they are not there yet (the index is disposable and owns its tables, as
 * SQLite's owns its file), under an advisory lock so nodes starting together do not race.
 */
export async function ensurePostgresIndex(db: pg.ClientBase, schema: Schema = 'public'): Promise<void> {
  await db.query('BEGIN')
  try {
    await db.query('SELECT pg_advisory_xact_lock($1)', [CREATE_LOCK.toString()])
    await db.query(tablesSql(schema))
    await db.query('COMMIT')
  } catch (err) {
    await db.query('ROLLBACK').catch(() => {})
    throw err
  }
}

/** The words of a text as the index keeps them: letters and digits, lower-cased, diacritics folded. */
export function indexWords(text: string): string[] {
  const folded = /[^ -~\s]/.test(text) ? text.normalize('NFKD').replace(/\p{M}+/gu, '') : text
  const words = folded.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []
  // a lexeme is at most 2,047 bytes: a longer word (a hostile output's) is kept by its first 511 characters
  for (let i = 0; i < words.length; i++)
    if ((words[i] as string).length > MAX_WORD) words[i] = words[i]?.slice(0, MAX_WORD) as string
  return words
}

/** Characters of a word the index keeps: 511 of at most 4 bytes fit PostgreSQL's 2,047-byte lexeme. */
const MAX_WORD = 511

/**
 * Text as PostgreSQL's `text` takes it: a NUL (which a tool's output may hold) becomes U+FFFD, one UTF-16
 * unit for one, so a document's marks still point where they did.
 */
export const storable = (text: string) => (text.includes('\u0000') ? text.replaceAll('\u0000', '\ufffd') : text)

/** Positions stop here, and a lexeme keeps at most this many: PostgreSQL's limits (its to_tsvector's too). */
const MAX_POSITION = 16_383
const MAX_POSITIONS = 256

/**
 * A `tsvector` literal of runs of words (a document's text, then each of its paths): each word with its
 * positions, a gap between runs so no phrase spans two. Built here rather than by to_tsvector, whose parser
 * would cut `src/auth.ts` its own way.
 */
export function wordsVector(runs: readonly (readonly string[])[]): string {
  const positions = new Map<string, number[]>()
  let at = 0
  for (const words of runs) {
    for (const word of words) {
      const position = Math.min(++at, MAX_POSITION)
      let list = positions.get(word)
      if (!list) positions.set(word, (list = []))
      if (list.length < MAX_POSITIONS && list.at(-1) !== position) list.push(position)
    }
    at++ // no phrase runs from one into the next
  }
  const out: string[] = []
  for (const [word, list] of positions) out.push(`'${word}':${list.join(',')}`)
  return out.join(' ')
}

interface Meta {
  format: number
  position: number
  replay_from: number | null
  next_doc: number
  next_session: number
}

interface SessionRow {
  id: number
  session_id: string
  title: string
  up: number | null
  archived: boolean
}

interface DocState {
  id: number
  session: number
  doc: SearchDoc
  changed: boolean
}

/** The events the index reads (the types it indexes), after < seq <= through, in seq order. */
async function readEvents(db: pg.ClientBase, after: number, through: number): Promise<StoredEvent[]> {
  const { rows } = await db.query<EventRow>({
    name: 'chronicle_search_events',
    text: `SELECT seq, session_id, version, type, schema_version, data, meta, at FROM events
           WHERE seq > $1 AND seq <= $2 AND type = ANY($3::text[]) ORDER BY seq`,
    values: [after, through, INDEXED_TYPES],
  })
  // parsed, not checked against the catalogue again: the store checked each event before writing it
  return rows.map(
    (row) =>
      ({
        seq: Number(row.seq),
        sessionId: row.session_id,
        version: row.version,
        type: row.type,
        schemaVersion: row.schema_version,
        data: JSON.parse(row.data) as unknown,
        meta: JSON.parse(row.meta) as EventMeta,
        at: new Date(Number(row.at)).toISOString(),
      }) as StoredEvent,
  )
}

/** Seqs read and applied per transaction. */
export const PG_WINDOW = 16_384

export interface PostgresIndexer {
  /**
   * Indexes what the log holds after the stored position, up to its head (or `through`), on `db` (a
   * connection of the indexer's own, outside any transaction); returns the position reached, or undefined
   * when another indexer holds the index (another server's, on the same database). With a `reader` (a
   * second connection: a rebuild's), each next window's events are read and parsed on it while `db` writes
   * the window before, so this process and the database work at once.
   */
  catchUp(db: pg.ClientBase, through?: number, reader?: pg.ClientBase): Promise<number | undefined>
}

/**
 * An indexer over the index `schema` holds. Its fold (the parts still streaming) is its own; when the
 * stored position is not where this indexer left it (a first run, another node's indexer, a cleared
 * index), it is read back from the log first.
 */
export function createPostgresIndexer(schema: Schema = 'public', window = PG_WINDOW): PostgresIndexer {
  let state: IndexerState = initialIndexerState()
  let known = -1
  return {
    async catchUp(db, through = Number.POSITIVE_INFINITY, reader) {
      /** the next window's events, read ahead on `reader`: [after, through] and the read */
      let ahead: { after: number; through: number; events: Promise<StoredEvent[]> } | undefined
      const eventsOf = (after: number, last: number) => {
        const read = ahead?.after === after && ahead.through === last ? ahead.events : readEvents(db, after, last)
        ahead = undefined
        return read
      }
      for (;;) {
        await db.query('BEGIN')
        try {
          const locked = await lockMeta(db, schema)
          if (!locked) {
            await db.query('COMMIT')
            return undefined
          }
          let meta = locked
          if (meta.format !== PG_INDEX_FORMAT) meta = await clear(db, schema)
          if (meta.position !== known) {
            state = initialIndexerState()
            if (meta.replay_from !== null)
              for (let at = meta.replay_from - 1; at < meta.position; at = Math.min(at + window, meta.position))
                for (const e of await readEvents(db, at, Math.min(at + window, meta.position))) indexEvent(state, e)
          }
          const head = Number((await db.query<{ seq: number }>('SELECT seq FROM log_head WHERE id = 1')).rows[0]?.seq)
          const last = Math.min(meta.position + window, head, through)
          if (last <= meta.position) {
            await db.query('COMMIT')
            known = meta.position
            return meta.position
          }
          const ops: IndexOp[] = []
          for (const event of await eventsOf(meta.position, last))
            for (const op of indexEvent(state, event)) ops.push(op)
          const next = Math.min(last + window, head, through)
          if (reader && next > last) {
            const events = readEvents(reader, last, next)
            events.catch(() => {}) // heard when used; a window not used is dropped
            ahead = { after: last, through: next, events }
          }
          await applyOps(db, schema, meta, coalesced(ops))
          const open = replayFrom(state)
          await db.query(
            `UPDATE ${schema}.search_meta SET position = $1, replay_from = $2, next_doc = $3, next_session = $4`,
            [last, open ?? null, meta.next_doc, meta.next_session],
          )
          await db.query('COMMIT')
          known = last
        } catch (err) {
          known = -1 // the fold may have moved past what was stored
          await db.query('ROLLBACK').catch(() => {})
          throw err
        }
      }
    },
  }
}

/** The index's position row, locked for this transaction; undefined when another indexer holds it. */
async function lockMeta(db: pg.ClientBase, schema: Schema): Promise<Meta | undefined> {
  const { rows } = await db.query<Meta>(
    `SELECT format, position, replay_from, next_doc, next_session FROM ${schema}.search_meta WHERE id = 1
     FOR UPDATE SKIP LOCKED`,
  )
  const row = rows[0]
  if (!row) return undefined
  return {
    format: row.format,
    position: Number(row.position),
    replay_from: row.replay_from === null ? null : Number(row.replay_from),
    next_doc: Number(row.next_doc),
    next_session: row.next_session,
  }
}

/** Empties the index (in the caller's transaction), to be built again from seq 0. */
async function clear(db: pg.ClientBase, schema: Schema): Promise<Meta> {
  await db.query(`TRUNCATE ${schema}.search_docs, ${schema}.search_sessions`)
  await db.query(
    `UPDATE ${schema}.search_meta SET format = ${PG_INDEX_FORMAT}, position = 0, replay_from = NULL, next_doc = 1, next_session = 1`,
  )
  return { format: PG_INDEX_FORMAT, position: 0, replay_from: null, next_doc: 1, next_session: 1 }
}

/** Empties the index so the next indexer builds it again (`chronicle rebuild`). */
export async function clearPostgresIndex(db: pg.ClientBase): Promise<void> {
  await db.query('BEGIN')
  try {
    await db.query('SELECT 1 FROM search_meta WHERE id = 1 FOR UPDATE')
    await clear(db, 'public')
    await db.query('COMMIT')
  } catch (err) {
    await db.query('ROLLBACK').catch(() => {})
    throw err
  }
}

/**
 * Applies a window's changes as SQLite's writer does one by one (sqlite-index.ts), in memory over the rows
 * they touch, fetched in two statements; then writes the rows that changed in two more.
 */
async function applyOps(db: pg.ClientBase, schema: Schema, meta: Meta, ops: readonly IndexOp[]): Promise<void> {
  if (ops.length === 0) return
  const sessionIds = new Set<string>()
  const extended: [string, string][] = []
  for (const op of ops) {
    if (op.op === 'session') {
      sessionIds.add(op.session)
      const up = op.forkedFrom ?? op.parent
      if (up !== undefined) sessionIds.add(up)
    } else if (op.op === 'put') sessionIds.add(op.doc.session)
    else {
      sessionIds.add(op.session)
      if (op.op === 'extend') extended.push([op.session, storable(op.key)])
    }
  }
  const sessions = new Map<string, SessionRow & { changed: boolean }>()
  for (const row of (
    await db.query<SessionRow>(
      `SELECT id, session_id, title, up, archived FROM ${schema}.search_sessions WHERE session_id = ANY($1::text[])`,
      [[...sessionIds]],
    )
  ).rows)
    sessions.set(row.session_id, {
      id: row.id,
      session_id: row.session_id,
      title: row.title,
      up: row.up,
      archived: row.archived,
      changed: false,
    })
  const docs = new Map<string, DocState>()
  const docKey = (session: number, key: string) => `${session}\u0000${storable(key)}`
  if (extended.length > 0) {
    const { rows } = await db.query<{
      id: number
      session_id: string
      key: string
      kind: string
      seq: number
      event: string
      at: number
      by: string
      by_id: string | null
      tool: string | null
      files: string
      marks: Buffer
      text: string
      session: number
    }>(
      `SELECT d.id, d.session, s.session_id, d.key, d.kind, d.seq, d.event, d.at, d.by, d.by_id, d.tool, d.files, d.marks, d.text
       FROM unnest($1::text[], $2::text[]) AS k(s, key)
       JOIN ${schema}.search_sessions s ON s.session_id = k.s
       CROSS JOIN LATERAL (SELECT * FROM ${schema}.search_docs WHERE session = s.id AND key = k.key) AS d`,
      [extended.map((k) => k[0]), extended.map((k) => k[1])],
    )
    for (const r of rows)
      docs.set(docKey(r.session, r.key), {
        id: Number(r.id),
        session: r.session,
        changed: false,
        doc: {
          session: r.session_id,
          key: r.key,
          kind: r.kind as SearchDoc['kind'],
          seq: Number(r.seq),
          event: r.event,
          at: new Date(Number(r.at)).toISOString(),
          by: r.by,
          ...(r.by_id !== null && { byId: r.by_id }),
          ...(r.tool !== null && { tool: r.tool }),
          files: r.files === '' ? [] : r.files.split('\n'),
          marks: unpackMarks(r.marks),
          text: r.text,
        },
      })
  }
  const sessionOf = (sessionId: string): SessionRow & { changed: boolean } => {
    let row = sessions.get(sessionId)
    if (!row) {
      row = { id: meta.next_session++, session_id: sessionId, title: '', up: null, archived: false, changed: true }
      sessions.set(sessionId, row)
    }
    return row
  }
  for (const op of ops) {
    switch (op.op) {
      case 'session': {
        const up = op.forkedFrom ?? op.parent
        const upRow = up === undefined ? undefined : sessionOf(up)
        const row = sessionOf(op.session)
        row.title =
          op.title ?? (op.forkedFrom !== undefined && upRow ? `${upRow.title || 'New session'} (fork)` : 'New session')
        row.up = upRow?.id ?? null
        row.changed = true
        break
      }
      case 'archived': {
        const row = sessionOf(op.session)
        row.archived = op.archived
        row.changed = true
        break
      }
      case 'put': {
        const session = sessionOf(op.doc.session)
        if (op.doc.kind === 'title') {
          session.title = op.doc.text
          session.changed = true
        }
        const k = docKey(session.id, op.doc.key)
        const existing = docs.get(k)
        docs.set(k, { id: existing?.id ?? meta.next_doc++, session: session.id, doc: op.doc, changed: true })
        break
      }
      case 'extend': {
        const session = sessionOf(op.session)
        const state = docs.get(docKey(session.id, op.key))
        if (!state) break
        const { doc } = state
        const joined = `${doc.text}\n${op.text}`
        const text = joined.length > MAX_DOC_CHARS ? joined.slice(0, MAX_DOC_CHARS) : joined
        const marks = doc.text.length + 1 < MAX_DOC_CHARS ? [...doc.marks, op.seq, doc.text.length + 1] : doc.marks
        const byId = op.byId ?? doc.byId
        state.doc = copyWith(doc, {
          seq: op.seq,
          event: op.event,
          at: op.at,
          by: op.by ?? doc.by,
          ...(byId !== undefined && { byId }),
          text,
          marks,
        })
        state.changed = true
        break
      }
    }
  }
  const changedSessions = [...sessions.values()].filter((s) => s.changed)
  if (changedSessions.length > 0)
    await db.query(
      `INSERT INTO ${schema}.search_sessions (id, session_id, title, up, archived)
       SELECT * FROM unnest($1::integer[], $2::text[], $3::text[], $4::integer[], $5::boolean[])
       ON CONFLICT (id) DO UPDATE SET title = excluded.title, up = excluded.up, archived = excluded.archived`,
      [
        changedSessions.map((s) => s.id),
        changedSessions.map((s) => s.session_id),
        changedSessions.map((s) => storable(s.title)),
        changedSessions.map((s) => s.up),
        changedSessions.map((s) => s.archived),
      ],
    )
  const changed = [...docs.values()].filter((d) => d.changed)
  for (let i = 0; i < changed.length; i += 2000) await writeDocs(db, schema, changed.slice(i, i + 2000))
}

async function writeDocs(db: pg.ClientBase, schema: Schema, docs: readonly DocState[]): Promise<void> {
  const column = <T>(f: (d: DocState) => T) => docs.map(f)
  await db.query(
    `INSERT INTO ${schema}.search_docs (id, session, key, kind, seq, event, at, by, by_id, tool, files, marks, text, words, paths)
     SELECT id, session, key, kind, seq, event, at, by, by_id, tool, files, marks, text,
            w::tsvector, p::tsvector
     FROM unnest($1::bigint[], $2::integer[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::bigint[], $8::text[],
                 $9::text[], $10::text[], $11::text[], $12::bytea[], $13::text[], $14::text[], $15::text[])
       AS x(id, session, key, kind, seq, event, at, by, by_id, tool, files, marks, text, w, p)
     ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, seq = excluded.seq, event = excluded.event, at = excluded.at,
       by = excluded.by, by_id = excluded.by_id, tool = excluded.tool, files = excluded.files, marks = excluded.marks,
       text = excluded.text, words = excluded.words, paths = excluded.paths`,
    [
      column((d) => d.id),
      column((d) => d.session),
      column((d) => storable(d.doc.key)),
      column((d) => d.doc.kind),
      column((d) => d.doc.seq),
      column((d) => storable(d.doc.event)),
      column((d) => Date.parse(d.doc.at)),
      column((d) => storable(d.doc.by)),
      column((d) => (d.doc.byId === undefined ? null : storable(d.doc.byId))),
      column((d) => (d.doc.tool === undefined ? null : storable(d.doc.tool))),
      column((d) => storable(d.doc.files.join('\n'))),
      column((d) => packMarks(d.doc.marks)),
      column((d) => storable(d.doc.text)),
      // a term found in a document's paths is found in the document, as FTS5's unqualified phrase finds it
      column((d) => wordsVector([indexWords(d.doc.text), ...d.doc.files.map(indexWords)])),
      column((d) => wordsVector(d.doc.files.map(indexWords))),
    ],
  )
}

/** Where the index stands: the last seq it has read. */
export async function postgresIndexPosition(
  db: Pick<pg.ClientBase, 'query'>,
  schema: Schema = 'public',
): Promise<number> {
  const { rows } = await db.query<{ position: number }>(`SELECT position FROM ${schema}.search_meta WHERE id = 1`)
  return Number(rows[0]?.position ?? 0)
}

/** Every session and document of an index as comparable text, keyed as sqlite's dumpIndex keys them. */
export async function dumpPostgresIndex(
  db: Pick<pg.ClientBase, 'query'>,
  schema: Schema = 'public',
): Promise<{ sessions: Map<string, string>; docs: Map<string, string> }> {
  const sessions = new Map<string, string>()
  const s = await db.query({
    text: `SELECT s.session_id, s.title, u.session_id AS up, s.archived::int FROM ${schema}.search_sessions s
           LEFT JOIN ${schema}.search_sessions u ON u.id = s.up ORDER BY s.id`,
    rowMode: 'array',
  })
  for (const row of s.rows as unknown[][]) sessions.set(row[0] as string, JSON.stringify(row.slice(1)))
  const docs = new Map<string, string>()
  const d = await db.query({
    text: `SELECT s.session_id, d.key, d.id, d.kind, d.seq, d.event, d.at, d.by, d.by_id, d.tool, d.files,
             upper(encode(d.marks, 'hex')), d.text, d.words::text, d.paths::text
           FROM ${schema}.search_docs d JOIN ${schema}.search_sessions s ON s.id = d.session ORDER BY d.id`,
    rowMode: 'array',
  })
  for (const row of d.rows as unknown[][]) docs.set(`${row[0]} ${row[1]}`, JSON.stringify(row.slice(2)))
  return { sessions, docs }
}
