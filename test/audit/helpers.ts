import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { LanguageModelV3, LanguageModelV3CallOptions } from '@ai-sdk/provider'
import { convertArrayToReadableStream, MockLanguageModelV3 } from 'ai/test'
import { decideSession } from '../../src/commands/session.js'
import { sequentialIds } from '../../src/events/ids.js'
import type { EventStore } from '../../src/events/store.js'
import { openStore } from '../../src/projections/open.js'
import { DEFAULT_COMPACTION } from '../../src/runtime/compaction/config.js'
import { type ModelHandle, type ModelRequest, readModelStep } from '../../src/runtime/model/adapter.js'
import { createScriptedModel, type ScriptStep } from '../../src/runtime/model/scripted-model.js'
import { createPermissionGate } from '../../src/runtime/permissions/gate.js'
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js'
import { createToolRegistry } from '../../src/runtime/tools/registry.js'
import { resolveAgents } from '../../src/tools/agents.js'
import { createMcpManager } from '../../src/tools/mcp/manager.js'
import { testTools } from '../runtime/helpers.js'
import { executeNow } from '../support/execute-now.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/** What a provider model receives for one call, as JSON: the prompt, tool schemas, tool choice and settings. */
export function received(options: LanguageModelV3CallOptions): string {
  const { prompt, tools, toolChoice, maxOutputTokens, temperature, topP } = options
  return JSON.stringify({ prompt, tools, toolChoice, maxOutputTokens, temperature, topP })
}

/** A model that records what it receives, then answers as `inner` does. */
export function recording(inner: LanguageModelV3): { model: LanguageModelV3; calls: string[] } {
  const calls: string[] = []
  const model: LanguageModelV3 = {
    specificationVersion: 'v3',
    provider: inner.provider,
    modelId: inner.modelId,
    supportedUrls: inner.supportedUrls,
    doGenerate: (o) => inner.doGenerate(o),
    doStream: (o) => {
      calls.push(received(o))
      return inner.doStream(o)
    },
  }
  return { model, calls }
}

/** Sends `request` through the model adapter, as a step would, and returns what the provider model received. */
export async function sendAgain(request: ModelRequest, settings: ModelHandle['settings']): Promise<string> {
  const mock = new MockLanguageModelV3({
    doStream: {
      stream: convertArrayToReadableStream([
        {
          type: 'finish',
          finishReason: { unified: 'stop', raw: 'stop' },
          usage: {
            inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
            outputTokens: { total: 1, text: 1, reasoning: 0 },
          },
        },
      ]),
    },
  })
  const handle: ModelHandle = { spec: 'mock:model', model: mock, ...(settings && { settings }) }
  await readModelStep(handle, request, new AbortController().signal, () => {})
  const call = mock.doStreamCalls[0]
  if (!call) throw new Error('the adapter made no call')
  return received(call)
}

export interface AuditWorld {
  readonly store: EventStore
  readonly runtime: Runtime
  /** what the model received, call by call */
  readonly calls: string[]
  readonly settings: NonNullable<ModelHandle['settings']>
  /** the session directory */
  readonly directory: string
  session(): string
  close(): Promise<void>
}

/**
 * A real runtime over a SQLite file with compaction, a step budget of 3, a recorded scripted model, and the
 * real MCP reference server `everything` (its tools named `ev_*`).
 */
export async function auditWorld(steps: ScriptStep[], file = ':memory:'): Promise<AuditWorld> {
  const everything = join(process.cwd(), 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')
  const mcp = createMcpManager([
    { name: 'ev', type: 'local', command: [process.execPath, everything, 'stdio'], environment: {} },
  ])
  await mcp.start()
  const store = openStore(file)
  const ids = sequentialIds()
  const agents = resolveAgents([
    { name: 'build', maxSteps: 3, rules: [{ permission: '*', pattern: '*', action: 'allow' }] },
  ])
  const directory = mkdtempSync(join(tmpdir(), 'chronicle-audit-'))
  const { model, calls } = recording(createScriptedModel({ chunkSize: 16, steps }))
  const settings = { maxOutputTokens: 512, temperature: 0.3 }
  const handle: ModelHandle = { spec: 'mock:model', model, settings }
  const runtime = createRuntime({
    ports: sqlitePorts(store),
    ids,
    models: { validate() {}, resolve: () => handle },
    tools: createToolRegistry({ agents, tools: [...testTools(), ...mcp.tools()] }),
    permissions: createPermissionGate({ ports: sqlitePorts(store), ids, agents }),
    agents,
    limits: { retry: { initialMs: 1, maxMs: 5 } },
    // a date that moves: the request must be rebuilt from what was recorded, not from today
    environment: () => ({ platform: 'test', date: new Date().toISOString() }),
    compaction: { ...DEFAULT_COMPACTION, auto: false, tail: 1 },
  })
  return {
    store,
    runtime,
    calls,
    settings,
    directory,
    session() {
      const id = ids.next('ses')
      executeNow(
        store,
        id,
        (s) => decideSession({ type: 'create', directory, agent: 'build', model: 'mock:model' }, s, id),
        {
          meta: { actor: 'user' },
        },
      )
      return id
    },
    async close() {
      await runtime.stop()
      await mcp.close()
      store.close()
    },
  }
}
