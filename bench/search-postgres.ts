import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { PG_TYPES } from '../src/events/postgres/log.js'
import { openStore } from '../src/projections/open.js'
import { copyToPostgres } from '../src/projections/postgres/copy.js'
import { queryPostgresIndex } from '../src/projections/search/postgres-query.js'
import { rebuildPostgresIndex } from '../src/projections/search/postgres-upkeep.js'
import { benchPostgres } from './postgres.js'
import { buildStore, querySets, timeQueries } from './search.js'

/**
 * `npm run bench -- search --store postgres [events] [sessions]` — search
 * on PostgreSQL's index (docs/SEARCH.md "Measured"): the same store as the
 * SQLite suite builds (bench/search.ts: the same seeded workload, so the same
 * text and the same queries), copied into a new database by `chronicle store
 * copy`'s code; the index built there as `chronicle rebuild` builds it
 * (events/s by the wall clock, with the CPU the database and this process
 * spent); its size per event by relation; then the four query sets timed
 * through the engine (src/projections/search/postgres-query.ts, snippets
 * made), a page of 20 newest first. Targets (#36): p50 ≤ 10 ms, p99 ≤ 50 ms;
 * build ≥ 50,000 events/s.
 */
export async function searchPostgres(args: string[]): Promise<object> {
  const numbers = args.filter((a) => /^\d+$/.test(a)).map(Number)
  const events = numbers[0] ?? 1_000_000
  const sessions = numbers[1] ?? 2_000
  const server = await benchPostgres()
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-bench-search-pg-'))
  try {
    const source = join(dir, 'chronicle.db')
    const built = buildStore(source, events, sessions)
    console.error(`store: ${built.events} events in ${Math.round(built.ms / 1000)} s`)
    const url = await server.database()
    const store = openStore(source)
    const copied = await copyToPostgres(store, url)
    store.close()
    console.error(`copied into PostgreSQL in ${Math.round(copied.ms / 1000)} s`)
    const serverCpu0 = server.cpuMs()
    const cpu0 = process.cpuUsage()
    const rebuild = await rebuildPostgresIndex(url)
    const used = process.cpuUsage(cpu0)
    // the rebuild's connections have ended: their backends' CPU is counted once the server has reaped them
    await new Promise((resolve) => setTimeout(resolve, 500))
    const serverCpu = serverCpu0 === undefined ? undefined : (server.cpuMs() ?? serverCpu0) - serverCpu0
    console.error(`index: ${rebuild.documents} documents in ${Math.round(rebuild.ms)} ms`)
    const db = new pg.Client({ connectionString: url, types: PG_TYPES })
    await db.connect()
    try {
      await db.query('VACUUM ANALYZE search_docs') // as autovacuum leaves a table that stopped changing
      const { rows: sizes } = await db.query<{ name: string; bytes: number }>(
        `SELECT c.relname AS name, pg_relation_size(c.oid)::int8 AS bytes FROM pg_class c
         WHERE c.relname LIKE 'search_%'
            OR c.oid IN (SELECT reltoastrelid FROM pg_class WHERE relname LIKE 'search_%')
            OR c.oid IN (SELECT i.indexrelid FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
                         WHERE t.relname LIKE 'search_%' OR t.oid IN (SELECT reltoastrelid FROM pg_class WHERE relname LIKE 'search_%'))
         ORDER BY bytes DESC`,
      )
      const indexBytes = sizes.reduce((n, r) => n + r.bytes, 0)
      const texts = (
        await db.query<{ text: string }>("SELECT text FROM search_docs WHERE kind = 'text' AND id % 97 = 0 LIMIT 400")
      ).rows.map((r) => r.text)
      const queries: Record<string, Record<string, number>> = {}
      for (const set of querySets(texts, sessions))
        queries[set.name] = await timeQueries((query) => queryPostgresIndex(db, query, { limit: 20 }), set)
      console.error(`queries: ${JSON.stringify(queries)}`)
      const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d
      const cpuMs = (used.user + used.system) / 1000
      return {
        store: 'postgres',
        events: built.events,
        sessions,
        copyMs: Math.round(copied.ms),
        build: {
          documents: rebuild.documents,
          ms: Math.round(rebuild.ms),
          analyzeMs: Math.round(rebuild.optimizeMs),
          eventsPerSecond: Math.round(built.events / (rebuild.ms / 1000)),
          processCpuMs: Math.round(cpuMs),
          ...(serverCpu !== undefined && {
            postgresCpuMs: Math.round(serverCpu),
            eventsPerCpuSecond: Math.round(built.events / ((cpuMs + serverCpu) / 1000)),
          }),
          target: 50_000,
        },
        indexBytes,
        indexBytesPerEvent: round(indexBytes / built.events),
        indexBytesPerEventByRelation: Object.fromEntries(sizes.map((r) => [r.name, round(r.bytes / built.events)])),
        queriesMs: queries,
        queryTargets: { p50: 10, p99: 50 },
      }
    } finally {
      await db.end()
    }
  } finally {
    await server.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}
