import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fork } from '../src/commands/fork.js'
import type { ChronicleEvent } from '../src/events/catalogue.js'
import { createIdSource } from '../src/events/ids.js'
import type { EventStore } from '../src/events/store.js'
import { history } from '../src/projections/queries/history.js'
import { openStore } from '../src/projections/open.js'
import { ensureSnapshots, stateAt } from '../src/projections/time-travel/time-travel.js'
import { timetravelPostgres } from './timetravel-postgres.js'
import { sqlitePorts } from '../src/projections/store-ports.js'

/**
 * `npm run bench -- timetravel [--events 100000] [--samples 200] [--forks 20] [--every 1000] [--store postgres [--runs 3]]`
 *
 * One database file holds sessions of 1k, 10k and `events` events with an
 * agent-like mix: turns of user input, assistant steps with reasoning and
 * many small text deltas, tool calls with streamed input, progress and
 * completed/failed results (a few hundred messages at 100k). Appended in
 * batches of 2000 events through the real store and inline projection.
 *
 * - stateAt*: random seqs of the big session once its snapshot chain is
 *   built (coldStateAtMs: the first stateAt, which folds the whole session
 *   and writes the chain).
 * - forkMs: fork() at a random seq, then the child accepts an input
 *   (input.accepted appended); median of `forks`. forkGrowth = 100k / 1k.
 * - forkLogBytes / forkDbBytes: growth of the events table (dbstat pages) /
 *   of the whole database, per fork, over `forks` forks of the big session.
 * - historyPageMs: one page of 1000 events after a random seq.
 *
 * `--store postgres`: the same on PostgreSQL (timetravel-postgres.ts), with
 * this SQLite run in the same sitting as the baseline.
 */
export default async function timetravel(args: string[]): Promise<object> {
  const opt = (name: string, fallback: number) => {
    const i = args.indexOf(`--${name}`)
    return i >= 0 ? Number(args[i + 1]) : fallback
  }
  const big = opt('events', 100_000)
  const samples = opt('samples', 200)
  const forks = opt('forks', 20)
  const every = opt('every', 1000)
  const store = args[args.indexOf('--store') + 1]
  if (args.includes('--store') && store !== 'postgres') throw new Error(`--store: postgres or nothing, not ${store}`)
  if (store === 'postgres') {
    const postgres = await timetravelPostgres({ big, samples, forks, every, runs: opt('runs', 3) })
    const sqlite = (await sqliteTimetravel(big, samples, forks, every)) as Record<string, unknown>
    const forkMs = sqlite.forkMs as Record<string, number>
    return {
      store: 'postgres',
      ...postgres,
      sqlite: {
        stateAtP50Ms: sqlite.stateAtP50Ms,
        stateAtP99Ms: sqlite.stateAtP99Ms,
        forkMs,
        forkGrowth: sqlite.forkGrowth,
        historyPageMs: sqlite.historyPageMs,
      },
      stateAtP99RatioToSqlite: round((postgres.stateAtP99Ms as number) / (sqlite.stateAtP99Ms as number)),
      forkBigRatioToSqlite: round((postgres.forkBigMs as number) / (forkMs[String(big)] as number)),
    }
  }
  return sqliteTimetravel(big, samples, forks, every)
}

async function sqliteTimetravel(big: number, samples: number, forks: number, every: number): Promise<object> {
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-timetravel-'))
  const store = openStore(join(dir, 'bench.db'), { snapshotEvery: every })
  try {
    const ids = createIdSource()
    const sizes = [1_000, 10_000, big]
    const built: Record<number, { id: string; seqs: number[]; ms: number; messages: number }> = {}
    for (const size of sizes) {
      const started = performance.now()
      const { id, seqs, messages } = buildSession(store, size, ids.next('ses'), size)
      built[size] = { id, seqs, ms: performance.now() - started, messages }
    }
    const large = built[big] as (typeof built)[number]

    let t = performance.now()
    stateAt(store, large.id)
    const coldStateAtMs = performance.now() - t
    const rng = mulberry32(7)
    const pick = (seqs: number[]) => seqs[Math.floor(rng() * seqs.length)] as number

    const stateTimes: number[] = []
    for (let i = 0; i < samples; i++) {
      const seq = pick(large.seqs)
      t = performance.now()
      stateAt(store, large.id, seq)
      stateTimes.push(performance.now() - t)
    }

    const forkMs: Record<string, number> = {}
    for (const size of sizes) {
      const { id, seqs } = built[size] as (typeof built)[number]
      ensureSnapshots(store, id) // what a running server has after the session's runs
      const times: number[] = []
      for (let i = 0; i < Math.max(5, Math.min(forks, 11)); i++) {
        const seq = pick(seqs)
        t = performance.now()
        const child = await fork(sqlitePorts(store), ids, id, seq)
        store.append(child.id, [input(ids.next('in'))], {
          expectedVersion: child.version,
          durability: 'full',
          meta: { actor: 'user' },
        })
        times.push(performance.now() - t)
      }
      forkMs[String(size)] = median(times)
    }

    // A long log but a small state: a fork early in the big session costs what a fork of a short one does.
    const early: number[] = []
    for (let i = 0; i < 7; i++) {
      const seq = large.seqs[Math.floor(rng() * 1000)] as number
      t = performance.now()
      const child = await fork(sqlitePorts(store), ids, large.id, seq)
      store.append(child.id, [input(ids.next('in'))], {
        expectedVersion: child.version,
        durability: 'full',
        meta: { actor: 'user' },
      })
      early.push(performance.now() - t)
    }
    const headState = stateAt(store, large.id)

    const before = sizesOf(store)
    const childEvents: number[] = []
    for (let i = 0; i < forks; i++) {
      const child = await fork(sqlitePorts(store), ids, large.id, pick(large.seqs))
      childEvents.push(child.version)
    }
    const after = sizesOf(store)

    const pageTimes: number[] = []
    for (let i = 0; i < 50; i++) {
      const after = pick(large.seqs)
      t = performance.now()
      history(store, large.id, { after, limit: 1000 })
      pageTimes.push(performance.now() - t)
    }
    const forked = await fork(sqlitePorts(store), ids, large.id, large.seqs[large.seqs.length - 1] as number)
    const forkPageTimes: number[] = []
    for (let i = 0; i < 50; i++) {
      const after = pick(large.seqs)
      t = performance.now()
      history(store, forked.id, { after, limit: 1000 })
      forkPageTimes.push(performance.now() - t)
    }

    const snapshots = store.asCommitted
      .reader()
      .prepare('SELECT COUNT(*) AS rows, SUM(LENGTH(data)) AS bytes FROM snapshots')
      .get() as {
      rows: number
      bytes: number
    }
    return {
      snapshotEvery: every,
      events: {
        sessions: sizes,
        bigSessionMessages: large.messages,
        buildMs: Math.round(large.ms),
        eventsTableBytes: after.events,
      },
      stateAtP50Ms: round(percentile(stateTimes, 0.5)),
      stateAtP99Ms: round(percentile(stateTimes, 0.99)),
      stateAtMaxMs: round(Math.max(...stateTimes)),
      coldStateAtMs: round(coldStateAtMs),
      snapshotRows: snapshots.rows,
      snapshotBytes: snapshots.bytes,
      forkMs: Object.fromEntries(Object.entries(forkMs).map(([k, v]) => [k, round(v)])),
      forkGrowth: round((forkMs[String(big)] as number) / (forkMs['1000'] as number)),
      forkEarlyIn100kMs: round(median(early)),
      stateAtHead: {
        messages: headState.messages.length,
        parts: headState.parts.length,
        jsonBytes: JSON.stringify(headState).length,
      },
      forkLogBytes: Math.round((after.events - before.events) / forks),
      forkLogPayloadBytes: Math.round(after.payload - before.payload) / forks,
      forkDbBytes: Math.round((after.db - before.db) / forks),
      forkReadModelBytes: Math.round((after.readModels - before.readModels) / forks),
      forkEventsPerFork: round(childEvents.reduce((a, b) => a + b, 0) / forks),
      historyPageMs: round(percentile(pageTimes, 0.5)),
      historyPageP99Ms: round(percentile(pageTimes, 0.99)),
      historyForkPageMs: round(percentile(forkPageTimes, 0.5)),
      rssMb: Math.round(process.memoryUsage().rss / 1e6),
    }
  } finally {
    store.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

function sizesOf(store: EventStore) {
  const pages = (names: string[]) =>
    store.asCommitted
      .reader()
      .prepare(`SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name IN (${names.map(() => '?').join(',')})`)
      .pluck()
      .get(...names) as number
  return {
    // the log: event_log and its lookup tables (schema migrations 5-6; 'events' is a view)
    events: pages([
      'event_log',
      'sqlite_autoindex_event_log_1',
      'streams',
      'sqlite_autoindex_streams_1',
      'event_types',
      'sqlite_autoindex_event_types_1',
      'event_metas',
      'sqlite_autoindex_event_metas_1',
      'event_metas_by_tail',
      'event_parts',
      'sqlite_autoindex_event_parts_1',
    ]),
    readModels: pages([
      'sessions',
      'messages',
      'parts',
      'sqlite_autoindex_sessions_1',
      'sqlite_autoindex_messages_1',
      'sqlite_autoindex_parts_1',
    ]),
    db:
      (store.asCommitted.reader().pragma('page_count', { simple: true }) as number) *
      (store.asCommitted.reader().pragma('page_size', { simple: true }) as number),
    payload: store.asCommitted
      .reader()
      .prepare(
        'SELECT COALESCE(SUM(LENGTH(data) + LENGTH(meta) + LENGTH(type) + LENGTH(session_id) + 24), 0) FROM events',
      )
      .pluck()
      .get() as number,
  }
}

function input(inputId: string): ChronicleEvent {
  return {
    type: 'input.accepted',
    data: { inputId, parts: [{ type: 'text', text: 'and now?' }], delivery: 'queue', noReply: false, digest: inputId },
  }
}

/** Appends about `target` events of agent turns to a new session, in batches of 2000. */
export function buildSession(store: EventStore, target: number, sessionId: string, seed: number) {
  const { batches, messages } = agentTurns(target, seed)
  const seqs: number[] = []
  for (const batch of batches)
    seqs.push(...store.append(sessionId, batch, { meta: { actor: 'runtime' } }).map((e) => e.seq))
  return { id: sessionId, seqs, messages }
}

/** About `target` events of a session's agent turns, in batches of 2000 (the same for a seed on either engine). */
export function agentTurns(target: number, seed: number): { batches: ChronicleEvent[][]; messages: number } {
  const rng = mulberry32(seed)
  const int = (lo: number, hi: number) => lo + Math.floor(rng() * (hi - lo + 1))
  const words = [
    'the ',
    'file ',
    'function ',
    'returns ',
    'a ',
    'value ',
    'so ',
    'we ',
    'should ',
    'check ',
    'it; ',
    'then ',
  ]
  const word = () => words[int(0, words.length - 1)] as string
  const batches: ChronicleEvent[][] = []
  let batch: ChronicleEvent[] = []
  let count = 0
  let n = 0
  let messages = 0
  const id = (p: string) => `${p}_${String(++n).padStart(8, '0')}`
  const push = (...events: ChronicleEvent[]) => {
    batch.push(...events)
    count += events.length
    if (batch.length >= 2000) flush()
  }
  const flush = () => {
    if (batch.length === 0) return
    batches.push(batch)
    batch = []
  }
  push({ type: 'session.created', data: { directory: '/repo', agent: 'build', model: 'openai:gpt-5' } })
  while (count < target) {
    const inputId = id('in')
    const user = id('msg')
    const runId = id('run')
    messages++
    push(
      {
        type: 'input.accepted',
        data: {
          inputId,
          parts: [{ type: 'text', text: 'please fix the failing test in src/app.ts' }],
          delivery: 'queue',
          noReply: false,
          digest: inputId,
        },
      },
      { type: 'run.started', data: { runId, reason: 'input' } },
      { type: 'input.delivered', data: { inputId, messageId: user, partIds: [id('prt')] } },
    )
    const steps = int(1, 4)
    for (let step = 1; step <= steps && count < target; step++) {
      const msg = id('msg')
      messages++
      push(
        {
          type: 'message.created',
          data: { messageId: msg, role: 'assistant', parentId: user, agent: 'build', model: 'openai:gpt-5' },
        },
        { type: 'step.started', data: { messageId: msg, partId: id('prt'), step, contextDigest: `sha256:${n}` } },
      )
      if (rng() < 0.3) {
        const r = id('prt')
        push({ type: 'reasoning.started', data: { messageId: msg, partId: r } })
        for (let i = int(10, 40); i > 0; i--) push({ type: 'reasoning.delta', data: { partId: r, text: word() } })
        push({ type: 'reasoning.ended', data: { partId: r } })
      }
      const text = id('prt')
      push({ type: 'text.started', data: { messageId: msg, partId: text } })
      for (let i = int(80, 320); i > 0; i--) push({ type: 'text.delta', data: { partId: text, text: word() } })
      push({ type: 'text.ended', data: { partId: text } })
      const last = step === steps
      for (let c = last ? 0 : int(1, 2); c > 0; c--) {
        const part = id('prt')
        const callId = id('call')
        push({ type: 'tool.input.started', data: { messageId: msg, partId: part, callId, tool: 'bash' } })
        for (let i = int(3, 12); i > 0; i--)
          push({ type: 'tool.input.delta', data: { partId: part, delta: '{"command":"npm t' } })
        push({
          type: 'tool.called',
          data: { messageId: msg, partId: part, callId, tool: 'bash', input: { command: 'npm test' } },
        })
        for (let i = int(0, 3); i > 0; i--)
          push({ type: 'tool.progressed', data: { partId: part, metadata: { output: 'running…' } } })
        push(
          rng() < 0.85
            ? { type: 'tool.completed', data: { partId: part, output: 'ok '.repeat(int(50, 600)), title: 'npm test' } }
            : { type: 'tool.failed', data: { partId: part, error: { kind: 'failed', message: 'exit code 1' } } },
        )
      }
      const usage = { inputTokens: int(1000, 9000), outputTokens: int(50, 900) }
      push(
        {
          type: 'step.finished',
          data: { messageId: msg, partId: id('prt'), finishReason: last ? 'stop' : 'tool-calls', usage },
        },
        {
          type: 'message.completed',
          data: { messageId: msg, finish: last ? 'stop' : 'tool-calls', usage, cost: 0.001 },
        },
      )
    }
    push({ type: 'run.finished', data: { runId, outcome: 'idle' } })
  }
  flush()
  return { batches, messages }
}

export function mulberry32(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] as number
}

export function median(values: number[]): number {
  return percentile(values, 0.5)
}

export function round(x: number): number {
  return Math.round(x * 100) / 100
}
