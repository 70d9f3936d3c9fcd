import Database from 'better-sqlite3'
import { coalesced, type IndexOp, MAX_DOC_CHARS, type SearchDoc } from './documents.js'
import { packMarks, unpackMarks } from './marks.js'

/**
 * SQLite's search index: a file of its own beside the store's
 * (`<dataDir>/search.db`), derived from the log and disposable — deleting it
 * only means it is built again. FTS5 over each document's text and file
 * paths, with the `unicode61` tokenizer (words of letters and digits;
 * punctuation is matched as typed by the query: src/projections/search/
 * sqlite-query.ts), over an external-content table that keeps each
 * document's fields. Its position — the last seq of the log it has read —
 * is stored in the same transaction as the documents, with the hash of that
 * event, so an index that belongs to another log (a restored backup) is
 * seen and built again.
 */

/** The index's file in the data directory. */
export const SEARCH_FILE = 'search.db'

/** Bump to have every existing index built again (a change to what is indexed or how). */
export const INDEX_FORMAT = 2

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS index_meta (key TEXT PRIMARY KEY, value ANY) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    up INTEGER,
    archived INTEGER NOT NULL DEFAULT 0
  );
  CREATE INDEX IF NOT EXISTS sessions_up ON sessions (up) WHERE up IS NOT NULL;
  CREATE TABLE IF NOT EXISTS docs (
    id INTEGER PRIMARY KEY,
    session INTEGER NOT NULL,
    key TEXT NOT NULL,
    kind TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    at INTEGER NOT NULL,
    by TEXT NOT NULL,
    by_id TEXT,
    tool TEXT,
    files TEXT NOT NULL,
    marks BLOB NOT NULL,
    text TEXT NOT NULL
  );
  CREATE UNIQUE INDEX IF NOT EXISTS docs_key ON docs (session, key);
  CREATE INDEX IF NOT EXISTS docs_kind ON docs (kind);
  CREATE INDEX IF NOT EXISTS docs_tool ON docs (tool) WHERE tool IS NOT NULL;
  CREATE INDEX IF NOT EXISTS docs_by ON docs (by COLLATE NOCASE);
  CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(
    text, files, content = 'docs', content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 2', prefix = '3'
  );
  CREATE TRIGGER IF NOT EXISTS docs_added AFTER INSERT ON docs BEGIN
    INSERT INTO docs_fts (rowid, text, files) VALUES (new.id, new.text, new.files);
  END;
  CREATE TRIGGER IF NOT EXISTS docs_removed AFTER DELETE ON docs BEGIN
    INSERT INTO docs_fts (docs_fts, rowid, text, files) VALUES ('delete', old.id, old.text, old.files);
  END;
  CREATE TRIGGER IF NOT EXISTS docs_changed AFTER UPDATE OF text, files ON docs BEGIN
    INSERT INTO docs_fts (docs_fts, rowid, text, files) VALUES ('delete', old.id, old.text, old.files);
    INSERT INTO docs_fts (rowid, text, files) VALUES (new.id, new.text, new.files);
  END;
`

const DROP = `
  DROP TABLE IF EXISTS docs_fts; DROP TABLE IF EXISTS docs; DROP TABLE IF EXISTS sessions; DROP TABLE IF EXISTS index_meta;
`

export interface IndexPosition {
  /** the last seq read (0: nothing yet) */
  readonly seq: number
  /** the hash of the log's event at `seq`, hex ('' when it has none) */
  readonly hash: string
  /** where to read again from after a restart to have the parts still streaming (none open: undefined) */
  readonly replayFrom: number | undefined
}

/** Opens (creating it) the index file; an index of another format is emptied, to be built again. */
export function openIndexFile(path: string): Database.Database {
  const db = new Database(path)
  db.pragma('busy_timeout = 5000')
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = NORMAL') // disposable: a lost tail is read from the log again
  db.exec(SCHEMA)
  const format = db.prepare("SELECT value FROM index_meta WHERE key = 'format'").pluck().get()
  if (format !== INDEX_FORMAT) {
    db.exec(DROP)
    db.exec(SCHEMA)
    db.prepare("INSERT INTO index_meta (key, value) VALUES ('format', ?)").run(INDEX_FORMAT)
  }
  return db
}

/** Empties the index (kept open: a reader's connection stays valid), to be built again from seq 0. */
export function clearIndex(db: Database.Database): void {
  db.transaction(() => {
    db.exec(DROP)
    db.exec(SCHEMA)
    db.prepare("INSERT INTO index_meta (key, value) VALUES ('format', ?)").run(INDEX_FORMAT)
  })()
}

export function readPosition(db: Database.Database): IndexPosition {
  const rows = new Map(
    (db.prepare('SELECT key, value FROM index_meta').all() as { key: string; value: unknown }[]).map((r) => [
      r.key,
      r.value,
    ]),
  )
  const replay = rows.get('replayFrom')
  return {
    seq: Number(rows.get('position') ?? 0),
    hash: String(rows.get('positionHash') ?? ''),
    replayFrom: replay === undefined || replay === null ? undefined : Number(replay),
  }
}

interface DocRow {
  id: number
  text: string
  marks: Buffer
}

/** Applies the changes of a run of events and records the position reached, in one transaction. */
export function indexWriter(db: Database.Database): (ops: readonly IndexOp[], position: IndexPosition) => void {
  const s = {
    sessionId: db.prepare('SELECT id FROM sessions WHERE session_id = ?').pluck(),
    sessionTitle: db.prepare('SELECT title FROM sessions WHERE id = ?').pluck(),
    addSession: db.prepare(
      'INSERT INTO sessions (session_id, title, up) VALUES (?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET title = excluded.title, up = excluded.up RETURNING id',
    ),
    title: db.prepare('UPDATE sessions SET title = ? WHERE id = ?'),
    archived: db.prepare('UPDATE sessions SET archived = ? WHERE id = ?'),
    put: db.prepare(`
      INSERT INTO docs (session, key, kind, seq, event, at, by, by_id, tool, files, marks, text)
        VALUES (@session, @key, @kind, @seq, @event, @at, @by, @byId, @tool, @files, @marks, @text)
      ON CONFLICT (session, key) DO UPDATE SET kind = excluded.kind, seq = excluded.seq, event = excluded.event,
        at = excluded.at, by = excluded.by, by_id = excluded.by_id, tool = excluded.tool, files = excluded.files,
        marks = excluded.marks, text = excluded.text`),
    doc: db.prepare('SELECT id, text, marks FROM docs WHERE session = ? AND key = ?'),
    extend: db.prepare(
      'UPDATE docs SET text = ?, marks = ?, seq = ?, event = ?, at = ?, by = coalesce(?, by), by_id = coalesce(?, by_id) WHERE id = ?',
    ),
    meta: db.prepare(
      'INSERT INTO index_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
    ),
  }
  const sessionOf = (sessionId: string): number =>
    (s.sessionId.get(sessionId) as number | undefined) ??
    ((s.addSession.get(sessionId, '', null) as { id: number }).id as number)
  const apply = (op: IndexOp): void => {
    switch (op.op) {
      case 'session': {
        const up = op.forkedFrom ?? op.parent
        const upId = up === undefined ? null : sessionOf(up)
        const title =
          op.title ??
          (op.forkedFrom !== undefined && upId !== null
            ? `${(s.sessionTitle.get(upId) as string) || 'New session'} (fork)`
            : 'New session')
        s.addSession.get(op.session, title, upId)
        return
      }
      case 'archived':
        s.archived.run(op.archived ? 1 : 0, sessionOf(op.session))
        return
      case 'put': {
        const session = sessionOf(op.doc.session)
        if (op.doc.kind === 'title') s.title.run(op.doc.text, session)
        s.put.run(docRow(session, op.doc))
        return
      }
      case 'extend': {
        const row = s.doc.get(sessionOf(op.session), op.key) as DocRow | undefined
        if (!row) return
        const joined = `${row.text}\n${op.text}`
        const text = joined.length > MAX_DOC_CHARS ? joined.slice(0, MAX_DOC_CHARS) : joined
        const marks = unpackMarks(row.marks)
        if (row.text.length + 1 < MAX_DOC_CHARS) marks.push(op.seq, row.text.length + 1)
        s.extend.run(
          text,
          packMarks(marks),
          op.seq,
          op.event,
          Date.parse(op.at),
          op.by ?? null,
          op.byId ?? null,
          row.id,
        )
        return
      }
    }
  }
  return db.transaction((ops: readonly IndexOp[], position: IndexPosition) => {
    for (const op of coalesced(ops)) apply(op)
    s.meta.run('position', position.seq)
    s.meta.run('positionHash', position.hash)
    s.meta.run('replayFrom', position.replayFrom ?? null)
  })
}

function docRow(session: number, doc: SearchDoc) {
  return {
    session,
    key: doc.key,
    kind: doc.kind,
    seq: doc.seq,
    event: doc.event,
    at: Date.parse(doc.at),
    by: doc.by,
    byId: doc.byId ?? null,
    tool: doc.tool ?? null,
    files: doc.files.join('\n'),
    marks: packMarks(doc.marks),
    text: doc.text,
  }
}
