import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { LanguageModelV3Prompt } from '@ai-sdk/provider'
import { decideSession } from '../../src/commands/session.js'
import type { StoredEvent } from '../../src/events/envelope.js'
import { sequentialIds, type IdSource } from '../../src/events/ids.js'
import type { EventStore } from '../../src/events/store.js'
import { openStore } from '../../src/projections/open.js'
import type { CompactionSettings } from '../../src/runtime/compaction/config.js'
import { fixedModelResolver } from '../../src/runtime/model/providers.js'
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js'
import { createScriptedModel, type ScriptStep, type ScriptedModel } from '../../src/runtime/model/scripted-model.js'
import { createLookupTool } from '../../src/tools/lookup.js'
import { resolveAgents } from '../../src/tools/agents.js'
import { createPermissionGate } from '../../src/runtime/permissions/gate.js'
import { createToolRegistry } from '../../src/runtime/tools/registry.js'
import { collapse } from '../runtime/helpers.js'
import { executeNow } from '../support/execute-now.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/** A real runtime over SQLite :memory: with compaction configured and a scripted model named `mock:model`. */
export interface CompactionHarness {
  readonly store: EventStore
  readonly ids: IdSource
  readonly runtime: Runtime
  readonly model: ScriptedModel
  session(): string
  /** submits and waits for the run to end */
  turn(sessionId: string, text: string): Promise<void>
  events(sessionId: string): StoredEvent[]
  types(sessionId: string): string[]
  close(): Promise<void>
}

export const SPEC = 'mock:model'

export function compactionHarness(
  steps: ScriptStep[],
  compaction: CompactionSettings,
  opts: { lookup?: (query: string) => string | Promise<string>; uniqueCallIds?: boolean } = {},
): CompactionHarness {
  const store = openStore(':memory:')
  const ids = sequentialIds()
  const agents = resolveAgents([{ name: 'build', rules: [{ permission: '*', pattern: '*', action: 'allow' }] }])
  const directory = mkdtempSync(join(tmpdir(), 'chronicle-compaction-'))
  const tools = createToolRegistry({
    agents,
    tools: [createLookupTool({ resolve: opts.lookup ?? ((q) => `result for ${q}`) })],
  })
  const model = createScriptedModel({ chunkSize: 64, steps, ...(opts.uniqueCallIds && { uniqueCallIds: true }) })
  const runtime = createRuntime({
    ports: sqlitePorts(store),
    ids,
    models: fixedModelResolver(model, SPEC),
    tools,
    permissions: createPermissionGate({ ports: sqlitePorts(store), ids, agents }),
    agents,
    limits: { retry: { initialMs: 1, maxMs: 5 } },
    environment: () => ({ platform: 'test', date: '2026-01-01' }),
    compaction,
  })
  const events = (sessionId: string) => store.readSession(sessionId)
  return {
    store,
    ids,
    runtime,
    model,
    session() {
      const id = ids.next('ses')
      executeNow(store, id, (s) => decideSession({ type: 'create', directory, agent: 'build', model: SPEC }, s, id), {
        meta: { actor: 'user' },
      })
      return id
    },
    async turn(sessionId, text) {
      await runtime.submit(sessionId, { parts: [{ type: 'text', text }] })
      await runtime.idle(sessionId)
    },
    events,
    types: (sessionId) => collapse(events(sessionId).map((e) => e.type)),
    async close() {
      await runtime.stop()
      store.close()
    },
  }
}

/** A prompt as role + concatenated text, the form assertions read best in. */
export function shape(prompt: LanguageModelV3Prompt): { role: string; text: string }[] {
  return prompt.map((m) => ({
    role: m.role,
    text:
      typeof m.content === 'string'
        ? m.content
        : m.content
            .map((p) =>
              p.type === 'text'
                ? p.text
                : p.type === 'tool-call'
                  ? `call:${p.toolName}`
                  : p.type === 'tool-result'
                    ? 'result'
                    : p.type,
            )
            .join('|'),
  }))
}

export const dataOf = (events: StoredEvent[], type: string) =>
  events.filter((e) => e.type === type).map((e) => e.data as Record<string, unknown>)
export const TRANSCRIPT = { userContains: '<transcript>' }
