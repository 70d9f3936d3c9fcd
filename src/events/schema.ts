import type Database from 'better-sqlite3'
import { createHash } from 'node:crypto'
import { deflateRawSync, inflateRawSync } from 'node:zlib'
import { ChronicleError } from './errors.js'

/**
 * Versioned schema migrations. Each runs once, in order, inside one
 * transaction, and is recorded in `schema_migrations`. Never edit a shipped
 * migration: add the next one.
 */
export interface Migration {
  readonly version: number
  readonly name: string
  readonly sql: string
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'event log and read models',
    sql: `
      CREATE TABLE events (
        seq            INTEGER PRIMARY KEY,
        session_id     TEXT    NOT NULL,
        version        INTEGER NOT NULL,
        type           TEXT    NOT NULL,
        schema_version INTEGER NOT NULL,
        data           TEXT    NOT NULL,
        meta           TEXT    NOT NULL,
        at             INTEGER NOT NULL,
        UNIQUE (session_id, version)
      );
      CREATE TRIGGER events_no_update BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'events are immutable: UPDATE is not allowed'); END;
      CREATE TRIGGER events_no_delete BEFORE DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'events are immutable: DELETE is not allowed'); END;

      CREATE TABLE sessions (
        id         TEXT PRIMARY KEY,
        parent_id  TEXT,
        archived   INTEGER NOT NULL DEFAULT 0,
        updated_at TEXT NOT NULL,
        data       TEXT NOT NULL
      );
      CREATE INDEX sessions_by_update ON sessions (archived, updated_at DESC, id DESC);

      CREATE TABLE messages (
        session_id TEXT NOT NULL,
        id         TEXT NOT NULL,
        data       TEXT NOT NULL,
        PRIMARY KEY (session_id, id)
      ) WITHOUT ROWID;

      CREATE TABLE parts (
        session_id TEXT NOT NULL,
        id         TEXT NOT NULL,
        message_id TEXT NOT NULL,
        data       TEXT NOT NULL,
        PRIMARY KEY (session_id, id)
      ) WITHOUT ROWID;
    `,
  },
  {
    version: 2,
    name: 'snapshot cache for time travel',
    // A derived cache, never the source of truth: each row is the entities a
    // session's events changed between base_version and version (see
    // src/projections/time-travel/snapshots.ts). Deleting every row changes no answer.
    sql: `
      CREATE TABLE snapshots (
        session_id   TEXT    NOT NULL,
        version      INTEGER NOT NULL,
        seq          INTEGER NOT NULL,
        base_version INTEGER NOT NULL,
        format       TEXT    NOT NULL,
        data         TEXT    NOT NULL,
        PRIMARY KEY (session_id, version)
      );
    `,
  },
  {
    version: 3,
    name: 'streamed part text in slices',
    // A streaming part's text grows one delta at a time; rewriting the whole
    // text on every flush made a delta cost grow with its part. The text now
    // lives in slices of about 1 KiB (src/projections/rows/part-rows.ts): a flush
    // rewrites the last slice and adds new ones. A rowid table, so a slice
    // stays on its page instead of overflowing. Existing text moves into
    // slice 0 (slices may have any length; readers concatenate them by n).
    sql: `
      CREATE TABLE part_text (
        session_id TEXT    NOT NULL,
        part_id    TEXT    NOT NULL,
        n          INTEGER NOT NULL,
        start      INTEGER NOT NULL,
        text       TEXT    NOT NULL,
        UNIQUE (session_id, part_id, n)
      );
      INSERT INTO part_text (session_id, part_id, n, start, text)
        SELECT session_id, id, 0, 0, COALESCE(data ->> '$.text', data ->> '$.rawInput') FROM parts
        WHERE data ->> '$.type' IN ('text', 'reasoning', 'tool') AND COALESCE(data ->> '$.text', data ->> '$.rawInput', '') <> '';
      UPDATE parts SET data = json_set(data, CASE WHEN data ->> '$.type' = 'tool' THEN '$.rawInput' ELSE '$.text' END, '')
        WHERE data ->> '$.type' IN ('text', 'reasoning', 'tool');
    `,
  },
  {
    version: 4,
    name: 'parts and messages as rowid tables',
    // Part rows run to a few KiB (a tool's input and output). In a WITHOUT
    // ROWID b-tree a row that large spills and leaves pages half empty
    // (SQLite advises rowid tables for rows over ~1/20 of a page); a rowid
    // table with a UNIQUE (session_id, id) index packs them, and ON CONFLICT
    // (session_id, id) and the keyed reads keep working unchanged.
    sql: `
      CREATE TABLE parts_rowid (
        session_id TEXT NOT NULL,
        id         TEXT NOT NULL,
        message_id TEXT NOT NULL,
        data       TEXT NOT NULL,
        UNIQUE (session_id, id)
      );
      INSERT INTO parts_rowid (session_id, id, message_id, data) SELECT session_id, id, message_id, data FROM parts ORDER BY session_id, id;
      DROP TABLE parts;
      ALTER TABLE parts_rowid RENAME TO parts;

      CREATE TABLE messages_rowid (
        session_id TEXT NOT NULL,
        id         TEXT NOT NULL,
        data       TEXT NOT NULL,
        UNIQUE (session_id, id)
      );
      INSERT INTO messages_rowid (session_id, id, data) SELECT session_id, id, data FROM messages ORDER BY session_id, id;
      DROP TABLE messages;
      ALTER TABLE messages_rowid RENAME TO messages;
    `,
  },
  {
    version: 5,
    name: 'compact event rows',
    // Most events are small deltas, and their session id, type and meta
    // (repeated on every row and, for the session, in the unique index) cost
    // more than their data. Rows now live in `event_log` with those three
    // interned as small integers; `events` is a view with the old columns, so
    // every query (and StoredEvent) reads as before. Inserting into the view
    // interns through its trigger; the store writes `event_log` directly.
    sql: `
      CREATE TABLE streams (
        id         INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL UNIQUE
      );
      CREATE TABLE event_types (
        id   INTEGER PRIMARY KEY,
        type TEXT NOT NULL UNIQUE
      );
      CREATE TABLE event_metas (
        id   INTEGER PRIMARY KEY,
        meta TEXT NOT NULL UNIQUE
      );
      CREATE TABLE event_log (
        seq            INTEGER PRIMARY KEY,
        stream         INTEGER NOT NULL,
        version        INTEGER NOT NULL,
        type           INTEGER NOT NULL,
        schema_version INTEGER NOT NULL,
        data           TEXT    NOT NULL,
        meta           INTEGER NOT NULL,
        at             INTEGER NOT NULL,
        UNIQUE (stream, version)
      );
      INSERT OR IGNORE INTO streams (session_id) SELECT session_id FROM events ORDER BY seq;
      INSERT OR IGNORE INTO event_types (type) SELECT type FROM events ORDER BY seq;
      INSERT OR IGNORE INTO event_metas (meta) SELECT meta FROM events ORDER BY seq;
      INSERT INTO event_log (seq, stream, version, type, schema_version, data, meta, at)
        SELECT e.seq, s.id, e.version, t.id, e.schema_version, e.data, m.id, e.at FROM events e
        JOIN streams s ON s.session_id = e.session_id JOIN event_types t ON t.type = e.type JOIN event_metas m ON m.meta = e.meta
        ORDER BY e.seq;
      DROP TABLE events;
      CREATE TRIGGER event_log_no_update BEFORE UPDATE ON event_log
        BEGIN SELECT RAISE(ABORT, 'events are immutable: UPDATE is not allowed'); END;
      CREATE TRIGGER event_log_no_delete BEFORE DELETE ON event_log
        BEGIN SELECT RAISE(ABORT, 'events are immutable: DELETE is not allowed'); END;

      CREATE VIEW events (seq, session_id, version, type, schema_version, data, meta, at) AS
        SELECT l.seq, s.session_id, l.version, t.type, l.schema_version, l.data, m.meta, l.at FROM event_log l
        JOIN streams s ON s.id = l.stream JOIN event_types t ON t.id = l.type JOIN event_metas m ON m.id = l.meta;
      CREATE TRIGGER events_insert INSTEAD OF INSERT ON events BEGIN
        INSERT OR IGNORE INTO streams (session_id) VALUES (NEW.session_id);
        INSERT OR IGNORE INTO event_types (type) VALUES (NEW.type);
        INSERT OR IGNORE INTO event_metas (meta) VALUES (NEW.meta);
        INSERT INTO event_log (seq, stream, version, type, schema_version, data, meta, at) VALUES (NEW.seq,
          (SELECT id FROM streams WHERE session_id = NEW.session_id), NEW.version,
          (SELECT id FROM event_types WHERE type = NEW.type), NEW.schema_version, NEW.data,
          (SELECT id FROM event_metas WHERE meta = NEW.meta), NEW.at);
      END;
      CREATE TRIGGER events_no_update INSTEAD OF UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'events are immutable: UPDATE is not allowed'); END;
      CREATE TRIGGER events_no_delete INSTEAD OF DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'events are immutable: DELETE is not allowed'); END;
    `,
  },
  {
    version: 6,
    name: 'part ids interned in event rows',
    // A streamed delta's data is mostly its partId. An event whose data starts
    // with a plain partId stores that id as an integer (event_parts) and only
    // the rest of its JSON; the events view puts the id back, byte for byte.
    sql: `
      CREATE TABLE event_parts (
        id      INTEGER PRIMARY KEY,
        part_id TEXT NOT NULL UNIQUE
      );
      ALTER TABLE event_log ADD COLUMN part INTEGER;
      DROP VIEW events;
      CREATE VIEW events (seq, session_id, version, type, schema_version, data, meta, at) AS
        SELECT l.seq, s.session_id, l.version, t.type, l.schema_version,
          CASE WHEN l.part IS NULL THEN l.data ELSE '{"partId":"' || p.part_id || '"' || l.data END, m.meta, l.at
        FROM event_log l
        JOIN streams s ON s.id = l.stream JOIN event_types t ON t.id = l.type JOIN event_metas m ON m.id = l.meta
        LEFT JOIN event_parts p ON p.id = l.part;
      CREATE TRIGGER events_insert INSTEAD OF INSERT ON events BEGIN
        INSERT OR IGNORE INTO streams (session_id) VALUES (NEW.session_id);
        INSERT OR IGNORE INTO event_types (type) VALUES (NEW.type);
        INSERT OR IGNORE INTO event_metas (meta) VALUES (NEW.meta);
        INSERT INTO event_log (seq, stream, version, type, schema_version, data, meta, at) VALUES (NEW.seq,
          (SELECT id FROM streams WHERE session_id = NEW.session_id), NEW.version,
          (SELECT id FROM event_types WHERE type = NEW.type), NEW.schema_version, NEW.data,
          (SELECT id FROM event_metas WHERE meta = NEW.meta), NEW.at);
      END;
      CREATE TRIGGER events_no_update INSTEAD OF UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'events are immutable: UPDATE is not allowed'); END;
      CREATE TRIGGER events_no_delete INSTEAD OF DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'events are immutable: DELETE is not allowed'); END;
    `,
  },
  {
    version: 7,
    name: 'large event data deflated',
    // A tool's output or input is most of a turn's log bytes. Data from
    // DEFLATE_FROM characters is stored deflated (a BLOB: the storage class
    // tells the two apart); the view inflates it through chronicle_inflate,
    // which registerFunctions defines on every connection migrate() opens, so
    // every reader (json_extract included) still sees the JSON byte for byte.
    sql: `
      DROP VIEW events;
      CREATE VIEW events (seq, session_id, version, type, schema_version, data, meta, at) AS
        SELECT l.seq, s.session_id, l.version, t.type, l.schema_version,
          CASE WHEN l.part IS NULL THEN
            CASE WHEN typeof(l.data) = 'blob' THEN chronicle_inflate(l.data) ELSE l.data END
          ELSE '{"partId":"' || p.part_id || '"' ||
            CASE WHEN typeof(l.data) = 'blob' THEN chronicle_inflate(l.data) ELSE l.data END
          END, m.meta, l.at
        FROM event_log l
        JOIN streams s ON s.id = l.stream JOIN event_types t ON t.id = l.type JOIN event_metas m ON m.id = l.meta
        LEFT JOIN event_parts p ON p.id = l.part;
      CREATE TRIGGER events_insert INSTEAD OF INSERT ON events BEGIN
        INSERT OR IGNORE INTO streams (session_id) VALUES (NEW.session_id);
        INSERT OR IGNORE INTO event_types (type) VALUES (NEW.type);
        INSERT OR IGNORE INTO event_metas (meta) VALUES (NEW.meta);
        INSERT INTO event_log (seq, stream, version, type, schema_version, data, meta, at) VALUES (NEW.seq,
          (SELECT id FROM streams WHERE session_id = NEW.session_id), NEW.version,
          (SELECT id FROM event_types WHERE type = NEW.type), NEW.schema_version, NEW.data,
          (SELECT id FROM event_metas WHERE meta = NEW.meta), NEW.at);
      END;
      CREATE TRIGGER events_no_update INSTEAD OF UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'events are immutable: UPDATE is not allowed'); END;
      CREATE TRIGGER events_no_delete INSTEAD OF DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'events are immutable: DELETE is not allowed'); END;
    `,
  },
  {
    version: 8,
    name: 'event metas looked up by their tail',
    // Nearly every run makes a few metas of its own (its run id, a call id), and
    // the UNIQUE index repeated each whole meta. They are found instead by an
    // index on their last 10 characters (where the run, call or input id ends)
    // and compared whole; the store and the view's trigger add a meta only when
    // that finds none, inside the write transaction.
    sql: `
      DROP VIEW events;
      CREATE TABLE event_metas_v8 (
        id   INTEGER PRIMARY KEY,
        meta TEXT NOT NULL
      );
      INSERT INTO event_metas_v8 (id, meta) SELECT id, meta FROM event_metas ORDER BY id;
      DROP TABLE event_metas;
      ALTER TABLE event_metas_v8 RENAME TO event_metas;
      CREATE INDEX event_metas_by_tail ON event_metas (substr(meta, -10));
      CREATE VIEW events (seq, session_id, version, type, schema_version, data, meta, at) AS
        SELECT l.seq, s.session_id, l.version, t.type, l.schema_version,
          CASE WHEN l.part IS NULL THEN
            CASE WHEN typeof(l.data) = 'blob' THEN chronicle_inflate(l.data) ELSE l.data END
          ELSE '{"partId":"' || p.part_id || '"' ||
            CASE WHEN typeof(l.data) = 'blob' THEN chronicle_inflate(l.data) ELSE l.data END
          END, m.meta, l.at
        FROM event_log l
        JOIN streams s ON s.id = l.stream JOIN event_types t ON t.id = l.type JOIN event_metas m ON m.id = l.meta
        LEFT JOIN event_parts p ON p.id = l.part;
      CREATE TRIGGER events_insert INSTEAD OF INSERT ON events BEGIN
        INSERT OR IGNORE INTO streams (session_id) VALUES (NEW.session_id);
        INSERT OR IGNORE INTO event_types (type) VALUES (NEW.type);
        INSERT INTO event_metas (meta) SELECT NEW.meta
          WHERE NOT EXISTS (SELECT 1 FROM event_metas WHERE substr(meta, -10) = substr(NEW.meta, -10) AND meta = NEW.meta);
        INSERT INTO event_log (seq, stream, version, type, schema_version, data, meta, at) VALUES (NEW.seq,
          (SELECT id FROM streams WHERE session_id = NEW.session_id), NEW.version,
          (SELECT id FROM event_types WHERE type = NEW.type), NEW.schema_version, NEW.data,
          (SELECT id FROM event_metas WHERE substr(meta, -10) = substr(NEW.meta, -10) AND meta = NEW.meta), NEW.at);
      END;
      CREATE TRIGGER events_no_update INSTEAD OF UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'events are immutable: UPDATE is not allowed'); END;
      CREATE TRIGGER events_no_delete INSTEAD OF DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'events are immutable: DELETE is not allowed'); END;
    `,
  },
  {
    version: 9,
    name: 'streaming tails and session heads read from the log',
    // A streamed delta changes only its part's growing string and the
    // session's head (version, lastSeq, updatedAt), and the log already holds
    // both: the head is the stream's last event, and a streaming part is its
    // row (`through`: the session version the row was written at) plus its
    // deltas after that version. So a delta writes nothing but its own event
    // row (src/projections/rows/part-rows.ts, session-rows.ts). Slices go back into
    // their rows; every part still streaming is marked as written now.
    sql: `
      UPDATE parts SET data = json_set(chronicle_inflate(data),
          CASE WHEN chronicle_inflate(data) ->> '$.type' = 'tool' THEN '$.rawInput' ELSE '$.text' END,
          (SELECT group_concat(t.text, '' ORDER BY t.n) FROM part_text t WHERE t.session_id = parts.session_id AND t.part_id = parts.id))
        WHERE EXISTS (SELECT 1 FROM part_text t WHERE t.session_id = parts.session_id AND t.part_id = parts.id);
      DROP TABLE part_text;
      ALTER TABLE parts ADD COLUMN through INTEGER;
      UPDATE parts SET through = (SELECT MAX(l.version) FROM event_log l JOIN streams s ON s.id = l.stream WHERE s.session_id = parts.session_id)
        WHERE (chronicle_inflate(data) ->> '$.type' IN ('text', 'reasoning') AND NOT (chronicle_inflate(data) ->> '$.ended'))
           OR (chronicle_inflate(data) ->> '$.type' = 'tool' AND chronicle_inflate(data) ->> '$.state' = 'pending');
      DROP INDEX sessions_by_update;
      ALTER TABLE sessions DROP COLUMN updated_at;
    `,
  },
  {
    version: 10,
    name: 'lookup tables immutable',
    // A logged event is its event_log row joined to the lookup tables (its
    // session id, type, meta and partId): changing a row there rewrites every
    // event that uses it. They only ever grow, as event_log does.
    sql: ['streams', 'event_types', 'event_metas', 'event_parts']
      .map(
        (table) => `
      CREATE TRIGGER ${table}_no_update BEFORE UPDATE ON ${table}
        BEGIN SELECT RAISE(ABORT, 'events are immutable: UPDATE is not allowed'); END;
      CREATE TRIGGER ${table}_no_delete BEFORE DELETE ON ${table}
        BEGIN SELECT RAISE(ABORT, 'events are immutable: DELETE is not allowed'); END;`,
      )
      .join('\n'),
  },
  {
    version: 11,
    name: 'no insert replaces a logged row',
    // `INSERT OR REPLACE` (and REPLACE INTO) resolves a conflict by deleting the
    // old row, and DELETE triggers do not fire for it unless a connection turns
    // on recursive_triggers: a logged event could be swapped in place. Each
    // table of the log refuses, before the insert, any row whose key it
    // already holds; the view's trigger adds lookup rows only when missing
    // instead of relying on OR IGNORE, which these triggers would now abort.
    sql: `
      CREATE TRIGGER event_log_no_replace BEFORE INSERT ON event_log
        WHEN EXISTS (SELECT 1 FROM event_log WHERE seq = NEW.seq)
          OR EXISTS (SELECT 1 FROM event_log WHERE stream = NEW.stream AND version = NEW.version)
        BEGIN SELECT RAISE(ABORT, 'events are immutable: an insert may not replace a logged event'); END;
      ${[
        ['streams', 'session_id'],
        ['event_types', 'type'],
        ['event_parts', 'part_id'],
        ['event_metas', null],
      ]
        .map(
          ([table, unique]) => `
      CREATE TRIGGER ${table}_no_replace BEFORE INSERT ON ${table}
        WHEN EXISTS (SELECT 1 FROM ${table} WHERE id = NEW.id)${
          unique
            ? `
          OR EXISTS (SELECT 1 FROM ${table} WHERE ${unique} = NEW.${unique})`
            : ''
        }
        BEGIN SELECT RAISE(ABORT, 'events are immutable: an insert may not replace a logged row'); END;`,
        )
        .join('')}
      DROP TRIGGER events_insert;
      CREATE TRIGGER events_insert INSTEAD OF INSERT ON events BEGIN
        INSERT INTO streams (session_id) SELECT NEW.session_id WHERE NOT EXISTS (SELECT 1 FROM streams WHERE session_id = NEW.session_id);
        INSERT INTO event_types (type) SELECT NEW.type WHERE NOT EXISTS (SELECT 1 FROM event_types WHERE type = NEW.type);
        INSERT INTO event_metas (meta) SELECT NEW.meta
          WHERE NOT EXISTS (SELECT 1 FROM event_metas WHERE substr(meta, -10) = substr(NEW.meta, -10) AND meta = NEW.meta);
        INSERT INTO event_log (seq, stream, version, type, schema_version, data, meta, at) VALUES (NEW.seq,
          (SELECT id FROM streams WHERE session_id = NEW.session_id), NEW.version,
          (SELECT id FROM event_types WHERE type = NEW.type), NEW.schema_version, NEW.data,
          (SELECT id FROM event_metas WHERE substr(meta, -10) = substr(NEW.meta, -10) AND meta = NEW.meta), NEW.at);
      END;
    `,
  },
  {
    version: 12,
    name: 'content-addressed blobs',
    // What a model request was compiled from (system prompt, tool schemas),
    // stored once by sha256 and named by step.started (src/events/blobs.ts).
    // A rowid table: a blob runs to tens of KiB.
    sql: `
      CREATE TABLE blobs (
        hash    TEXT NOT NULL UNIQUE,
        content TEXT NOT NULL
      );
      CREATE TRIGGER blobs_no_update BEFORE UPDATE ON blobs
        BEGIN SELECT RAISE(ABORT, 'blobs are immutable: UPDATE is not allowed'); END;
      CREATE TRIGGER blobs_no_delete BEFORE DELETE ON blobs
        BEGIN SELECT RAISE(ABORT, 'blobs are immutable: DELETE is not allowed'); END;
    `,
  },
  {
    version: 13,
    name: 'hash chains',
    // Each event's hash chains it to the previous event of its stream; the
    // log's head is its last seq and that event's hash, written with every
    // commit (src/events/chain.ts). Events logged before this migration have
    // no hash: the chain starts at from_seq.
    sql: `
      ALTER TABLE event_log ADD COLUMN hash BLOB;
      CREATE TABLE log_chain (
        id        INTEGER PRIMARY KEY CHECK (id = 1),
        from_seq  INTEGER NOT NULL,
        head_seq  INTEGER NOT NULL,
        head_hash BLOB
      );
      INSERT INTO log_chain (id, from_seq, head_seq, head_hash)
        SELECT 1, COALESCE(MAX(seq), 0) + 1, COALESCE(MAX(seq), 0), NULL FROM event_log;
      CREATE TRIGGER log_chain_no_delete BEFORE DELETE ON log_chain
        BEGIN SELECT RAISE(ABORT, 'the log chain head is not deleted'); END;
      CREATE TRIGGER log_chain_from_fixed BEFORE UPDATE OF from_seq ON log_chain
        BEGIN SELECT RAISE(ABORT, 'where the chain starts is fixed'); END;
    `,
  },
  {
    version: 14,
    name: 'forks share their parent rows',
    // A fork reads its parent's message and part rows as they were at the
    // fork point instead of holding copies (src/projections/rows/shared-rows.ts):
    // each row records the session version of the event that last changed it
    // (NULL: written before this migration), `inherits` names the rows a fork
    // reads through, and `rewrites` lists each change to an entity that was
    // settled, so a fork at an earlier event knows which rows moved on. A
    // session's rows are all versioned (`versioned`) when it was projected by
    // this code from its first event; a fork of any other copies the rows.
    sql: `
      ALTER TABLE messages ADD COLUMN version INTEGER;
      ALTER TABLE parts ADD COLUMN version INTEGER;
      ALTER TABLE sessions ADD COLUMN versioned INTEGER NOT NULL DEFAULT 0;
      CREATE TABLE inherits (
        session_id   TEXT PRIMARY KEY,
        from_session TEXT NOT NULL,
        upto         INTEGER NOT NULL
      );
      CREATE INDEX inherits_by_parent ON inherits (from_session);
      CREATE TABLE rewrites (
        session_id TEXT NOT NULL,
        version    INTEGER NOT NULL,
        kind       TEXT NOT NULL,
        id         TEXT NOT NULL
      );
      CREATE INDEX rewrites_by_session ON rewrites (session_id, version);
    `,
  },
  {
    version: 15,
    name: 'a completed compaction recorded as applied',
    // Session.compaction.applied (where the model's context starts) came after the stores of schema 1 and
    // early 3 were written (commit 09e78f8): their session rows name a completed compaction without it, so
    // the model would be sent the whole history again. Found by the store fixtures (docs/UPGRADES.md). Their
    // snapshots were folded by that code too; the cache is derived, so theirs are dropped.
    sql: `
      DELETE FROM snapshots WHERE session_id IN (SELECT id FROM sessions
        WHERE data -> '$.compaction' IS NOT NULL AND data -> '$.compaction.applied' IS NULL);
      UPDATE sessions SET data = json_set(data, '$.compaction.applied',
          CASE WHEN data ->> '$.compaction.tailStartMessageId' IS NULL
            THEN json_object('summaryMessageId', data ->> '$.compaction.summaryMessageId')
            ELSE json_object('summaryMessageId', data ->> '$.compaction.summaryMessageId',
                             'tailStartMessageId', data ->> '$.compaction.tailStartMessageId')
          END)
        WHERE data ->> '$.compaction.status' = 'completed' AND data -> '$.compaction.applied' IS NULL;
    `,
  },
  {
    version: 16,
    name: 'event metas looked up by a hash of the whole',
    // Migration 8's index on a meta's last 10 characters assumed they end in a
    // run, call or input id of its own. An input's meta ends in the client's
    // inputId, and clients number inputs per session (in_1, in_2, …): every
    // session's first input shares that ending, each meta differs before it
    // (the request's commandId), and finding one walked all of them, a cost
    // that grew with every session served (measured by the soak's comparison:
    // a turn 25–40% dearer at 3,400 sessions than at 650). The key is the
    // first 48 bits of the meta's SHA-256 (metaKey), so a lookup reads one row
    // whatever the ending.
    sql: `
      DROP TRIGGER event_metas_no_update;
      ALTER TABLE event_metas ADD COLUMN key INTEGER;
      UPDATE event_metas SET key = chronicle_meta_key(meta);
      CREATE TRIGGER event_metas_no_update BEFORE UPDATE ON event_metas
        BEGIN SELECT RAISE(ABORT, 'events are immutable: UPDATE is not allowed'); END;
      DROP INDEX event_metas_by_tail;
      CREATE INDEX event_metas_by_key ON event_metas (key);
      DROP TRIGGER events_insert;
      CREATE TRIGGER events_insert INSTEAD OF INSERT ON events BEGIN
        INSERT INTO streams (session_id) SELECT NEW.session_id WHERE NOT EXISTS (SELECT 1 FROM streams WHERE session_id = NEW.session_id);
        INSERT INTO event_types (type) SELECT NEW.type WHERE NOT EXISTS (SELECT 1 FROM event_types WHERE type = NEW.type);
        INSERT INTO event_metas (meta, key) SELECT NEW.meta, chronicle_meta_key(NEW.meta)
          WHERE NOT EXISTS (SELECT 1 FROM event_metas WHERE key = chronicle_meta_key(NEW.meta) AND meta = NEW.meta);
        INSERT INTO event_log (seq, stream, version, type, schema_version, data, meta, at) VALUES (NEW.seq,
          (SELECT id FROM streams WHERE session_id = NEW.session_id), NEW.version,
          (SELECT id FROM event_types WHERE type = NEW.type), NEW.schema_version, NEW.data,
          (SELECT id FROM event_metas WHERE key = chronicle_meta_key(NEW.meta) AND meta = NEW.meta), NEW.at);
      END;
    `,
  },
]

/** The lookup key of a meta (migration 16): the first 48 bits of its SHA-256, an integer SQLite and JS both hold. */
export function metaKey(meta: string): number {
  return createHash('sha256').update(meta).digest().readUIntBE(0, 6)
}

/** Event data this long or longer is stored deflated when that is smaller (migration 7). */
export const DEFLATE_FROM = 256

/** `json` as event_log stores it: itself, or deflated when long and smaller so. */
export function deflated(json: string): string | Buffer {
  if (json.length < DEFLATE_FROM) return json
  const bytes = Buffer.byteLength(json)
  // A window as large as the data finds every match the default 32 KiB one does, and zlib sets up
  // (zeroes) far less for it: a step.started (~700 bytes) deflated in ~35 µs instead of ~140.
  const packed = deflateRawSync(json, { windowBits: windowFor(bytes) })
  return packed.length < bytes ? packed : json
}

/** The smallest raw-deflate window (2^9 to 2^15 bytes) that holds `bytes`; inflating needs no more than the default. */
export function windowFor(bytes: number): number {
  return Math.min(15, Math.max(9, Math.ceil(Math.log2(bytes))))
}

/** event_log's stored data as JSON again: the inverse of `deflated`. */
export function inflated<T>(data: Buffer | T): string | T {
  return Buffer.isBuffer(data) ? inflateRow(data) : data
}

/**
 * A deflated row as text. zlib's default output chunk, 16 KiB, is allocated outside Node's buffer pool on every
 * call: a view of thousands of small rows (a fork's first turn loads them all) made 16 KiB of garbage for each.
 * A chunk near the output's size (JSON seldom deflates better than 8:1) comes from the pool; a larger output
 * only takes more chunks.
 */
export function inflateRow(data: Buffer): string {
  return inflateRawSync(data, { chunkSize: Math.min(16_384, Math.max(64, data.length * 8)) }).toString()
}

/** How event data that starts with a plain partId begins (migration 6 stores the rest, the id interned). */
export const PART_PREFIX = '{"partId":"'

/** A stored row's data with its leading part id restored: the `events` view's concatenation. */
export function withPartId(partId: string, rest: string): string {
  return `${PART_PREFIX}${partId}"${rest}`
}

/** SQL functions the schema's views call; defined per connection, before any query. */
export function registerFunctions(db: Database.Database): void {
  db.function('chronicle_inflate', { deterministic: true }, (data: unknown) => inflated(data))
  db.function('chronicle_meta_key', { deterministic: true }, (meta: unknown) => metaKey(String(meta)))
}

/**
 * Brings the store up to `migrations`: every pending one, in order, in ONE transaction, so a migration that
 * fails leaves the store exactly as it was (MIGRATION_FAILED names it). A store that has a migration this code
 * does not know was written by a newer Chronicle: refused (STORE_TOO_NEW), never "repaired" (docs/UPGRADES.md).
 */
export function migrate(db: Database.Database, migrations: readonly Migration[] = MIGRATIONS): number {
  registerFunctions(db)
  db.exec(
    'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)',
  )
  const ordered = [...migrations].sort((a, b) => a.version - b.version)
  const known = ordered.at(-1)?.version ?? 0
  const appliedVersions = db.prepare('SELECT version FROM schema_migrations ORDER BY version').pluck()
  const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)')
  // under the write lock: another connection may be migrating the same file
  return db
    .transaction(() => {
      const applied = new Set(appliedVersions.all() as number[])
      const newest = Math.max(0, ...applied)
      if (newest > known) throw tooNew(newest, known)
      let count = 0
      for (const m of ordered) {
        if (applied.has(m.version)) continue
        try {
          db.exec(m.sql)
        } catch (err) {
          throw new ChronicleError(
            'MIGRATION_FAILED',
            `schema migration ${m.version} (${m.name}) failed: ${(err as Error).message}. Nothing was changed: the store is still at schema version ${newest}. Keep the file; \`chronicle verify\` with the previous version checks it, and a backup can be restored (docs/UPGRADES.md)`,
            { version: m.version, from: newest },
          )
        }
        record.run(m.version, m.name, Date.now())
        count++
      }
      return count
    })
    .immediate()
}

function tooNew(newest: number, known: number): ChronicleError {
  return new ChronicleError(
    'STORE_TOO_NEW',
    `this store was written by a newer Chronicle (schema version ${newest}; this one knows up to ${known}): it is left as it is. Run that version (or newer) on it, or restore a backup taken before the upgrade (docs/UPGRADES.md)`,
    { version: newest, known },
  )
}

export function schemaVersion(db: Database.Database): number {
  const row = db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number | null }
  return row.v ?? 0
}
