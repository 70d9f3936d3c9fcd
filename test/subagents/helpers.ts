import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { z } from 'zod'
import { decideSession } from '../../src/commands/session.js'
import type { StoredEvent } from '../../src/events/envelope.js'
import { sequentialIds, type IdSource } from '../../src/events/ids.js'
import type { EventStore } from '../../src/events/store.js'
import { openStore } from '../../src/projections/open.js'
import { fixedModelResolver } from '../../src/runtime/model/providers.js'
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js'
import { createScriptedModel, type ScriptStep, type ScriptedModel } from '../../src/runtime/model/scripted-model.js'
import type { CompactionConfig } from '../../src/runtime/compaction/config.js'
import { createSubagents, type Subagents } from '../../src/runtime/subagents/subagents.js'
import { resolveAgents, type AgentDefinition } from '../../src/tools/agents.js'
import { createBuiltinTools } from '../../src/tools/builtin/index.js'
import { createTaskTool } from '../../src/tools/builtin/task.js'
import { createTaskStatusTool } from '../../src/tools/builtin/task-status.js'
import { watchOrphanedSubtasks } from '../../src/runtime/subagents/orphans.js'
import { createLookupTool } from '../../src/tools/lookup.js'
import { createPermissionGate, type PermissionGateHandle } from '../../src/runtime/permissions/gate.js'
import { createToolRegistry } from '../../src/runtime/tools/registry.js'
import { defineTool, ToolFailure } from '../../src/tools/tool.js'
import { executeNow } from '../support/execute-now.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/** Waits for the given milliseconds unless aborted: a tool to cancel in the middle of. */
const slow = defineTool({
  id: 'slow',
  description: 'Waits for the given milliseconds, then returns.',
  parameters: z.object({ ms: z.number().int().nonnegative() }),
  execute: (args, ctx) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => resolve({ output: `waited ${args.ms}ms` }), args.ms)
      ctx.abort.addEventListener('abort', () => {
        clearTimeout(timer)
        reject(new ToolFailure('aborted', 'slow tool aborted'))
      })
    }),
})

export interface SubagentHarness {
  readonly store: EventStore
  readonly ids: IdSource
  readonly runtime: Runtime
  readonly model: ScriptedModel
  readonly gate: PermissionGateHandle
  readonly subagents: Subagents
  readonly agents: Map<string, AgentDefinition>
  readonly directory: string
  session(agent?: string): string
  /** a new runtime over the same store, tools and gate (after `runtime.stop()`: a restart) */
  restart(): Runtime
  events(sessionId: string): StoredEvent[]
  /** the child sessions of a session, from its subtask.started events */
  children(sessionId: string): string[]
  close(): Promise<void>
}

/**
 * The real runtime, registry (built-in tools + lookup + slow + task + task_status) and gate over SQLite
 * :memory:; one scripted model for parent and children. `watch`: the watcher of children nobody awaits
 * (background tasks' reports, src/main.ts wires it so), on each runtime.
 */
export function subagentHarness(
  steps: ScriptStep[],
  opts: { compaction?: Partial<CompactionConfig>; watch?: boolean } = {},
): SubagentHarness {
  const store = openStore(':memory:')
  const ids = sequentialIds()
  const agents = resolveAgents([])
  const directory = mkdtempSync(join(tmpdir(), 'chronicle-subagents-'))
  const dataDir = mkdtempSync(join(tmpdir(), 'chronicle-subagents-data-'))
  let runtime: Runtime | undefined
  const subagents = createSubagents({
    ports: sqlitePorts(store),
    ids,
    agents,
    runtime: () => runtime as Runtime,
  })
  const builtins = createBuiltinTools({ dataDir, updateTodos: () => undefined })
  const tools = createToolRegistry({
    agents,
    tools: [
      ...builtins,
      createLookupTool({ resolve: (q) => `result for ${q}` }),
      slow,
      createTaskTool({ agents, run: (r) => subagents.run(r), start: (r) => subagents.start(r) }),
      createTaskStatusTool({ status: (sessionId, taskId, cancel) => subagents.status(sessionId, taskId, cancel) }),
    ],
  })
  const gate = createPermissionGate({ ports: sqlitePorts(store), ids, agents })
  const model = createScriptedModel({ chunkSize: 64, steps })
  const start = () =>
    createRuntime({
      ports: sqlitePorts(store),
      ids,
      models: fixedModelResolver(model, 'mock:model'),
      tools,
      permissions: gate,
      agents,
      limits: { retry: { initialMs: 1, maxMs: 5 } },
      environment: () => ({ platform: 'test', date: '2026-01-01' }),
      ...(opts.compaction && { compaction: opts.compaction }),
    })
  runtime = start()
  const watcher = opts.watch
    ? watchOrphanedSubtasks({ ports: sqlitePorts(store), subagents, runtime: () => runtime as Runtime })
    : undefined
  const events = (sessionId: string) => store.readSession(sessionId)
  return {
    store,
    ids,
    get runtime() {
      return runtime as Runtime
    },
    restart() {
      runtime = start()
      return runtime
    },
    model,
    gate,
    subagents,
    agents,
    directory,
    session(agent = 'build') {
      const id = ids.next('ses')
      executeNow(store, id, (s) => decideSession({ type: 'create', directory, agent, model: 'mock:model' }, s, id), {
        meta: { actor: 'user' },
      })
      return id
    },
    events,
    children: (sessionId) =>
      events(sessionId).flatMap((e) => (e.type === 'subtask.started' ? [e.data.childSessionId] : [])),
    async close() {
      watcher?.close()
      await (runtime as Runtime).stop()
      gate.close()
      store.close()
    },
  }
}

export const dataOf = (events: StoredEvent[], type: string) =>
  events.filter((e) => e.type === type).map((e) => e.data as Record<string, unknown>)

export const task = (id: string, prompt: string, subagent_type = 'general', background?: boolean) => ({
  toolCalls: [
    {
      id,
      name: 'task',
      input: { description: 'delegated work', prompt, subagent_type, ...(background !== undefined && { background }) },
    },
  ],
})

/** Polls until `check` holds (the child runs concurrently with the test). */
export async function until(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not reached in time')
    await new Promise((r) => setTimeout(r, 5))
  }
}
