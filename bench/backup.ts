import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { loadConfig } from '../src/config.js'
import Database from 'better-sqlite3'
import { checkChainTail } from '../src/events/chain-check.js'
import { checkStoreFile, TAIL_EVENTS } from '../src/events/integrity.js'
import { createChronicle } from '../src/main.js'
import { generate } from './recovery.js'

/**
 * `npm run bench -- backup [--events 1000000] [--sessions 1000] [--runs 3] [--clients 4]`
 *
 * A store of `events` events (generated as the recovery bench does), served by
 * the real composition root. `clients` loops of real HTTP requests (a session,
 * a page of its events, now and then an input appended with full durability)
 * run through each phase: first without a backup (the baseline), then while
 * `POST /admin/backup` copies the store and its workspace objects. Per run:
 * the backup's seconds, and the p50 / p99 / max latency of the other requests
 * in both phases; medians over `runs`. Also: what the start-up integrity check
 * (docs/BACKUP.md "Damaged files") costs on this store.
 */

export default async function (args: string[]): Promise<object> {
  const total = flag(args, '--events', 1_000_000)
  const sessions = flag(args, '--sessions', 1000)
  const runs = flag(args, '--runs', 3)
  const clients = flag(args, '--clients', 4)
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-bench-backup-'))
  const dataDir = join(dir, 'data')
  mkdirSync(dataDir, { recursive: true })
  const script = join(dir, 'script.json')
  writeFileSync(script, JSON.stringify({ steps: [{ when: {}, text: 'ok' }] }))
  try {
    const db = join(dataDir, 'chronicle.db')
    const generated = generate(db, sessions, 0, total, dir)
    const startCheck = [0, 1, 2].map(() => checkStoreFile(db).ms)
    const chainTail = [0, 1, 2].map(() => {
      const conn = new Database(db, { readonly: true })
      const started = performance.now()
      checkChainTail(conn, TAIL_EVENTS)
      const ms = performance.now() - started
      conn.close()
      return ms
    })
    const config = loadConfig({
      env: {
        CHRONICLE_DATA_DIR: dataDir,
        CHRONICLE_PORT: '0',
        CHRONICLE_MODEL: `scripted:${script}`,
        CHRONICLE_LOG_LEVEL: 'warn',
      },
      cwd: dir,
    })
    const sink = new Writable({ write: (_c, _e, done) => done() })
    const chronicle = await createChronicle(config, { logDestination: sink, directory: dir })
    const url = await chronicle.start()
    const auth = { authorization: `Bearer ${chronicle.token.token}` }
    const ids = Array.from({ length: sessions }, (_, i) => `ses_bench${String(i).padStart(6, '0')}`)
    const perRun: Record<string, number>[] = []
    try {
      for (let run = 0; run < runs; run++) {
        const baseline = await underLoad(url, auth, ids, clients, () => new Promise((r) => setTimeout(r, 3000)))
        let answer: Record<string, number> = {}
        const out = join(dir, `backup-${run}`)
        const during = await underLoad(url, auth, ids, clients, async () => {
          const res = await fetch(`${url}/admin/backup`, {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json' },
            body: JSON.stringify({ out }),
          })
          answer = (await res.json()) as Record<string, number>
          if (!res.ok) throw new Error(`backup answered ${res.status}: ${JSON.stringify(answer)}`)
        })
        rmSync(out, { recursive: true, force: true })
        perRun.push({
          backupSeconds: round(during.ms / 1000, 2),
          backupSeq: answer.seq as number,
          copyMs: answer.copyMs as number,
          checkMs: answer.checkMs as number,
          duringRequests: during.latencies.length,
          duringP50Ms: round(percentile(during.latencies, 0.5), 1),
          duringP99Ms: round(percentile(during.latencies, 0.99), 1),
          duringMaxMs: round(Math.max(...during.latencies), 1),
          baselineRequests: baseline.latencies.length,
          baselineP50Ms: round(percentile(baseline.latencies, 0.5), 1),
          baselineP99Ms: round(percentile(baseline.latencies, 0.99), 1),
          baselineMaxMs: round(Math.max(...baseline.latencies), 1),
        })
      }
    } finally {
      await chronicle.stop()
    }
    const median = (key: string) =>
      round(
        percentile(
          perRun.map((r) => r[key] as number),
          0.5,
        ),
        2,
      )
    return {
      medians: {
        backupSeconds: median('backupSeconds'),
        duringP99Ms: median('duringP99Ms'),
        baselineP99Ms: median('baselineP99Ms'),
        duringP50Ms: median('duringP50Ms'),
        baselineP50Ms: median('baselineP50Ms'),
        startCheckMs: round(percentile(startCheck, 0.5), 0),
        startChainTailMs: round(percentile(chainTail, 0.5), 1),
      },
      targets: { backupSeconds: 10, duringP99Ms: 100 },
      runs: perRun,
      store: { ...generated, dbMB: round(statSync(db).size / 1e6, 1) },
      config: { events: total, sessions, runs, clients },
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** `clients` request loops for as long as `work` takes: each request's latency. */
async function underLoad(
  url: string,
  auth: Record<string, string>,
  ids: readonly string[],
  clients: number,
  work: () => Promise<void>,
): Promise<{ ms: number; latencies: number[] }> {
  const latencies: number[] = []
  let done = false
  let n = 0
  const loop = async () => {
    while (!done) {
      const id = ids[Math.floor(Math.random() * ids.length)] as string
      const i = n++
      const started = performance.now()
      const res =
        i % 10 === 9
          ? await fetch(`${url}/sessions/${id}/inputs`, {
              method: 'POST',
              headers: { ...auth, 'content-type': 'application/json' },
              body: JSON.stringify({ parts: [{ type: 'text', text: `note ${i}` }], noReply: true }),
            })
          : await fetch(
              i % 2 === 0 ? `${url}/sessions/${id}` : `${url}/sessions/${id}/events?after=${i % 900}&limit=100`,
              { headers: auth },
            )
      await res.arrayBuffer()
      if (!res.ok) throw new Error(`${res.status} from a load request`)
      latencies.push(performance.now() - started)
    }
  }
  const loops = Array.from({ length: clients }, loop)
  const started = performance.now()
  try {
    await work()
  } finally {
    done = true
  }
  const ms = performance.now() - started
  await Promise.all(loops)
  return { ms, latencies }
}

function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] as number
}

const round = (v: number, digits: number) => Math.round(v * 10 ** digits) / 10 ** digits

function flag(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name)
  const v = i >= 0 ? Number(args[i + 1]) : fallback
  return Number.isFinite(v) && v > 0 ? v : fallback
}
