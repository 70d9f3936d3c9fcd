import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openStore } from '../src/projections/open.js'
import { copyToPostgres } from '../src/projections/postgres/copy.js'
import { rebuildPostgres } from '../src/projections/postgres/rebuild.js'
import { verifyPostgresAt } from '../src/projections/postgres/verify.js'
import { rebuild } from '../src/projections/upkeep/rebuild.js'
import { conversation, fork } from '../test/projections/scenarios.js'
import { startPostgres } from '../test/support/postgres.js'

/**
 * `npm run bench -- copy [--sessions 100] [--turns 140]`
 *
 * `chronicle store copy` (src/projections/postgres/copy.ts): a SQLite store of
 * --sessions conversations of --turns turns (7 events a turn, a fork of every
 * tenth at its middle) copied into a new PostgreSQL database three times,
 * then verified there, then its read models rebuilt there
 * (src/projections/postgres/rebuild.ts). The baseline, in the same run:
 * SQLite's own rebuild of the same read models (`chronicle rebuild`). Reports medians; a throwaway
 * server (test/support/postgres.ts) unless CHRONICLE_DATABASE_URL names an
 * empty database (then one run).
 */

function option(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`)
  return i >= 0 && args[i + 1] ? Number(args[i + 1]) : fallback
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number

export default async function (args: string[]): Promise<object> {
  const sessions = option(args, 'sessions', 100)
  const turns = option(args, 'turns', 140)
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-bench-copy-'))
  const store = openStore(join(dir, 'chronicle.db'))
  const given = process.env.CHRONICLE_DATABASE_URL
  const server = given ? undefined : await startPostgres()
  try {
    for (let s = 0; s < sessions; s++) {
      const { ends } = conversation(store, `ses_${s}`, turns)
      if (s % 10 === 0) fork(store, `ses_f${s}`, `ses_${s}`, ends[Math.floor(turns / 2)] as number)
    }
    const events = store.head()
    const runs: { copyMs: number; verifyMs: number; pgRebuildMs: number; differences: number; breaks: number }[] = []
    const rebuilds: number[] = []
    for (let r = 0; r < (given ? 1 : 3); r++) {
      const url = given ?? (await (server as Awaited<ReturnType<typeof startPostgres>>).database())
      const report = await copyToPostgres(store, url)
      const t = performance.now()
      const verified = await verifyPostgresAt(url)
      const verifyMs = Math.round(performance.now() - t)
      const pgRebuildMs = Math.round((await rebuildPostgres(url)).ms)
      runs.push({
        copyMs: report.ms,
        verifyMs,
        pgRebuildMs,
        differences: verified.differences.length,
        breaks: verified.chain.breaks.length,
      })
      rebuilds.push(rebuild(store).ms)
      process.stderr.write(`${JSON.stringify(runs.at(-1))}\n`)
    }
    const copyMs = median(runs.map((r) => r.copyMs))
    const rebuildMs = median(rebuilds)
    return {
      events,
      sessions: sessions + Math.ceil(sessions / 10),
      copyMs,
      copyEventsPerSec: Math.round((events / copyMs) * 1000),
      verifyMs: median(runs.map((r) => r.verifyMs)),
      pgRebuildMs: median(runs.map((r) => r.pgRebuildMs)),
      pgRebuildEventsPerSec: Math.round((events / median(runs.map((r) => r.pgRebuildMs))) * 1000),
      sqliteRebuildMs: Math.round(rebuildMs),
      sqliteRebuildEventsPerSec: Math.round((events / rebuildMs) * 1000),
      copyToRebuildRatio: Math.round((copyMs / rebuildMs) * 100) / 100,
      differences: Math.max(...runs.map((r) => r.differences)),
      breaks: Math.max(...runs.map((r) => r.breaks)),
      runs,
    }
  } finally {
    store.close()
    await server?.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}
