import pg from 'pg'
import { PG_TYPES } from '../../events/postgres/log.js'
import {
  clearPostgresIndex,
  createPostgresIndexer,
  dumpPostgresIndex,
  ensurePostgresIndex,
  postgresIndexPosition,
} from './postgres-index.js'
import { compare, type IndexRebuildReport, type IndexVerifyReport } from './upkeep.js'

/**
 * `chronicle rebuild` and `verify` for PostgreSQL's search index
 * (docs/SEARCH.md), with the servers stopped: the index emptied and built
 * again from the log; or a fresh one built beside it, in temporary tables
 * of the checking connection, up to the stored one's position, and the two
 * compared document by document — their words and paths included, so a
 * `tsvector` that disagrees with its document's text is a difference.
 */

async function connected<T>(url: string, work: (db: pg.Client) => Promise<T>): Promise<T> {
  const db = new pg.Client({ connectionString: url, types: PG_TYPES })
  await db.connect()
  try {
    return await work(db)
  } finally {
    await db.end()
  }
}

const count = async (db: pg.Client, table: string) =>
  Number((await db.query<{ n: number }>(`SELECT count(*)::int8 AS n FROM ${table}`)).rows[0]?.n)

export function rebuildPostgresIndex(url: string): Promise<IndexRebuildReport> {
  return connected(url, async (db) => {
    const started = performance.now()
    await ensurePostgresIndex(db)
    await clearPostgresIndex(db)
    // the log read ahead on a second connection while this one writes the index
    const events = await connected(url, (reader) => createPostgresIndexer().catchUp(db, undefined, reader))
    if (events === undefined) throw new Error('a server is indexing this database: stop it before a rebuild')
    const analyzing = performance.now()
    await db.query('ANALYZE search_docs, search_sessions') // the planner's statistics for what was just written
    const done = performance.now()
    return { events, documents: await count(db, 'search_docs'), ms: done - started, optimizeMs: done - analyzing }
  })
}

export function verifyPostgresIndex(url: string): Promise<IndexVerifyReport> {
  return connected(url, async (db) => {
    const head = Number((await db.query<{ seq: number }>('SELECT seq FROM log_head WHERE id = 1')).rows[0]?.seq ?? 0)
    const present = (await db.query("SELECT to_regclass('public.search_meta') AS t")).rows[0]?.t !== null
    if (!present) return { present: false, position: 0, head, documents: 0, differences: [] }
    const position = await postgresIndexPosition(db)
    await ensurePostgresIndex(db, 'pg_temp')
    const fresh = await createPostgresIndexer('pg_temp').catchUp(db, position)
    if (fresh !== position) throw new Error(`the fresh index reached seq ${fresh}, not ${position}`)
    const stored = await dumpPostgresIndex(db)
    const built = await dumpPostgresIndex(db, 'pg_temp')
    const differences: string[] = []
    compare('session', stored.sessions, built.sessions, differences)
    compare('document', stored.docs, built.docs, differences)
    return { present: true, position, head, documents: stored.docs.size, differences: differences.slice(0, 100) }
  })
}
