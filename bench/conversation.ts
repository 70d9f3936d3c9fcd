import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { execute } from '../src/commands/execute.js'
import { fork } from '../src/commands/fork.js'
import { decideSession } from '../src/commands/session.js'
import { createIdSource, type IdSource } from '../src/events/ids.js'
import type { EventStore } from '../src/events/store.js'
import { openStore } from '../src/projections/open.js'
import { loadView } from '../src/projections/queries/read-model.js'
import { viewAt } from '../src/projections/time-travel/time-travel.js'
import { toChatMessages } from '../src/runtime/loop/chat-messages.js'
import { fixedModelResolver } from '../src/runtime/model/providers.js'
import { createRuntime, type Runtime } from '../src/runtime/runtime.js'
import { createScriptedModel, type ScriptReply, type ScriptRequest } from '../src/runtime/model/scripted-model.js'
import { resolveAgents } from '../src/tools/agents.js'
import { createLookupTool } from '../src/tools/lookup.js'
import { createPermissionGate } from '../src/runtime/permissions/gate.js'
import type { WorkspaceSnapshots } from '../src/runtime/workspace/snapshots.js'
import { createToolRegistry } from '../src/runtime/tools/registry.js'
import { sqlitePorts, type StorePorts } from '../src/projections/store-ports.js'
import { conversationPostgres } from './conversation-postgres.js'
import { storeOption } from './postgres.js'

/**
 * `npm run bench -- conversation [N…]` — bench/CONVERSATION.md through the
 * real runtime: the scripted model streams tool arguments and answers in
 * 16-character deltas (one event each), `lookup` is a real registered tool,
 * every event goes through the real store with its projections, on a file.
 *
 * A turn = submit + wait for idle: user message → assistant tool call →
 * tool result → assistant answer. Addressable history points are events
 * (every event is a seq one can read the state at). Fork: Chronicle forks at
 * an event and cannot rewrite an answer in place, so each fork is taken at
 * the event that ends turn m and the extra turn runs there (the spec's
 * stated fallback).
 *
 * `--store postgres [--runs 3] [N…]`: the same conversations on PostgreSQL
 * (bench/conversation-postgres.ts), each beside SQLite's in the same run.
 */

const LOREM =
  'lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua '

export function text(tag: string, n: number): string {
  let s = `[${tag}] `
  while (s.length < n) s += LOREM
  return s.slice(0, n)
}

/** The deterministic agent: a lookup first, then the answer. */
function reply(request: ScriptRequest): ScriptReply {
  const m = /^\[(\S+) turn (\d+)\]/.exec(request.lastUserText)
  const tag = m ? `${m[1]}-${m[2]}` : 'unknown'
  if (!request.afterToolResult) {
    return {
      toolCalls: [{ id: `call-${tag}`, name: 'lookup', input: { query: text(`query ${tag}`, 200) } }],
      usage: { input: 10, output: 10 },
    }
  }
  return { text: text(`answer ${tag}`, 500), usage: { input: 10, output: 10 } }
}

export interface Setup {
  store: EventStore
  runtime: Runtime
  sessionId: string
  dir: string
  path: string
  ids: ReturnType<typeof createIdSource>
}

export interface SetupOptions {
  /** records the session directory at each step (bench/workspace.ts measures what that costs) */
  readonly workspace?: (store: EventStore) => WorkspaceSnapshots
  /** the session's directory (default: the bench's own temporary directory, which holds the db) */
  readonly directory?: string
}

export async function setup(options: SetupOptions = {}): Promise<Setup> {
  delete process.env.CHRONICLE_SCRIPT_LOG
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-bench-conv-'))
  const path = join(dir, 'chronicle.db')
  const store = openStore(path)
  const ids = createIdSource()
  const workspace = options.workspace?.(store)
  const { runtime, sessionId } = await conversationOn(sqlitePorts(store), ids, options.directory ?? dir, workspace)
  return { store, runtime, sessionId, dir, path, ids }
}

/** The bench's runtime on either engine's ports (the scripted agent, `lookup`), and its session created. */
export async function conversationOn(
  ports: StorePorts,
  ids: IdSource,
  directory: string,
  workspace?: WorkspaceSnapshots,
): Promise<{ runtime: Runtime; sessionId: string }> {
  const agents = resolveAgents()
  const lookup = createLookupTool({ resolve: (_q, callId) => text(`result ${callId}`, 1000) })
  const runtime = createRuntime({
    ports,
    ids,
    models: fixedModelResolver(createScriptedModel({ chunkSize: 16, respond: reply }), 'scripted:conversation'),
    tools: createToolRegistry({ agents, tools: [lookup] }),
    permissions: createPermissionGate({ ports, ids, agents }),
    agents,
    environment: () => ({ platform: 'bench', date: '2026-01-01' }),
    ...(workspace && { workspace }),
  })
  const sessionId = ids.next('ses')
  const create = { type: 'create' as const, directory, agent: 'build', model: 'scripted:conversation' }
  await execute(ports, sessionId, (s) => decideSession(create, s, sessionId), { meta: { actor: 'user' } })
  return { runtime, sessionId }
}

export async function turn(
  runtime: Runtime,
  sessionId: string,
  kind: string,
  t: number,
): Promise<{ ms: number; cpuMs: number }> {
  const cpu = process.cpuUsage()
  const start = performance.now()
  await runtime.submit(sessionId, {
    inputId: `h-${kind}-${t}`,
    parts: [{ type: 'text', text: text(`${kind} turn ${t}`, 100) }],
  })
  await runtime.idle(sessionId)
  const used = process.cpuUsage(cpu)
  return { ms: performance.now() - start, cpuMs: (used.user + used.system) / 1000 }
}

export const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(xs.length, 1)
export const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0
    ? 0
    : s.length % 2
      ? (s[(s.length - 1) / 2] as number)
      : ((s[s.length / 2 - 1] as number) + (s[s.length / 2] as number)) / 2
}
export const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d
const chatLength = (store: EventStore, sessionId: string, seq?: number) =>
  toChatMessages(seq === undefined ? loadView(store, sessionId) : viewAt(store, sessionId, seq)).length

export async function measure(n: number): Promise<Record<string, unknown>> {
  const { store, runtime, sessionId, dir, path, ids } = await setup()
  const m = Math.floor(n / 2)
  const turns: { ms: number; cpuMs: number }[] = []
  let midSeq = 0
  const wallStart = performance.now()
  const cpuStart = process.cpuUsage()
  for (let t = 0; t < n; t++) {
    turns.push(await turn(runtime, sessionId, 'user', t))
    if (t === m - 1) {
      midSeq = store.seqOfVersion(sessionId, store.version(sessionId)) as number // the session's last event
    }
  }
  const totalWallMs = performance.now() - wallStart
  const cpuUsed = process.cpuUsage(cpuStart)

  store.reader().pragma('wal_checkpoint(TRUNCATE)') // every append committed, then the WAL folded in
  const size = (p: string) => {
    try {
      return statSync(p).size
    } catch {
      return 0
    }
  }
  const dbBytes = size(path) + size(`${path}-wal`)
  // Where the bytes are, per table or index (SQLite's dbstat), in bytes per turn.
  const perTurn = Object.fromEntries(
    (
      store.asCommitted
        .reader()
        .prepare('SELECT name, SUM(pgsize) AS bytes FROM dbstat GROUP BY name ORDER BY bytes DESC')
        .all() as {
        name: string
        bytes: number
      }[]
    )
      .filter((r) => r.bytes > 4096 * 2)
      .map((r) => [r.name, Math.round(r.bytes / n)]),
  )
  const events = store.version(sessionId)

  let t0 = performance.now()
  let listed = 0
  for (const _ of store.iterateSession(sessionId)) listed++
  const historyListMs = performance.now() - t0

  const stateSamples: number[] = []
  let midMessages = 0
  for (let i = 0; i < 5; i++) {
    t0 = performance.now()
    const view = viewAt(store, sessionId, midSeq)
    stateSamples.push(performance.now() - t0)
    midMessages = toChatMessages(view).length
  }

  const forkSamples: number[] = []
  const forkTurnSamples: number[] = []
  const children: string[] = []
  for (let k = 0; k < 9; k++) {
    t0 = performance.now()
    const child = await fork(sqlitePorts(store), ids, sessionId, midSeq, { title: `fork${k}` })
    forkSamples.push(performance.now() - t0)
    forkTurnSamples.push((await turn(runtime, child.id, `fork${k}`, m)).ms)
    children.push(child.id)
  }
  // Checked after the timing: reading a child whole leaves garbage the next fork would collect.
  const forkChecks = children.map((id) => chatLength(store, id) === 4 * m + 4)
  const originalHolds4N = chatLength(store, sessionId) === 4 * n

  await runtime.stop()
  store.close()
  if (!process.env.KEEP_BENCH_DB) rmSync(dir, { recursive: true, force: true })
  else console.log(path)

  const tenth = Math.max(1, Math.floor(n / 10))
  const first = turns.slice(0, tenth)
  const last = turns.slice(-tenth)
  return {
    n,
    totalWallMs: round(totalWallMs, 1),
    totalCpuMs: round((cpuUsed.user + cpuUsed.system) / 1000, 1),
    meanTurnMsFirst10pct: round(mean(first.map((x) => x.ms))),
    meanTurnMsLast10pct: round(mean(last.map((x) => x.ms))),
    turnGrowth: round(mean(last.map((x) => x.ms)) / mean(first.map((x) => x.ms))),
    meanTurnCpuMsFirst10pct: round(mean(first.map((x) => x.cpuMs))),
    meanTurnCpuMsLast10pct: round(mean(last.map((x) => x.cpuMs))),
    medianTurnMs: round(median(turns.map((x) => x.ms))),
    // growth shape: mean CPU ms per turn in each tenth of the conversation
    meanTurnCpuMsByTenth: Array.from({ length: Math.min(10, n) }, (_, i) =>
      round(mean(turns.slice(Math.floor((i * n) / 10), Math.floor(((i + 1) * n) / 10)).map((x) => x.cpuMs))),
    ),
    firstTurnMs: round(turns[0]?.ms ?? 0),
    lastTurnMs: round(turns.at(-1)?.ms ?? 0),
    dbBytes,
    bytesPerMessage: round(dbBytes / (4 * n), 1),
    dbBytesOverPayload: round(dbBytes / (1800 * n)),
    bytesPerTurnByTable: perTurn,
    events,
    eventsPerTurn: round(events / n, 1),
    historyPoint: 'one event (state is materialized at any event by stateAt)',
    historyListMs: round(historyListMs),
    historyListReturns: `events only (${listed})`,
    stateAtMidMs: round(median(stateSamples)),
    stateAtMidFirstMs: round(stateSamples[0] ?? 0),
    stateAtMidMessages: midMessages,
    stateAtMidHolds4m: midMessages === 4 * m,
    forkMs: round(median(forkSamples)),
    forkSamplesMs: forkSamples.map((x) => round(x)),
    forkTurnMs: round(median(forkTurnSamples)),
    forkTurnSamplesMs: forkTurnSamples.map((x) => round(x)),
    forkNote: 'fork at the event ending turn m, then one extra turn (no in-place edit of the answer)',
    forksHold4mPlus4: forkChecks.every(Boolean),
    originalHolds4N,
  }
}

export default async function conversation(args: string[]): Promise<object> {
  if (storeOption(args) === 'postgres') return conversationPostgres(args)
  const ns = args.length > 0 ? args.map(Number).filter((x) => Number.isInteger(x) && x > 0) : [50, 100, 200, 1000]
  const results: Record<string, unknown>[] = []
  for (const n of ns) {
    const r = await measure(n)
    console.log(JSON.stringify(r))
    results.push(r)
  }
  const largest = results.at(-1)
  const summary = {
    maxBytesPerMessage: Math.max(...results.map((r) => r.bytesPerMessage as number)),
    turnGrowthAtLargestN: largest?.turnGrowth,
    largestN: largest?.n,
    // a fork's cost at the largest N over the smallest's (medians of 9; a fork is one durable commit)
    forkGrowth: round((largest?.forkMs as number) / (results[0]?.forkMs as number)),
    targets: { turnGrowthMax: 1.5, bytesPerMessageMax: 3000, forkGrowthMax: 2 },
    checksPass: results.every((r) => r.forksHold4mPlus4 && r.originalHolds4N && r.stateAtMidHolds4m),
  }
  console.log(JSON.stringify(summary))
  return { results, summary }
}
