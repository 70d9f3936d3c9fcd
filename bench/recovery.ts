import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { loadConfig } from '../src/config.js'
import type { ChronicleEvent } from '../src/events/catalogue.js'
import { getSession } from '../src/projections/queries/read-model.js'
import { openStore } from '../src/projections/open.js'
import { createChronicle } from '../src/main.js'

/**
 * `npm run bench -- recovery [--sessions 1000] [--unfinished 100] [--events 1000000]`
 *
 * A data directory left by a crash: `sessions` sessions, `unfinished` of them
 * with a run that started and never finished (a bash call running, text
 * streamed), the rest finished; `events` events in all, mostly text deltas,
 * written with one big store.append per session. Then the real composition
 * root starts on it (scripted model): readyMs is from createChronicle() to the
 * server listening (recovery included: settled before listening, runs resumed
 * after), firstResponseMs until a real HTTP request is answered, allResumedIdleMs
 * until every resumed run has finished.
 */

export default async function (args: string[]): Promise<object> {
  const sessions = flag(args, '--sessions', 1000)
  const unfinished = flag(args, '--unfinished', 100)
  const total = flag(args, '--events', 1_000_000)
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-bench-recovery-'))
  const dataDir = join(dir, 'data')
  mkdirSync(dataDir, { recursive: true })
  const script = join(dir, 'script.json')
  writeFileSync(script, JSON.stringify({ steps: [{ when: {}, text: 'Picking up where I left off.' }] }))
  try {
    const generated = generate(join(dataDir, 'chronicle.db'), sessions, unfinished, total, dir)
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

    const t0 = performance.now()
    const chronicle = await createChronicle(config, { logDestination: sink, directory: dir })
    const createdMs = performance.now() - t0
    const url = await chronicle.start()
    const readyMs = performance.now() - t0
    const res = await fetch(`${url}/health`)
    const firstResponseMs = performance.now() - t0
    if (!res.ok) throw new Error(`health answered ${res.status}`)
    const report = chronicle.recovery
    const resumed = report?.resumed ?? []

    // Every resumed run continues in the background to its end.
    const deadline = Date.now() + 120_000
    let open = resumed.length
    while (open > 0 && Date.now() < deadline) {
      open = resumed.filter((r) => getSession(chronicle.store, r.sessionId)?.run !== null).length
      if (open > 0) await new Promise((r) => setTimeout(r, 50))
    }
    const allResumedIdleMs = performance.now() - t0
    const finishedIdle = resumed.filter(
      (r) => getSession(chronicle.store, r.sessionId)?.lastRun?.outcome === 'idle',
    ).length
    const sample = resumed[0] && getSession(chronicle.store, resumed[0].sessionId)?.lastRun
    await chronicle.stop()
    return {
      readyMs: Math.round(readyMs),
      resumedRuns: resumed.length,
      firstResponseMs: Math.round(firstResponseMs),
      openMs: Math.round(createdMs),
      recoverySettleMs: report?.ms ?? null,
      allResumedIdleMs: Math.round(allResumedIdleMs),
      resumedRunsFinishedIdle: finishedIdle,
      stillOpen: open,
      sampleOutcome: sample,
      log: generated,
      config: { sessions, unfinished, events: total },
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** Writes the crashed data directory: one append (one transaction) per session. */
export function generate(path: string, sessions: number, unfinished: number, total: number, directory: string) {
  const started = performance.now()
  const store = openStore(path, { snapshotOnCommit: false })
  const meta = { actor: 'runtime' as const }
  const perSession = Math.max(20, Math.floor(total / sessions))
  const stride = Math.max(1, Math.floor(sessions / Math.max(1, unfinished)))
  let written = 0
  for (let i = 0; i < sessions; i++) {
    const id = `ses_bench${String(i).padStart(6, '0')}`
    const open = i % stride === 0 && i / stride < unfinished
    // ids sort before the runtime's time-ordered ones, as ids of earlier events do
    const n = (k: string) => {
      const [prefix, suffix = ''] = k.split('_')
      return `${prefix}_0bench${String(i).padStart(6, '0')}${suffix}`
    }
    const head: ChronicleEvent[] = [
      { type: 'session.created', data: { directory, agent: 'build', model: null, title: `bench ${i}` } },
      {
        type: 'input.accepted',
        data: {
          inputId: n('in'),
          parts: [{ type: 'text', text: 'tell me a long story' }],
          delivery: 'queue',
          noReply: false,
          digest: 'x',
        },
      },
      { type: 'run.started', data: { runId: n('run'), reason: 'input' } },
      { type: 'input.delivered', data: { inputId: n('in'), messageId: n('msg_0u'), partIds: [n('prt_0u')] } },
      {
        type: 'message.created',
        data: { messageId: n('msg_1a'), role: 'assistant', parentId: n('msg_0u'), agent: 'build', model: null },
      },
      { type: 'step.started', data: { messageId: n('msg_1a'), partId: n('prt_1s'), step: 1, contextDigest: 'x' } },
      { type: 'text.started', data: { messageId: n('msg_1a'), partId: n('prt_2t') } },
    ]
    const tail: ChronicleEvent[] = open
      ? [
          { type: 'text.ended', data: { partId: n('prt_2t') } },
          {
            type: 'tool.input.started',
            data: { messageId: n('msg_1a'), partId: n('prt_3c'), callId: n('call'), tool: 'bash' },
          },
          {
            type: 'step.finished',
            data: { messageId: n('msg_1a'), partId: n('prt_4f'), finishReason: 'tool-calls', usage: {} },
          },
          { type: 'message.completed', data: { messageId: n('msg_1a'), finish: 'tool-calls', usage: {} } },
          {
            type: 'tool.called',
            data: {
              messageId: n('msg_1a'),
              partId: n('prt_3c'),
              callId: n('call'),
              tool: 'bash',
              input: { command: 'sleep 1' },
            },
          },
        ]
      : [
          { type: 'text.ended', data: { partId: n('prt_2t') } },
          {
            type: 'step.finished',
            data: { messageId: n('msg_1a'), partId: n('prt_4f'), finishReason: 'stop', usage: {} },
          },
          { type: 'message.completed', data: { messageId: n('msg_1a'), finish: 'stop', usage: {} } },
          { type: 'run.finished', data: { runId: n('run'), outcome: 'idle' } },
        ]
    const deltas = Math.max(0, (i === sessions - 1 ? total - written : perSession) - head.length - tail.length)
    const events: ChronicleEvent[] = [...head]
    for (let d = 0; d < deltas; d++)
      events.push({ type: 'text.delta', data: { partId: n('prt_2t'), text: `word${d} ` } })
    events.push(...tail)
    store.append(id, events, { expectedVersion: 0, meta })
    written += events.length
  }
  const open = store
    .reader()
    .prepare("SELECT COUNT(*) FROM sessions WHERE data ->> '$.run' IS NOT NULL")
    .pluck()
    .get() as number
  store.close()
  return {
    events: written,
    unfinishedRuns: open,
    generateMs: Math.round(performance.now() - started),
    dbMB: Math.round(statSync(path).size / 1e5) / 10,
  }
}

function flag(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name)
  const v = i >= 0 ? Number(args[i + 1]) : fallback
  return Number.isFinite(v) && v > 0 ? v : fallback
}
