import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import type pg from 'pg'
import { fork } from '../src/commands/fork.js'
import { createIdSource } from '../src/events/ids.js'
import { openPostgresStore } from '../src/projections/postgres/open.js'
import { postgresPorts } from '../src/projections/store-ports.js'
import { toChatMessages } from '../src/runtime/loop/chat-messages.js'
import { conversationOn, mean, measure, median, round, turn } from './conversation.js'
import { type BenchPostgres, benchPostgres } from './postgres.js'

/**
 * `npm run bench -- conversation --store postgres [--runs 3] [N…]` (default N: 50 200)
 *
 * bench/CONVERSATION.md's conversation through the real runtime on
 * PostgreSQL's store (a new database a run, on a throwaway server unless
 * CHRONICLE_DATABASE_URL names one), then on SQLite's in the same run (the
 * baseline: conversation.ts's own measure). A turn's CPU on PostgreSQL is
 * this process's plus the database server's (read from /proc, when the bench
 * started it): the work the store does moved out of the process. Bytes per
 * message: what the tables and their indexes (TOAST included) grew by over
 * the turns, divided by the 4N messages — SQLite's is its file. stateAt and
 * fork at the middle turn, with the checks conversation.ts makes. Each
 * figure is the median over `runs`, after a short conversation on each
 * engine that is not measured (the code's first run compiles it).
 */
export async function conversationPostgres(args: string[]): Promise<object> {
  const runsAt = args.indexOf('--runs')
  const runs = runsAt >= 0 ? Number(args[runsAt + 1]) : 3
  const given = args.filter((_, i) => runsAt < 0 || i !== runsAt + 1).filter((a) => /^\d+$/.test(a))
  const ns = given.length > 0 ? given.map(Number) : [50, 200]
  const server = await benchPostgres()
  const results: Record<string, unknown>[] = []
  try {
    // both engines' code compiled before anything is measured: the first conversation would pay for it
    await measurePostgres(10, server)
    await measure(10)
    for (const n of ns) {
      const points: Record<string, number | boolean>[] = []
      for (let r = 0; r < runs; r++) {
        const postgres = await measurePostgres(n, server)
        const sqlite = await measure(n)
        const sqliteCpuPerTurn = (sqlite.totalCpuMs as number) / n
        const point = {
          ...postgres,
          sqliteCpuPerTurnMs: sqliteCpuPerTurn,
          sqliteMedianTurnMs: sqlite.medianTurnMs as number,
          sqliteBytesPerMessage: sqlite.bytesPerMessage as number,
          ...(typeof postgres.cpuPerTurnMs === 'number' && {
            cpuRatioToSqlite: postgres.cpuPerTurnMs / sqliteCpuPerTurn,
          }),
          processCpuRatioToSqlite: (postgres.processCpuPerTurnMs as number) / sqliteCpuPerTurn,
        }
        points.push(point)
        process.stderr.write(`${JSON.stringify(point)}\n`)
      }
      const keys = Object.keys(points[0] ?? {})
      results.push(
        Object.fromEntries(
          keys.map((k) => {
            const values = points.map((p) => p[k])
            return [k, typeof values[0] === 'boolean' ? values.every(Boolean) : round(median(values as number[]))]
          }),
        ),
      )
    }
  } finally {
    await server.stop()
  }
  return { store: 'postgres', runs, results, targets: { cpuRatioToSqliteMax: 2 } }
}

async function measurePostgres(n: number, server: BenchPostgres): Promise<Record<string, number | boolean>> {
  const log = await openPostgresStore(await server.database())
  const ports = postgresPorts(log)
  const ids = createIdSource()
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-bench-conv-pg-'))
  const db = await log.reader()
  const bytesBefore = await tablesBytes(db)
  const { runtime, sessionId } = await conversationOn(ports, ids, dir)
  try {
    const m = Math.floor(n / 2)
    const turns: { ms: number; cpuMs: number }[] = []
    let midSeq = 0
    const serverCpu0 = server.cpuMs()
    const cpu0 = process.cpuUsage()
    const wall0 = performance.now()
    for (let t = 0; t < n; t++) {
      turns.push(await turn(runtime, sessionId, 'user', t))
      if (t === m - 1) midSeq = (await log.seqOfVersion(sessionId, await log.version(sessionId))) as number
    }
    const totalWallMs = performance.now() - wall0
    const used = process.cpuUsage(cpu0)
    const processCpuMs = (used.user + used.system) / 1000
    const serverCpuMs = serverCpu0 === undefined ? undefined : (server.cpuMs() ?? serverCpu0) - serverCpu0
    await db.query('CHECKPOINT').catch(() => {}) // a superuser's: the throwaway server's
    const bytes = (await tablesBytes(db)) - bytesBefore
    const events = await log.version(sessionId)

    const stateSamples: number[] = []
    let midMessages = 0
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now()
      const view = await ports.timeTravel.viewAt(sessionId, midSeq)
      stateSamples.push(performance.now() - t0)
      midMessages = toChatMessages(view).length
    }
    const forkSamples: number[] = []
    const forkTurnSamples: number[] = []
    const children: string[] = []
    for (let k = 0; k < 3; k++) {
      const t0 = performance.now()
      const child = await fork(ports, ids, sessionId, midSeq, { title: `fork${k}` })
      forkSamples.push(performance.now() - t0)
      forkTurnSamples.push((await turn(runtime, child.id, `fork${k}`, m)).ms)
      children.push(child.id)
    }
    // Checked after the timing, as conversation.ts does.
    const forkChecks: boolean[] = []
    for (const id of children) forkChecks.push(toChatMessages(await ports.readModels.view(id)).length === 4 * m + 4)
    const originalHolds4N = toChatMessages(await ports.readModels.view(sessionId)).length === 4 * n
    const tenth = Math.max(1, Math.floor(n / 10))
    return {
      n,
      totalWallMs,
      medianTurnMs: median(turns.map((x) => x.ms)),
      turnGrowth: mean(turns.slice(-tenth).map((x) => x.ms)) / mean(turns.slice(0, tenth).map((x) => x.ms)),
      processCpuPerTurnMs: processCpuMs / n,
      ...(serverCpuMs !== undefined && {
        postgresCpuPerTurnMs: serverCpuMs / n,
        cpuPerTurnMs: (processCpuMs + serverCpuMs) / n,
      }),
      bytesPerMessage: bytes / (4 * n),
      eventsPerTurn: events / n,
      stateAtMidMs: median(stateSamples),
      forkMs: median(forkSamples),
      forkTurnMs: median(forkTurnSamples),
      stateAtMidHolds4m: midMessages === 4 * m,
      forksHold4mPlus4: forkChecks.every(Boolean),
      originalHolds4N,
    }
  } finally {
    await runtime.stop()
    await log.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

/** The public tables with their indexes and TOAST, in bytes. */
async function tablesBytes(db: Pick<pg.Pool, 'query'>): Promise<number> {
  const { rows } = await db.query<{ bytes: number }>(
    `SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint AS bytes
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relkind = 'r'`,
  )
  return Number(rows[0]?.bytes ?? 0)
}
