import { fork } from '../src/commands/fork.js'
import type { ChronicleEvent } from '../src/events/catalogue.js'
import { createIdSource } from '../src/events/ids.js'
import type { PostgresEventLog } from '../src/events/postgres/log.js'
import { openPostgresStore } from '../src/projections/postgres/open.js'
import { postgresReadModels } from '../src/projections/postgres/read-models.js'
import { postgresTimeTravel } from '../src/projections/postgres/time-travel.js'
import { startPostgres } from '../test/support/postgres.js'
import { agentTurns, median, mulberry32, percentile, round } from './timetravel.js'

/**
 * `npm run bench -- timetravel --store postgres [--events 100000] [--samples 200] [--forks 20] [--every 1000] [--runs 3]`
 *
 * The time-travel bench on PostgreSQL's store (a throwaway server, unless
 * CHRONICLE_DATABASE_URL names one): the same sessions of 1k, 10k and
 * `events` agent-like events, appended in batches of 2000 through the log
 * and its inline projection, then stateAt at random seqs of the big one,
 * fork (then an input to the child) at random seqs of each, the log's growth
 * per fork, and history pages. Each figure is the median over `runs` fresh
 * databases; timetravel.ts runs SQLite's in the same sitting for the ratios.
 */
export interface PgTimeTravelConfig {
  readonly big: number
  readonly samples: number
  readonly forks: number
  readonly every: number
  readonly runs: number
}

export async function timetravelPostgres(cfg: PgTimeTravelConfig): Promise<Record<string, number>> {
  const given = process.env.CHRONICLE_DATABASE_URL
  const server = given ? undefined : await startPostgres()
  const runs: Record<string, number>[] = []
  try {
    for (let i = 0; i < cfg.runs; i++) {
      const log = await openPostgresStore(given ?? (await (server as NonNullable<typeof server>).database()))
      try {
        runs.push(await runOnce(log, cfg))
        process.stderr.write(`${JSON.stringify(runs.at(-1))}\n`)
      } finally {
        await log.close()
      }
    }
  } finally {
    await server?.stop()
  }
  const keys = Object.keys(runs[0] ?? {})
  return Object.fromEntries(keys.map((k) => [k, round(median(runs.map((r) => r[k] as number)))]))
}

async function runOnce(log: PostgresEventLog, cfg: PgTimeTravelConfig): Promise<Record<string, number>> {
  const travel = postgresTimeTravel(log, { snapshotEvery: cfg.every })
  const ports = { log, readModels: postgresReadModels(log), timeTravel: travel }
  const ids = createIdSource()
  const rng = mulberry32(7)
  const pick = (seqs: number[]) => seqs[Math.floor(rng() * seqs.length)] as number
  const sizes = [1_000, 10_000, cfg.big]
  const built = new Map<number, { id: string; seqs: number[] }>()
  let t = performance.now()
  for (const size of sizes) {
    const id = ids.next('ses')
    const seqs: number[] = []
    for (const batch of agentTurns(size, size).batches)
      seqs.push(...(await log.append(id, batch, { meta: { actor: 'runtime' } })).map((e) => e.seq))
    built.set(size, { id, seqs })
  }
  const buildMs = performance.now() - t
  const large = built.get(cfg.big) as { id: string; seqs: number[] }

  t = performance.now()
  await travel.stateAt(large.id)
  const coldStateAtMs = performance.now() - t
  const stateTimes: number[] = []
  for (let i = 0; i < cfg.samples; i++) {
    const seq = pick(large.seqs)
    t = performance.now()
    await travel.stateAt(large.id, seq)
    stateTimes.push(performance.now() - t)
  }

  const forkAt = async (sessionId: string, seq: number) => {
    const child = await fork(ports, ids, sessionId, seq)
    await log.append(child.id, [input(ids.next('in'))], {
      expectedVersion: child.version,
      durability: 'full',
      meta: { actor: 'user' },
    })
    return child
  }
  const forkMs: Record<string, number> = {}
  for (const size of sizes) {
    const { id, seqs } = built.get(size) as { id: string; seqs: number[] }
    await travel.stateAt(id) // the chain a running server has after the session's runs
    const times: number[] = []
    for (let i = 0; i < Math.max(5, Math.min(cfg.forks, 11)); i++) {
      const seq = pick(seqs)
      t = performance.now()
      await forkAt(id, seq)
      times.push(performance.now() - t)
    }
    forkMs[size] = median(times)
  }

  const db = await log.reader()
  const headBefore = await log.head()
  for (let i = 0; i < cfg.forks; i++) await fork(ports, ids, large.id, pick(large.seqs))
  const forkEvents = (await log.head()) - headBefore
  // what the forks added to the log, row by row (a page-level size moves in 8 KiB steps)
  const { rows } = await db.query<{ bytes: number }>(
    `SELECT COALESCE(SUM(octet_length(data) + octet_length(meta) + octet_length(type) + octet_length(session_id)
       + octet_length(hash) + 28), 0)::bigint AS bytes FROM events WHERE seq > $1`,
    [headBefore],
  )

  const pageTimes: number[] = []
  for (let i = 0; i < 50; i++) {
    const after = pick(large.seqs)
    t = performance.now()
    await travel.history(large.id, { after, limit: 1000 })
    pageTimes.push(performance.now() - t)
  }
  return {
    buildEventsPerSec: (large.seqs.length + 11_000) / (buildMs / 1000),
    stateAtP50Ms: percentile(stateTimes, 0.5),
    stateAtP99Ms: percentile(stateTimes, 0.99),
    coldStateAtMs,
    fork1kMs: forkMs[1000] as number,
    fork10kMs: forkMs[10000] as number,
    forkBigMs: forkMs[cfg.big] as number,
    forkGrowth: (forkMs[cfg.big] as number) / (forkMs[1000] as number),
    forkEventsPerFork: forkEvents / cfg.forks,
    forkLogBytes: (rows[0]?.bytes as number) / cfg.forks,
    historyPageMs: percentile(pageTimes, 0.5),
    historyPageP99Ms: percentile(pageTimes, 0.99),
  }
}

function input(inputId: string): ChronicleEvent {
  return {
    type: 'input.accepted',
    data: { inputId, parts: [{ type: 'text', text: 'and now?' }], delivery: 'queue', noReply: false, digest: inputId },
  }
}
