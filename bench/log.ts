import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { ChronicleEvent } from '../src/events/catalogue.js'
import { type EventLog, sqliteLog } from '../src/events/log.js'
import { PostgresEventLog } from '../src/events/postgres/log.js'
import { EventStore } from '../src/events/store.js'
import { openStore } from '../src/projections/open.js'
import { openPostgresStore } from '../src/projections/postgres/open.js'
import { startPostgres } from '../test/support/postgres.js'

/**
 * `npm run bench -- log [--store postgres|sqlite] [--seconds 5] [--read-models]`
 *
 * The event log's ceiling (src/events/log.ts): W writers, each its own log on
 * one database (on PostgreSQL, W servers sharing it: their appends meet on
 * the numbering lock, docs/ARCHITECTURE.md "Ordering"), each appending to
 * its own session as fast as its appends commit, for W = 1, 8 and 32, with 1
 * and 20 events an append (a turn's worth of batched deltas), durable
 * (`full`) and not. Reports commits/s, events/s and the append's p50/p99.
 * `--read-models`: each append also projects the read models in its
 * transaction, as a server's store does (a session's row, here).
 * `--store postgres` starts a throwaway server (test/support/postgres.ts)
 * unless CHRONICLE_DATABASE_URL names one.
 */

interface Point {
  writers: number
  eventsPerAppend: number
  durability: 'full' | 'normal'
  commitsPerSec: number
  eventsPerSec: number
  p50Ms: number
  p99Ms: number
}

function option(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`)
  return i >= 0 && args[i + 1] ? (args[i + 1] as string) : fallback
}

export default async function (args: string[]): Promise<object> {
  const store = option(args, 'store', 'postgres')
  const seconds = Number(option(args, 'seconds', '5'))
  const readModels = args.includes('--read-models')
  const server = store === 'postgres' && !process.env.CHRONICLE_DATABASE_URL ? await startPostgres() : undefined
  const points: Point[] = []
  try {
    for (const writers of [1, 8, 32])
      for (const eventsPerAppend of [1, 20])
        for (const durability of ['full', 'normal'] as const) {
          const database = await open(store, readModels, server?.database.bind(server))
          points.push(await measure(database, writers, eventsPerAppend, durability, seconds))
          await database.cleanup()
          process.stderr.write(`${JSON.stringify(points.at(-1))}\n`)
        }
  } finally {
    await server?.stop()
  }
  return { store, readModels, seconds, points }
}

async function open(store: string, readModels: boolean, database?: () => Promise<string>) {
  if (store === 'postgres') {
    const url = process.env.CHRONICLE_DATABASE_URL ?? (await (database as () => Promise<string>)())
    const open = readModels ? openPostgresStore : PostgresEventLog.open
    return { open: () => open(url, { connections: 1 }) as Promise<EventLog>, cleanup: async () => {} }
  }
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-bench-log-'))
  const path = join(dir, 'log.db')
  return {
    open: async () => sqliteLog(readModels ? openStore(path) : EventStore.open(path)),
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  }
}

async function measure(
  database: { open(): Promise<EventLog> },
  writers: number,
  eventsPerAppend: number,
  durability: 'full' | 'normal',
  seconds: number,
): Promise<Point> {
  const logs = await Promise.all(Array.from({ length: writers }, () => database.open()))
  const meta = { actor: 'model' as const }
  const batch: ChronicleEvent[] = Array.from({ length: eventsPerAppend }, (_, i) => ({
    type: 'session.renamed',
    data: { title: `a title the size of a small delta #${i}` },
  }))
  const latencies: number[] = []
  let commits = 0
  const run = `${Date.now().toString(36)}_${writers}_${eventsPerAppend}_${durability}`
  await Promise.all(
    logs.map((log, w) =>
      log.append(
        `ses_${run}_${w}`,
        [{ type: 'session.created', data: { directory: '/b', agent: 'build', model: null } }],
        {
          meta,
        },
      ),
    ),
  )
  const end = performance.now() + seconds * 1000
  await Promise.all(
    logs.map(async (log, w) => {
      while (performance.now() < end) {
        const t0 = performance.now()
        await log.append(`ses_${run}_${w}`, batch, { meta, durability })
        latencies.push(performance.now() - t0)
        commits++
      }
    }),
  )
  for (const log of logs) await log.close()
  latencies.sort((a, b) => a - b)
  const at = (p: number) => Math.round((latencies[Math.floor((p / 100) * (latencies.length - 1))] ?? 0) * 100) / 100
  return {
    writers,
    eventsPerAppend,
    durability,
    commitsPerSec: Math.round(commits / seconds),
    eventsPerSec: Math.round((commits * eventsPerAppend) / seconds),
    p50Ms: at(50),
    p99Ms: at(99),
  }
}
