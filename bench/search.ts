import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import Database from 'better-sqlite3'
import type { ChronicleEvent } from '../src/events/catalogue.js'
import type { EventMeta } from '../src/events/envelope.js'
import { openStore } from '../src/projections/open.js'
import { parseQuery, type SearchQuery } from '../src/projections/search/query.js'
import { createSqliteSearch } from '../src/projections/search/sqlite-search.js'
import { queryIndex } from '../src/projections/search/sqlite-query.js'
import { rebuildIndex } from '../src/projections/search/upkeep.js'
import { setup, turn } from './conversation.js'
import { storeOption } from './postgres.js'
import { mulberry32 } from './timetravel.js' // deterministic: every run indexes the same text

/**
 * `npm run bench -- search [events] [sessions] [turns] [rounds]` — full-text
 * search (docs/SEARCH.md "Measured"), three parts in one sitting:
 *
 * 1. A store of `events` (default 1,000,000) in `sessions` (2,000), in the
 *    conversation workload's shape (bench/CONVERSATION.md): a user input, a
 *    tool call streamed in 16-character deltas and its output (~1,000
 *    characters: a command's log, a file read), a 500-character answer
 *    streamed the same way, now and then a permission asked and answered;
 *    the text drawn from a Zipf-distributed vocabulary of 20,000 words plus
 *    paths, snake_case names, flags and shell commands. Appended through the
 *    real store with its read models.
 * 2. The index built from it as `chronicle rebuild` builds it: events/s, and
 *    the index file's bytes per event.
 * 3. Queries against it (the engine, src/projections/search/sqlite-query.ts,
 *    with snippets): p50/p99 for a two-word query, a phrase, a filter-only
 *    query and a prefix, 200 different queries of each, newest first,
 *    a page of 20. Targets (#36): p50 ≤ 10 ms, p99 ≤ 50 ms; build ≥ 50,000
 *    events/s.
 * 4. The conversation bench's turn (bench/conversation.ts: ~65 events through
 *    the real runtime) with the index on (its worker indexing the same store
 *    as it grows) against off, alternating blocks of `turns` (150) for
 *    `rounds` (4): process CPU per turn — every thread's, the worker's
 *    indexing included, each block timed until the index has caught up — and
 *    the serving (main) thread's own CPU per turn.
 */

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length === 0 ? 0 : s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2
}
const pct = (xs: readonly number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0
}
const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d

const random = mulberry32(36)
const VOCABULARY: string[] = []
const CONSONANTS = 'bcdfghjklmnprstvwz'
const VOWELS = 'aeiou'
while (VOCABULARY.length < 20_000) {
  let w = ''
  const syllables = 1 + Math.floor(random() * 3)
  for (let i = 0; i < syllables; i++)
    w +=
      (CONSONANTS[Math.floor(random() * CONSONANTS.length)] as string) +
      (VOWELS[Math.floor(random() * VOWELS.length)] as string) +
      (random() < 0.5 ? (CONSONANTS[Math.floor(random() * CONSONANTS.length)] as string) : '')
  VOCABULARY.push(w)
}
/** Zipf-like: a few words very common, most rare. */
const word = () => VOCABULARY[Math.floor(random() ** 2.5 * VOCABULARY.length)] as string
const path = () => `src/${word()}/${word()}.ts`
const COMMANDS = ['rm -rf build', 'npm test', 'git push --force', 'npm run lint', 'ls -la src', 'git status']
const code = () => {
  const r = random()
  if (r < 0.35) return path()
  if (r < 0.6) return `${word()}_${word()}_${word()}`
  if (r < 0.8) return `--${word()}`
  return COMMANDS[Math.floor(random() * COMMANDS.length)] as string
}
function prose(chars: number): string {
  let s = ''
  while (s.length < chars) s += `${random() < 0.12 ? code() : word()}${random() < 0.08 ? '. ' : ' '}`
  return s.slice(0, chars)
}
const chunks = (text: string, n: number) =>
  Array.from({ length: Math.ceil(text.length / n) }, (_, i) => text.slice(i * n, i * n + n))

const TOOLS = ['bash', 'read', 'edit', 'grep']
const PEOPLE = ['alice', 'bob', 'carol', 'dave']
const toolInput = (tool: string) =>
  tool === 'bash'
    ? { command: random() < 0.3 ? (COMMANDS[Math.floor(random() * COMMANDS.length)] as string) : `${word()} ${code()}` }
    : tool === 'read'
      ? { filePath: `/repo/${path()}` }
      : tool === 'edit'
        ? { filePath: `/repo/${path()}`, oldString: prose(60), newString: prose(60) }
        : { pattern: `${word()}|${word()}`, path: 'src' }

/** One turn's events in a session, in the conversation workload's shape. */
function turnEvents(s: number, t: number): { events: ChronicleEvent[]; meta: EventMeta }[] {
  const tag = `${s}_${t}`
  const tool = TOOLS[Math.floor(random() * TOOLS.length)] as string
  const input = toolInput(tool)
  const person = PEOPLE[s % PEOPLE.length] as string
  const user: EventMeta = { actor: 'user', by: { id: `tok_${person}`, name: person } }
  const model: EventMeta = { actor: 'model' }
  const out: { events: ChronicleEvent[]; meta: EventMeta }[] = [
    {
      events: [
        {
          type: 'input.accepted',
          data: {
            inputId: `in_${tag}`,
            parts: [{ type: 'text', text: prose(100) }],
            delivery: 'queue',
            noReply: true,
            digest: `d${tag}`,
          },
        },
      ],
      meta: user,
    },
  ]
  const steps: ChronicleEvent[] = [
    { type: 'message.created', data: { messageId: `msg_${tag}`, role: 'assistant', agent: 'build', model: 'bench' } },
    {
      type: 'tool.input.started',
      data: { messageId: `msg_${tag}`, partId: `prt_c${tag}`, callId: `call_${tag}`, tool },
    },
    ...chunks(JSON.stringify(input), 16).map(
      (delta): ChronicleEvent => ({ type: 'tool.input.delta', data: { partId: `prt_c${tag}`, delta } }),
    ),
    {
      type: 'tool.called',
      data: { messageId: `msg_${tag}`, partId: `prt_c${tag}`, callId: `call_${tag}`, tool, input },
    },
  ]
  out.push({ events: steps, meta: model })
  if (random() < 0.1) {
    out.push({
      events: [
        {
          type: 'permission.requested',
          data: { requestId: `per_${tag}`, permission: tool, patterns: [JSON.stringify(input).slice(0, 60)] },
        },
      ],
      meta: { actor: 'tool' },
    })
    out.push({
      events: [
        { type: 'permission.replied', data: { requestId: `per_${tag}`, reply: random() < 0.8 ? 'once' : 'reject' } },
      ],
      meta: user,
    })
  }
  out.push({
    events: [{ type: 'tool.completed', data: { partId: `prt_c${tag}`, output: prose(1000) } }],
    meta: { actor: 'tool' },
  })
  const answer = prose(500)
  out.push({
    events: [
      { type: 'text.started', data: { messageId: `msg_${tag}`, partId: `prt_t${tag}` } },
      ...chunks(answer, 16).map(
        (text): ChronicleEvent => ({ type: 'text.delta', data: { partId: `prt_t${tag}`, text } }),
      ),
      { type: 'text.ended', data: { partId: `prt_t${tag}` } },
      { type: 'message.completed', data: { messageId: `msg_${tag}`, finish: 'stop' } },
    ],
    meta: model,
  })
  return out
}

export function buildStore(path: string, events: number, sessions: number): { events: number; ms: number } {
  const started = performance.now()
  const store = openStore(path, { snapshotOnCommit: false })
  const perSession = events / sessions
  for (let s = 0; s < sessions; s++) {
    const id = `ses_${String(s).padStart(5, '0')}`
    store.append(
      id,
      [{ type: 'session.created', data: { directory: '/repo', agent: 'build', model: 'bench', title: prose(30) } }],
      { meta: { actor: 'user', by: { id: 'owner', name: 'owner' } } },
    )
    let version = 1
    for (let t = 0; version < perSession; t++)
      for (const { events: batch, meta } of turnEvents(s, t)) {
        store.append(id, batch, { meta })
        version += batch.length
      }
  }
  const head = store.head()
  store.reader().pragma('wal_checkpoint(TRUNCATE)')
  store.close()
  return { events: head, ms: performance.now() - started }
}

export interface QuerySet {
  readonly name: string
  readonly queries: readonly string[]
}

/** The query sets; phrases are taken from `texts`, answers the index holds (every 97th document's). */
export function querySets(texts: readonly string[], sessions: number): QuerySet[] {
  const q = mulberry32(7)
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(q() * xs.length)] as T
  // words a user would look for: drawn from the same Zipf curve (common and rare alike)
  const w = () => VOCABULARY[Math.floor(q() ** 2.5 * VOCABULARY.length)] as string
  const phrase = () => {
    const words = (pick(texts).match(/[a-z]+/g) ?? ['lorem', 'ipsum']) as string[]
    const i = Math.floor(q() * Math.max(1, words.length - 1))
    return `"${words[i]} ${words[i + 1] ?? words[i]}"`
  }
  const filters = () =>
    pick([
      'tool:bash',
      'type:permission',
      `by:${pick(PEOPLE)}`,
      'type:input by:alice',
      `session:ses_${String(Math.floor(q() * sessions)).padStart(5, '0')}`,
      'tool:edit after:2026-01-01',
      `file:src/${w()}/*`,
    ])
  const n = 200
  return [
    { name: 'twoWord', queries: Array.from({ length: n }, () => `${w()} ${w()}`) },
    { name: 'phrase', queries: Array.from({ length: n }, phrase) },
    { name: 'filterOnly', queries: Array.from({ length: n }, filters) },
    { name: 'prefix', queries: Array.from({ length: n }, () => `${w().slice(0, 3)}*`) },
  ]
}

/** Each query of the set run through `run` (a page of 20, newest first, snippets made), timed. */
export async function timeQueries(
  run: (query: SearchQuery) => Promise<{ hits: readonly unknown[] }> | { hits: readonly unknown[] },
  set: QuerySet,
): Promise<Record<string, number>> {
  for (const query of set.queries.slice(0, 20)) await run(parseQuery(query)) // warm the cache
  const ms: number[] = []
  let hits = 0
  let empty = 0
  for (const query of set.queries) {
    const started = performance.now()
    const page = await run(parseQuery(query))
    ms.push(performance.now() - started)
    hits += page.hits.length
    if (page.hits.length === 0) empty++
  }
  return {
    p50: round(median(ms)),
    p99: round(pct(ms, 99)),
    max: round(Math.max(...ms)),
    meanHits: round(hits / ms.length, 1),
    empty,
  }
}

/**
 * The CPU time of this process's main thread (the server's serving thread) alone, from Linux's per-thread
 * account (/proc/self/task/<pid>/stat: utime and stime, in 10 ms ticks): Node 20 has no per-thread clock.
 */
function servingThreadCpuMs(): number {
  const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) * 10
}

/** The conversation turn with the index on (a worker indexing the store as it grows) or off. */
async function conversationBlock(
  on: boolean,
  turns: number,
): Promise<{ cpuMsPerTurn: number; busyMsPerTurn: number; msPerTurn: number }> {
  const { store, runtime, sessionId, dir, path } = await setup()
  const search = on
    ? createSqliteSearch({ store, source: path, path: join(dir, 'search.db'), startAfterMs: 0 })
    : undefined
  if (search) await search.caughtUp(store.head(), 60_000)
  for (let t = 0; t < 10; t++) await turn(runtime, sessionId, on ? 'warm-on' : 'warm-off', t) // JIT and caches
  if (search) await search.caughtUp(store.head(), 60_000)
  const cpu = process.cpuUsage()
  const serving = servingThreadCpuMs()
  const started = performance.now()
  for (let t = 0; t < turns; t++) await turn(runtime, sessionId, on ? 'on' : 'off', t)
  const wall = performance.now() - started
  if (search && !(await search.caughtUp(store.head(), 60_000))) throw new Error('the index did not catch up')
  const used = process.cpuUsage(cpu)
  const busy = servingThreadCpuMs() - serving
  await runtime.stop()
  await search?.close()
  store.close()
  rmSync(dir, { recursive: true, force: true })
  return {
    cpuMsPerTurn: (used.user + used.system) / 1000 / turns,
    busyMsPerTurn: busy / turns,
    msPerTurn: wall / turns,
  }
}

export default async function search(args: string[]): Promise<object> {
  if (storeOption(args) === 'postgres') return (await import('./search-postgres.js')).searchPostgres(args)
  const events = Number(args[0] ?? 1_000_000)
  const sessions = Number(args[1] ?? 2_000)
  const turns = Number(args[2] ?? 150)
  let rounds = Number(args[3] ?? 4)
  // KEEP_BENCH_DB=1 keeps the store (its path is printed); SEARCH_BENCH_DIR=<that dir> measures it again
  const reuse = process.env.SEARCH_BENCH_DIR
  const dir = reuse ?? mkdtempSync(join(tmpdir(), 'chronicle-bench-search-'))
  try {
    const source = join(dir, 'chronicle.db')
    const built = reuse
      ? {
          events: new Database(source, { readonly: true })
            .prepare('SELECT MAX(seq) FROM event_log')
            .pluck()
            .get() as number,
          ms: 0,
        }
      : buildStore(source, events, sessions)
    if (process.env.KEEP_BENCH_DB) console.error(`store kept in ${dir}`)
    console.error(`store: ${built.events} events in ${Math.round(built.ms / 1000)} s`)
    const indexPath = join(dir, 'search.db')
    const rebuild = rebuildIndex(source, indexPath)
    const indexBytes = statSync(indexPath).size
    console.error(`index: ${rebuild.documents} documents in ${Math.round(rebuild.ms)} ms`)
    const index = new Database(indexPath, { readonly: true })
    const breakdown = Object.fromEntries(
      (
        index.prepare('SELECT name, SUM(pgsize) AS bytes FROM dbstat GROUP BY name ORDER BY bytes DESC').all() as {
          name: string
          bytes: number
        }[]
      ).map((r) => [r.name, round(r.bytes / built.events, 1)]),
    )
    if (process.env.SEARCH_BENCH_QUERIES_ONLY) rounds = 0
    const queries: Record<string, Record<string, number>> = {}
    const texts = index
      .prepare("SELECT text FROM docs WHERE kind = 'text' AND id % 97 = 0 LIMIT 400")
      .pluck()
      .all() as string[]
    for (const set of querySets(texts, sessions))
      queries[set.name] = await timeQueries((query) => queryIndex(index, query, { limit: 20 }), set)
    index.close()
    console.error(`queries: ${JSON.stringify(queries)}`)

    const off: { cpuMsPerTurn: number; busyMsPerTurn: number; msPerTurn: number }[] = []
    const on: typeof off = []
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? [false, true] : [true, false]
      for (const indexing of order) (indexing ? on : off).push(await conversationBlock(indexing, turns))
    }
    const m = (xs: typeof off, k: keyof (typeof off)[number]) => median(xs.map((x) => x[k]))
    return {
      events: built.events,
      sessions,
      storeBytesPerEvent: round(statSync(source).size / built.events, 1),
      build: {
        documents: rebuild.documents,
        ms: Math.round(rebuild.ms),
        optimizeMs: Math.round(rebuild.optimizeMs),
        eventsPerSecond: Math.round(built.events / (rebuild.ms / 1000)),
        target: 50_000,
      },
      indexBytes,
      indexBytesPerEvent: round(indexBytes / built.events, 1),
      indexBytesPerEventByTable: breakdown,
      queriesMs: queries,
      queryTargets: { p50: 10, p99: 50 },
      conversation: {
        turns,
        rounds,
        cpuMsPerTurnOff: round(m(off, 'cpuMsPerTurn')),
        cpuMsPerTurnOn: round(m(on, 'cpuMsPerTurn')),
        cpuRatio: round(m(on, 'cpuMsPerTurn') / m(off, 'cpuMsPerTurn'), 3),
        servingThreadCpuMsPerTurnOff: round(m(off, 'busyMsPerTurn')),
        servingThreadCpuMsPerTurnOn: round(m(on, 'busyMsPerTurn')),
        servingThreadCpuRatio: round(m(on, 'busyMsPerTurn') / m(off, 'busyMsPerTurn'), 3),
        msPerTurnOff: round(m(off, 'msPerTurn')),
        msPerTurnOn: round(m(on, 'msPerTurn')),
        blocks: { off, on },
      },
    }
  } finally {
    if (!process.env.KEEP_BENCH_DB && !reuse) rmSync(dir, { recursive: true, force: true })
  }
}
