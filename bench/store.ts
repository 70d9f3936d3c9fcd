import Database from 'better-sqlite3'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { ChronicleEvent } from '../src/events/catalogue.js'
import type { EventMeta } from '../src/events/envelope.js'
import { migrate } from '../src/events/schema.js'
import type { AppendOptions, Durability } from '../src/events/store.js'
import type { StoredEvent } from '../src/events/envelope.js'
import { openPostgresStore } from '../src/projections/postgres/open.js'
import { rebuildPostgres } from '../src/projections/postgres/rebuild.js'
import { startPostgres } from '../test/support/postgres.js'
import { foldSession } from '../src/projections/fold/fold.js'
import { openStore } from '../src/projections/open.js'
import { createSqliteSearch } from '../src/projections/search/sqlite-search.js'
import { rebuild } from '../src/projections/upkeep/rebuild.js'

/**
 * `npm run bench -- store [--runs 5] [--producers 50] [--parts 4] [--deltas 200] [--per-tick 2] [--sweep] [--search] [--store postgres]`
 *
 * Streaming load: `producers` sessions stream text concurrently, each through
 * `parts` text parts of `deltas` deltas of ~60 bytes, via the real batching
 * appender with the inline projection. Each producer enqueues `per-tick`
 * deltas and then awaits the last one (a provider chunk carrying a few
 * deltas), so one tick commits about producers × per-tick events.
 * The raw baseline inserts the very same rows with plain better-sqlite3 into
 * an identical event_log table (same migrations; the rows as stored, ids
 * already interned and hashes already computed), 100 per transaction, no projection. Every figure is the median over `runs` fresh databases.
 * `--search`: the search index's worker thread (src/projections/search/sqlite-search.ts) runs beside the
 * appends, told of each commit, as in a server: the append figures then include what it takes of the CPU.
 */

interface Config {
  /** the search index's worker indexing the store as it is appended to (docs/SEARCH.md), as a server runs it */
  search: boolean
  runs: number
  producers: number
  parts: number
  deltas: number
  perTick: number
}

/** An event_log row as stored (session, type and meta interned as integers, schema migration 5). */
interface Row {
  stream: number
  version: number
  type: number
  data: string
  meta: number
  part: number | null
  /** its chain hash, as stored: the baseline writes the same bytes without computing them */
  hash: Buffer | null
}

const DELTA = 'the quick brown fox jumps over the lazy dog; stream chunk #' // 60 bytes with the counter

export default async function (args: string[]): Promise<object> {
  const cfg: Config = {
    search: args.includes('--search'),
    runs: flag(args, '--runs', 5),
    producers: flag(args, '--producers', 50),
    parts: flag(args, '--parts', 4),
    deltas: flag(args, '--deltas', 200),
    perTick: flag(args, '--per-tick', 2),
  }
  if (option(args, '--store') === 'postgres') return postgres(cfg)
  const results: Record<string, number>[] = []
  for (let i = 0; i < cfg.runs; i++) results.push(await runOnce(cfg))
  const keys = Object.keys(results[0] ?? {})
  const median = Object.fromEntries(keys.map((k) => [k, round(medianOf(results.map((r) => r[k] as number)))]))
  // --sweep: how the ratio moves with the number of deltas each part gets per flush.
  const sweep: Record<string, { appendRatio: number; appendRatioCpu: number }> = {}
  if (args.includes('--sweep')) {
    for (const perTick of [1, 2, 4, 8]) {
      const runs: Record<string, number>[] = []
      for (let i = 0; i < cfg.runs; i++) runs.push(await runOnce({ ...cfg, perTick }))
      sweep[`perTick${perTick}`] = {
        appendRatio: round(medianOf(runs.map((r) => r.appendRatio as number))),
        appendRatioCpu: round(medianOf(runs.map((r) => r.appendRatioCpu as number))),
      }
    }
  }
  return {
    ...median,
    ...(args.includes('--sweep') && { sweep }),
    config: cfg,
    runs: results.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, round(v)]))),
  }
}

async function runOnce(cfg: Config): Promise<Record<string, number>> {
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-bench-'))
  try {
    const store = openStore(join(dir, 'store.db'))
    const search = cfg.search
      ? createSqliteSearch({ store, source: join(dir, 'store.db'), path: join(dir, 'search.db'), startAfterMs: 0 })
      : undefined
    const sessions = await producerSessions(store, cfg)
    // started and caught up before the clock starts, as a server's is (its thread's start is not the appends')
    if (search && !(await search.caughtUp(store.head(), 60_000))) throw new Error('the search worker did not start')
    let deltas = 0
    const commits: number[] = []
    const off = store.onCommit((events) => commits.push(events.length))
    const started = performance.now()
    const cpu0 = process.cpuUsage()
    await Promise.all(sessions.map((id) => produce(store, id, cfg, PRODUCER_META).then((n) => (deltas += n))))
    const appendMs = performance.now() - started
    const appendCpuMs = cpuTime(cpu0)
    off()
    // the index caught up with what was appended (its work, on its own thread, was meanwhile), then stopped
    const indexed = search ? await search.caughtUp(store.head(), 120_000) : undefined
    await search?.close()
    if (indexed === false) throw new Error('the search index did not catch up within 2 minutes')
    const appended = commits.reduce((a, b) => a + b, 0)

    const rows = store.asCommitted
      .reader()
      .prepare('SELECT stream, version, type, data, meta, part, hash FROM event_log ORDER BY seq')
      .all() as Row[]
    const raw = rawInsert(join(dir, 'raw.db'), rows)

    const total = store.head()
    const rebuildMs = rebuild(store).ms

    let t = performance.now()
    let read = 0
    for (const _ of store.iterateAll(0)) read++
    const readMs = performance.now() - t

    t = performance.now()
    let folded = 0
    for (const id of sessions) folded += foldSession(store, id).session?.version ?? 0
    const foldMs = performance.now() - t

    store.asCommitted.reader().pragma('wal_checkpoint(TRUNCATE)')
    const bytes = statSync(join(dir, 'store.db')).size
    store.close()

    const appendEventsPerSec = (appended / appendMs) * 1000
    const rawInsertEventsPerSec = (rows.length / raw.ms) * 1000
    const perSec = (n: number, ms: number) => (n / ms) * 1000
    return {
      appendEventsPerSec,
      rawInsertEventsPerSec,
      appendRatio: appendEventsPerSec / rawInsertEventsPerSec,
      rebuildEventsPerSec: (total / rebuildMs) * 1000,
      readEventsPerSec: (read / readMs) * 1000,
      foldEventsPerSec: (folded / foldMs) * 1000,
      bytesPerEvent: bytes / total,
      // The same two phases by CPU time of this process: steadier on a shared machine.
      appendCpuEventsPerSec: perSec(appended, appendCpuMs),
      rawInsertCpuEventsPerSec: perSec(rows.length, raw.cpuMs),
      appendRatioCpu: perSec(appended, appendCpuMs) / perSec(rows.length, raw.cpuMs),
      events: total,
      deltas,
      meanEventsPerCommit: appended / commits.length,
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** What a producer appends through: SQLite's store, or either engine's log (src/events/log.ts). */
interface Appender {
  enqueue(sessionId: string, events: readonly ChronicleEvent[], options: AppendOptions): Promise<StoredEvent[]>
}

/** What creates the producers' sessions: an append, synchronous (SQLite's store) or not (a log). */
interface Creator {
  append(sessionId: string, events: ChronicleEvent[], options: AppendOptions): unknown
}

const PRODUCER_META: EventMeta = { actor: 'model', run: 'run_bench' }

/** The producers' sessions, each created with its run started: their ids. */
async function producerSessions(store: Creator, cfg: Config): Promise<string[]> {
  const sessions = Array.from({ length: cfg.producers }, (_, p) => `ses_bench${String(p).padStart(4, '0')}`)
  for (const id of sessions)
    await store.append(
      id,
      [
        { type: 'session.created', data: { directory: '/tmp/bench', agent: 'build', model: 'scripted:bench' } },
        { type: 'run.started', data: { runId: 'run_bench', reason: 'input' } },
      ],
      { meta: { actor: 'runtime' } },
    )
  return sessions
}

/** One producer: `parts` text parts in one assistant message, streamed delta by delta. */
async function produce(
  store: Appender,
  sessionId: string,
  cfg: Config,
  meta: EventMeta,
  durability: Durability = 'normal',
): Promise<number> {
  const messageId = `msg_${sessionId}`
  const options = { meta, durability }
  await store.enqueue(
    sessionId,
    [{ type: 'message.created', data: { messageId, role: 'assistant', agent: 'build', model: 'scripted:bench' } }],
    options,
  )
  let n = 0
  for (let p = 0; p < cfg.parts; p++) {
    const partId = `prt_${sessionId}_${p}`
    await store.enqueue(sessionId, [{ type: 'text.started', data: { messageId, partId } }], options)
    let last: Promise<unknown> = Promise.resolve()
    for (let d = 0; d < cfg.deltas; d++) {
      const event: ChronicleEvent = { type: 'text.delta', data: { partId, text: DELTA + String(d).padStart(4, '0') } }
      last = store.enqueue(sessionId, [event], options)
      n++
      if ((d + 1) % cfg.perTick === 0) await last
    }
    await last
    await store.enqueue(sessionId, [{ type: 'text.ended', data: { partId } }], options)
  }
  return n
}

/**
 * `--store postgres`: the same producers on PostgreSQL's store (the read models projected in each append's
 * transaction, as a server's), a new database a run, on a throwaway server (test/support/postgres.ts) unless
 * CHRONICLE_DATABASE_URL names one; `normal` durability (on PostgreSQL it commits durably as `full` does:
 * src/events/postgres/log.ts) and `full`, and SQLite's store in the same run as the baseline. Events/s counts
 * every event the producers appended. Rebuild: the read models of the durable run's database dropped and
 * projected again (`chronicle rebuild`; not on a database CHRONICLE_DATABASE_URL names, which other runs
 * share), beside SQLite's rebuild of its run.
 */
async function postgres(cfg: Config): Promise<object> {
  const given = process.env.CHRONICLE_DATABASE_URL
  const server = given ? undefined : await startPostgres()
  const runs: Record<string, number>[] = []
  try {
    for (let i = 0; i < cfg.runs; i++) {
      const point: Record<string, number> = {}
      for (const durability of ['normal', 'full'] as const) {
        const url = given ?? (await (server as NonNullable<typeof server>).database())
        const log = await openPostgresStore(url)
        try {
          point[durability === 'full' ? 'durableAppendEventsPerSec' : 'appendEventsPerSec'] = await streamInto(
            log,
            cfg,
            durability,
          )
        } finally {
          await log.close()
        }
        if (durability === 'full' && !given) {
          // the read models of what was just streamed dropped and projected again (chronicle rebuild)
          const { events, ms } = await rebuildPostgres(url)
          point.rebuildEventsPerSec = (events / ms) * 1000
        }
      }
      const dir = mkdtempSync(join(tmpdir(), 'chronicle-bench-'))
      const sqlite = openStore(join(dir, 'store.db'))
      try {
        point.sqliteAppendEventsPerSec = await streamInto(sqlite, cfg, 'normal')
        point.sqliteRebuildEventsPerSec = (sqlite.head() / rebuild(sqlite).ms) * 1000
      } finally {
        sqlite.close()
        rmSync(dir, { recursive: true, force: true })
      }
      point.ratioToSqlite = (point.appendEventsPerSec as number) / point.sqliteAppendEventsPerSec
      if (point.rebuildEventsPerSec !== undefined)
        point.rebuildRatioToSqlite = point.rebuildEventsPerSec / point.sqliteRebuildEventsPerSec
      runs.push(point)
      process.stderr.write(`${JSON.stringify(point)}\n`)
    }
  } finally {
    await server?.stop()
  }
  const keys = Object.keys(runs[0] ?? {})
  const median = Object.fromEntries(keys.map((k) => [k, round(medianOf(runs.map((r) => r[k] as number)))]))
  return {
    store: 'postgres',
    ...median,
    config: cfg,
    runs: runs.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, round(v)]))),
  }
}

/** The producers' sessions created, then all of them streaming at once: events/s over what they appended. */
async function streamInto(store: Appender & Creator, cfg: Config, durability: Durability): Promise<number> {
  const sessions = await producerSessions(store, cfg)
  const started = performance.now()
  const deltas = await Promise.all(sessions.map((id) => produce(store, id, cfg, PRODUCER_META, durability)))
  const ms = performance.now() - started
  const events = deltas.reduce((a, b) => a + b, 0) + sessions.length * (1 + 2 * cfg.parts)
  return (events / ms) * 1000
}

/** The same rows through plain prepared INSERTs, 100 per BEGIN IMMEDIATE transaction. */
function rawInsert(path: string, rows: readonly Row[]): { ms: number; cpuMs: number } {
  const db = new Database(path)
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = NORMAL')
  migrate(db)
  const insert = db.prepare(
    'INSERT INTO event_log (stream, version, type, schema_version, data, meta, at, part, hash) VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?)',
  )
  const batch = db.transaction((slice: readonly Row[]) => {
    const at = Date.now()
    for (const r of slice) insert.run(r.stream, r.version, r.type, r.data, r.meta, at, r.part, r.hash)
  })
  const started = performance.now()
  const cpu0 = process.cpuUsage()
  for (let i = 0; i < rows.length; i += 100) batch.immediate(rows.slice(i, i + 100))
  const ms = performance.now() - started
  const cpuMs = cpuTime(cpu0)
  db.close()
  return { ms, cpuMs }
}

function cpuTime(since: NodeJS.CpuUsage): number {
  const { user, system } = process.cpuUsage(since)
  return (user + system) / 1000
}

function option(args: string[], name: string): string | undefined {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : undefined
}

function flag(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name)
  const value = i >= 0 ? Number(args[i + 1]) : fallback
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`)
  return value
}

function medianOf(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2
}

function round(x: number): number {
  return x >= 100 ? Math.round(x) : Math.round(x * 100) / 100
}
