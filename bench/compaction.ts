import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { execute } from '../src/commands/execute.js'
import { decideSession } from '../src/commands/session.js'
import { sequentialIds } from '../src/events/ids.js'
import type { Message, Part, SessionView } from '../src/projections/fold/model.js'
import { openStore } from '../src/projections/open.js'
import { fitTranscript, splitHistory, transcriptEntries } from '../src/runtime/compaction/split.js'
import { fixedModelResolver } from '../src/runtime/model/providers.js'
import { createRuntime } from '../src/runtime/runtime.js'
import { createScriptedModel } from '../src/runtime/model/scripted-model.js'
import { contextSize, estimateRequest } from '../src/runtime/compaction/tokens.js'
import { resolveAgents } from '../src/tools/agents.js'
import { createLookupTool } from '../src/tools/lookup.js'
import { createPermissionGate } from '../src/runtime/permissions/gate.js'
import { createToolRegistry } from '../src/runtime/tools/registry.js'
import { sqlitePorts } from '../src/projections/store-ports.js'

/**
 * `npm run bench -- compaction [turns]`:
 *  1. the per-step cost of the size estimate and of a compaction's split + transcript on a
 *     large in-memory history (2 000 messages, 2 KB tool outputs);
 *  2. a long session end to end (scripted model, window 24k, every turn a 2 KB tool
 *     result): how often it compacts and how big the requests stay.
 */

function syntheticView(turns: number): SessionView {
  const messages = new Map<string, Message>()
  const parts = new Map<string, Part>()
  const at = '2026-01-01T00:00:00.000Z'
  let n = 0
  const id = (p: string) => `${p}_${String(++n).padStart(8, '0')}`
  for (let t = 0; t < turns; t++) {
    const u = id('msg')
    messages.set(u, { id: u, sessionId: 's', role: 'user', agent: 'build', model: null, createdAt: at })
    parts.set(id('prt'), {
      id: `prt_u${t}`,
      sessionId: 's',
      messageId: u,
      type: 'text',
      text: `question ${t} `.repeat(8),
      ended: true,
    })
    const a = id('msg')
    messages.set(a, {
      id: a,
      sessionId: 's',
      role: 'assistant',
      parentId: u,
      agent: 'build',
      model: 'm',
      createdAt: at,
      completedAt: at,
      finish: 'stop',
      usage: { inputTokens: 1000 + t, outputTokens: 50 },
    })
    const tp = id('prt')
    parts.set(tp, {
      id: tp,
      sessionId: 's',
      messageId: a,
      type: 'tool',
      callId: `c${t}`,
      tool: 'lookup',
      state: 'completed',
      rawInput: '{"query":"x"}',
      input: { query: 'x' },
      output: 'r'.repeat(2048),
    })
    const xp = id('prt')
    parts.set(xp, { id: xp, sessionId: 's', messageId: a, type: 'text', text: `answer ${t} `.repeat(10), ended: true })
  }
  const session = { id: 's', compaction: null } as unknown as SessionView['session']
  return { session, messages, parts }
}

function median(fn: () => void, runs: number): number {
  const times: number[] = []
  for (let i = 0; i < runs; i++) {
    const t = performance.now()
    fn()
    times.push(performance.now() - t)
  }
  times.sort((a, b) => a - b)
  return Math.round((times[Math.floor(runs / 2)] as number) * 1000) / 1000
}

export default async function (args: string[]): Promise<object> {
  const view = syntheticView(1000)
  const micro = {
    messages: view.messages.size,
    contextSizeMs: median(() => contextSize(view, { system: 'x'.repeat(2000), tools: [] }), 20),
    splitMs: median(() => splitHistory(view, 15_000), 20),
    transcriptFitMs: median(() => {
      const split = splitHistory(view, 15_000)
      fitTranscript(transcriptEntries(view, split.head), 100_000)
    }, 10),
  }

  const turns = Number(args[0] ?? 60)
  const store = openStore(':memory:')
  const ids = sequentialIds()
  const agents = resolveAgents([{ name: 'build', rules: [{ permission: '*', pattern: '*', action: 'allow' }] }])
  const tools = createToolRegistry({
    agents,
    tools: [createLookupTool({ resolve: (q) => `${q}: ${'data '.repeat(410)}` })],
  })
  let promptTokens = 0
  let maxPrompt = 0
  let calls = 0
  const model = createScriptedModel({
    chunkSize: 256,
    uniqueCallIds: true,
    respond: (r) => {
      calls++
      const size = Math.ceil(JSON.stringify(r.prompt).length / 4)
      if (!r.lastUserText.includes('<transcript>')) {
        promptTokens += size
        maxPrompt = Math.max(maxPrompt, size)
      }
      if (r.lastUserText.includes('<transcript>'))
        return { text: '## Objective\n- keep going\n## Next Move\n- next question', usage: { input: size, output: 20 } }
      if (r.afterToolResult)
        return { text: `answer to ${r.lastUserText.slice(0, 20)}`, usage: { input: size, output: 10 } }
      return {
        toolCalls: [{ name: 'lookup', input: { query: r.lastUserText.slice(0, 20) } }],
        usage: { input: size, output: 10 },
      }
    },
  })
  const runtime = createRuntime({
    ports: sqlitePorts(store),
    ids,
    models: fixedModelResolver(model, 'bench:model'),
    tools,
    permissions: createPermissionGate({ ports: sqlitePorts(store), ids, agents }),
    agents,
    environment: () => ({ platform: 'bench', date: '2026-01-01' }),
    compaction: { models: { 'bench:model': { contextWindow: 24_000 } }, tail: 4_000 },
  })
  const directory = mkdtempSync(join(tmpdir(), 'chronicle-bench-compaction-'))
  const id = ids.next('ses')
  await execute(
    sqlitePorts(store),
    id,
    (s) => decideSession({ type: 'create', directory, agent: 'build', model: 'bench:model' }, s, id),
    {
      meta: { actor: 'user' },
    },
  )
  const started = performance.now()
  for (let t = 0; t < turns; t++) {
    await runtime.submit(id, { parts: [{ type: 'text', text: `question number ${t}: what next?` }] })
    await runtime.idle(id)
  }
  const ms = performance.now() - started
  const events = store.readSession(id)
  const completed = events
    .filter((e) => e.type === 'compaction.completed')
    .map((e) => e.data as { tokensBefore: number; tokensAfter: number })
  const context = await runtime.context(id)
  await runtime.stop()
  store.close()
  return {
    micro,
    session: {
      turns,
      modelCalls: calls,
      events: events.length,
      compactions: completed.length,
      failed: events.filter((e) => e.type === 'compaction.failed').length,
      avgTokensBefore: Math.round(completed.reduce((n, c) => n + c.tokensBefore, 0) / Math.max(1, completed.length)),
      avgTokensAfter: Math.round(completed.reduce((n, c) => n + c.tokensAfter, 0) / Math.max(1, completed.length)),
      maxPromptTokens: maxPrompt,
      avgPromptTokens: Math.round(promptTokens / Math.max(1, calls - completed.length)),
      finalContextTokens: estimateRequest(context),
      wallMs: Math.round(ms),
      msPerTurn: Math.round((ms / turns) * 10) / 10,
    },
  }
}
