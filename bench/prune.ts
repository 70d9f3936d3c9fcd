import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { execute } from '../src/commands/execute.js'
import { decideSession } from '../src/commands/session.js'
import { createIdSource } from '../src/events/ids.js'
import { openStore } from '../src/projections/open.js'
import { audit } from '../src/runtime/audit/audit.js'
import { fixedModelResolver } from '../src/runtime/model/providers.js'
import { createRuntime } from '../src/runtime/runtime.js'
import { createScriptedModel } from '../src/runtime/model/scripted-model.js'
import { resolveAgents } from '../src/tools/agents.js'
import { createLookupTool } from '../src/tools/lookup.js'
import { createPermissionGate } from '../src/runtime/permissions/gate.js'
import { createToolRegistry } from '../src/runtime/tools/registry.js'
import { text } from './conversation.js'
import { sqlitePorts } from '../src/projections/store-ports.js'

/**
 * `npm run bench -- prune [turns]` (default 1000): the conversation bench's session (bench/conversation.ts:
 * a 100-character question, a lookup with a 200-character query and a 1000-character result, a
 * 500-character answer) through the real runtime on a SQLite file, with the default compaction settings
 * (128k window, usable 108 800) and a model that reports the size of what it was sent as its usage — run
 * twice in the same process: tool-output pruning off (what compaction alone does) and on (the defaults:
 * protect 40k, minimum 20k). Per run: compactions, prunings, what the ordinary steps were sent (bytes of
 * prompt JSON and ≈ tokens), what the compaction requests were sent, the largest request, and `audit`.
 */

interface Sent {
  steps: number
  stepBytes: number
  maxStepTokens: number
  compactionCalls: number
  compactionBytes: number
}

async function run(turns: number, prune: boolean): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-bench-prune-'))
  const store = openStore(join(dir, 'chronicle.db'))
  const ids = createIdSource()
  const agents = resolveAgents()
  const sent: Sent = { steps: 0, stepBytes: 0, maxStepTokens: 0, compactionCalls: 0, compactionBytes: 0 }
  const model = createScriptedModel({
    chunkSize: 256,
    uniqueCallIds: true,
    respond: (r) => {
      const bytes = JSON.stringify(r.prompt).length
      const tokens = Math.ceil(bytes / 4)
      const usage = { input: tokens, output: 20 }
      if (r.lastUserText.includes('<transcript>')) {
        sent.compactionCalls++
        sent.compactionBytes += bytes
        return { text: '## Objective\n- answer the questions\n## Next Move\n- the next question', usage }
      }
      sent.steps++
      sent.stepBytes += bytes
      sent.maxStepTokens = Math.max(sent.maxStepTokens, tokens)
      const tag = /^\[(\S+ turn \d+)\]/.exec(r.lastUserText)?.[1] ?? 'unknown'
      if (r.afterToolResult) return { text: text(`answer ${tag}`, 500), usage }
      return { toolCalls: [{ name: 'lookup', input: { query: text(`query ${tag}`, 200) } }], usage }
    },
  })
  const runtime = createRuntime({
    ports: sqlitePorts(store),
    ids,
    models: fixedModelResolver(model, 'scripted:prune'),
    tools: createToolRegistry({
      agents,
      tools: [createLookupTool({ resolve: (_q, callId) => text(`result ${callId}`, 1000) })],
    }),
    permissions: createPermissionGate({ ports: sqlitePorts(store), ids, agents }),
    agents,
    environment: () => ({ platform: 'bench', date: '2026-01-01' }),
    compaction: { prune: { enabled: prune } },
  })
  const sessionId = ids.next('ses')
  const create = { type: 'create' as const, directory: dir, agent: 'build', model: 'scripted:prune' }
  await execute(sqlitePorts(store), sessionId, (s) => decideSession(create, s, sessionId), { meta: { actor: 'user' } })
  const started = performance.now()
  for (let t = 0; t < turns; t++) {
    await runtime.submit(sessionId, { inputId: `t-${t}`, parts: [{ type: 'text', text: text(`user turn ${t}`, 100) }] })
    await runtime.idle(sessionId)
  }
  const wallMs = performance.now() - started
  const events = store.readSession(sessionId)
  const count = (type: string) => events.filter((e) => e.type === type).length
  const pruned = events.flatMap((e) => (e.type === 'context.pruned' ? [e.data] : []))
  const report = audit(store, [sessionId])
  await runtime.stop()
  store.close()
  rmSync(dir, { recursive: true, force: true })
  return {
    prune,
    turns,
    compactions: count('compaction.completed'),
    compactionsFailed: count('compaction.failed'),
    prunings: pruned.length,
    outputsPruned: pruned.reduce((n, d) => n + d.partIds.length, 0),
    tokensPruned: pruned.reduce((n, d) => n + d.tokens, 0),
    steps: sent.steps,
    stepBytesSent: sent.stepBytes,
    stepTokensSent: Math.ceil(sent.stepBytes / 4),
    meanStepTokens: Math.round(sent.stepBytes / 4 / Math.max(1, sent.steps)),
    maxStepTokens: sent.maxStepTokens,
    compactionCalls: sent.compactionCalls,
    compactionBytesSent: sent.compactionBytes,
    allBytesSent: sent.stepBytes + sent.compactionBytes,
    audit: { steps: report.steps, verified: report.verified, mismatches: report.mismatches.length },
    wallMs: Math.round(wallMs),
    msPerTurn: Math.round((wallMs / turns) * 100) / 100,
  }
}

export default async function (args: string[]): Promise<object> {
  const turns = Number(args[0] ?? 1000)
  const off = await run(turns, false)
  console.log(JSON.stringify(off))
  const on = await run(turns, true)
  console.log(JSON.stringify(on))
  const ratio = (k: string) => Math.round(((on[k] as number) / (off[k] as number)) * 1000) / 1000
  return {
    off,
    on,
    ratios: {
      compactions: `${on.compactions} vs ${off.compactions}`,
      stepBytesSent: ratio('stepBytesSent'),
      allBytesSent: ratio('allBytesSent'),
      meanStepTokens: ratio('meanStepTokens'),
      msPerTurn: ratio('msPerTurn'),
    },
    usableWindow: 108_800,
  }
}
