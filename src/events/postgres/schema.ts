import type pg from 'pg'

/**
 * The PostgreSQL event log's schema (src/events/postgres/log.ts), in
 * versioned migrations like SQLite's (src/events/schema.ts): each runs once,
 * in order, in one transaction, recorded in `chronicle_migrations`; several
 * servers starting at once serialise on an advisory lock. Never edit a
 * shipped migration: add the next one.
 *
 * The same concepts as the SQLite log: a global `seq` and a per-stream
 * `version`, each event's data and meta as the JSON text its hash covers,
 * the log's head (its last seq and hash) in one row, and triggers that make
 * events and blobs immutable. `log_head` is also the ordering point: an
 * append takes its row lock to number its events, so the next append numbers
 * its own only after this one commits (commit order = seq order).
 */

export interface PgMigration {
  readonly version: number
  readonly name: string
  readonly sql: string
}

export const PG_MIGRATIONS: readonly PgMigration[] = [
  {
    version: 1,
    name: 'event log',
    sql: `
      CREATE TABLE log_head (
        id   integer PRIMARY KEY CHECK (id = 1),
        seq  bigint  NOT NULL,
        hash bytea
      );
      INSERT INTO log_head (id, seq, hash) VALUES (1, 0, NULL);

      CREATE TABLE streams (
        id      text    PRIMARY KEY,
        version integer NOT NULL,
        hash    bytea
      );

      CREATE TABLE events (
        seq            bigint  PRIMARY KEY,
        session_id     text    NOT NULL,
        version        integer NOT NULL,
        type           text    NOT NULL,
        schema_version integer NOT NULL,
        data           text    NOT NULL,
        meta           text    NOT NULL,
        at             bigint  NOT NULL,
        hash           bytea   NOT NULL,
        UNIQUE (session_id, version)
      );
      CREATE INDEX events_by_session ON events (session_id, seq);

      CREATE FUNCTION chronicle_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION '% rows are immutable: % is not allowed', TG_TABLE_NAME, TG_OP; END $$;
      CREATE TRIGGER events_immutable BEFORE UPDATE OR DELETE ON events
        FOR EACH ROW EXECUTE FUNCTION chronicle_immutable();
      CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
        FOR EACH STATEMENT EXECUTE FUNCTION chronicle_immutable();

      CREATE TABLE blobs (
        hash    text PRIMARY KEY,
        content text NOT NULL
      );
      CREATE TRIGGER blobs_immutable BEFORE UPDATE OR DELETE ON blobs
        FOR EACH ROW EXECUTE FUNCTION chronicle_immutable();
    `,
  },
  {
    version: 2,
    name: 'read models',
    // The Session / Message / Part read models, as SQLite's (schema migrations 1–14): written by the same
    // projection in the append's transaction (src/projections/postgres/). A part's row is its JSON (PostgreSQL
    // compresses large values itself); a streaming part's row is current through `through`, the deltas
    // after it read from the log; `version` is what last changed a row, what forks read it by.
    sql: `
      CREATE TABLE sessions (
        id        text    PRIMARY KEY,
        parent_id text,
        archived  boolean NOT NULL,
        data      text    NOT NULL,
        versioned boolean NOT NULL
      );
      CREATE TABLE messages (
        session_id text    NOT NULL,
        id         text    NOT NULL,
        data       text    NOT NULL,
        version    integer,
        PRIMARY KEY (session_id, id)
      );
      CREATE TABLE parts (
        session_id text    NOT NULL,
        id         text    NOT NULL,
        message_id text    NOT NULL,
        data       text    NOT NULL,
        through    integer,
        version    integer,
        PRIMARY KEY (session_id, id)
      );
      CREATE TABLE inherits (
        session_id   text    PRIMARY KEY,
        from_session text    NOT NULL,
        upto         integer NOT NULL
      );
      CREATE INDEX inherits_by_parent ON inherits (from_session);
      CREATE TABLE rewrites (
        session_id text    NOT NULL,
        version    integer NOT NULL,
        kind       text    NOT NULL,
        id         text    NOT NULL
      );
      CREATE INDEX rewrites_by_session ON rewrites (session_id, version);
    `,
  },
  {
    version: 3,
    name: 'snapshot cache for time travel',
    // A derived cache, never the source of truth (src/projections/time-travel/snapshot-delta.ts): each row is
    // the entities a session's events changed between base_version and version. A row's JSON is in `json`,
    // or deflated in `packed` when large. Deleting every row changes no answer.
    sql: `
      CREATE TABLE snapshots (
        session_id   text    NOT NULL,
        version      integer NOT NULL,
        seq          bigint  NOT NULL,
        base_version integer NOT NULL,
        format       text    NOT NULL,
        json         text,
        packed       bytea,
        PRIMARY KEY (session_id, version)
      );
    `,
  },
  {
    version: 4,
    name: 'cluster',
    // Nodes on one database (docs/CLUSTER.md): each process that joins is a row, its heartbeat in the database's
    // own clock (ms), so machines whose clocks differ agree on who is dead. A session's owner and epoch sit on its
    // stream's row, which every append locks anyway: the fence costs no extra statement (src/events/postgres/fence.ts).
    sql: `
      CREATE TABLE cluster_nodes (
        id           text   PRIMARY KEY,
        name         text   NOT NULL,
        address      text,
        started_at   bigint NOT NULL,
        heartbeat_at bigint NOT NULL,
        stopped_at   bigint
      );
      ALTER TABLE streams ADD COLUMN owner text, ADD COLUMN epoch bigint NOT NULL DEFAULT 0;
      CREATE INDEX streams_by_owner ON streams (owner) WHERE owner IS NOT NULL;
      -- sessions made before the database served a cluster: claimed like a dead node's (none, once claimed)
      CREATE INDEX streams_unowned ON streams (id) WHERE owner IS NULL AND NOT starts_with(id, 'sys_');
    `,
  },
  {
    version: 5,
    name: 'input once',
    // Any node takes any input (docs/CLUSTER.md "Commands at any node"): what a node remembers of a session's
    // inputIds can lag another node's acceptance by a moment, so the database keeps an inputId to one acceptance
    // per session; a second insert fails, and its command is decided again on what the log holds. The id is read
    // from the text, where it is the first key: a cast to json would refuse what JSON.stringify writes for text
    // PostgreSQL's json does not take (\u0000, a lone surrogate), and with it the whole append.
    sql: `
      CREATE UNIQUE INDEX events_input_once ON events (session_id, substring(data FROM '^\\{"inputId":"([^"\\\\]+)"'))
        WHERE type = 'input.accepted';
    `,
  },
  {
    version: 6,
    name: 'workspaces that move',
    // Every object of a recorded workspace tree, so any node can write a session's directory from it
    // (src/events/workspace-objects.ts); each node's host, so a directory only one machine has stays there.
    sql: `
      CREATE TABLE workspace_objects (
        id   text  PRIMARY KEY,
        body bytea NOT NULL
      );
      ALTER TABLE cluster_nodes ADD COLUMN host text;
    `,
  },
  {
    version: 7,
    name: 'session json',
    // The read models' whole-table reads (recovery's, the workspace's, the metrics') look into each session's JSON
    // text. JSON.stringify writes a NUL or a lone surrogate as an escape PostgreSQL's jsonb refuses, and one such
    // title failed the whole read, and with it a node's start. chronicle_json reads a session's text as jsonb with
    // those escapes made U+FFFD first; only the rows that hold one pay for the rewrite.
    sql: `
      CREATE FUNCTION chronicle_json(data text) RETURNS jsonb
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        AS $fn$
          SELECT CASE WHEN data !~ '\\\\u(0000|d[89a-f])' THEN data::jsonb
            ELSE regexp_replace(regexp_replace(regexp_replace(data,
              '\\\\u0000', '\\\\ufffd', 'g'),
              '\\\\ud[89ab][0-9a-f]{2}(?!\\\\ud[c-f][0-9a-f]{2})', '\\\\ufffd', 'g'),
              '(?<!\\\\ud[89ab][0-9a-f]{2})\\\\ud[c-f][0-9a-f]{2}', '\\\\ufffd', 'g')::jsonb
          END
        $fn$;
    `,
  },
]

/** An advisory lock key for migrations: "chronicle" in ASCII, folded into a bigint. */
const MIGRATION_LOCK = 0x6368726f6e69636cn

/** Applies the migrations not yet applied; returns how many ran. */
export async function migratePostgres(
  client: pg.ClientBase,
  migrations: readonly PgMigration[] = PG_MIGRATIONS,
): Promise<number> {
  await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK.toString()])
  try {
    await client.query(
      'CREATE TABLE IF NOT EXISTS chronicle_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)',
    )
    const applied = new Set(
      (await client.query<{ version: number }>('SELECT version FROM chronicle_migrations')).rows.map((r) => r.version),
    )
    let count = 0
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (applied.has(m.version)) continue
      await client.query('BEGIN')
      try {
        await client.query(m.sql)
        await client.query('INSERT INTO chronicle_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [
          m.version,
          m.name,
          Date.now(),
        ])
        await client.query('COMMIT')
      } catch (err) {
        await client.query('ROLLBACK')
        throw err
      }
      count++
    }
    return count
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK.toString()])
  }
}
