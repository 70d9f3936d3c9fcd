import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { z } from 'zod'
import { decidePermission } from '../../src/commands/permission.js'
import { decideSession } from '../../src/commands/session.js'
import type { StoredEvent } from '../../src/events/envelope.js'
import { sequentialIds, type IdSource } from '../../src/events/ids.js'
import type { EventStore } from '../../src/events/store.js'
import { openStore } from '../../src/projections/open.js'
import { DEFAULT_AGENTS, resolveAgents, type AgentDefinition } from '../../src/tools/agents.js'
import { createPermissionGate } from '../../src/runtime/permissions/gate.js'
import { createToolRegistry } from '../../src/runtime/tools/registry.js'
import { createLookupTool } from '../../src/tools/lookup.js'
import type { SkillSource } from '../../src/tools/skills/skills.js'
import { defineTool, ToolFailure, type PermissionGate, type Tool } from '../../src/tools/tool.js'
import type { LanguageModel } from '../../src/runtime/model/adapter.js'
import { createModelResolver, fixedModelResolver } from '../../src/runtime/model/providers.js'
import { createRuntime, type Runtime, type RuntimeDeps } from '../../src/runtime/runtime.js'
import { executeNow } from '../support/execute-now.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/** Tools the runtime tests use: a lookup, a slow tool that honours abort, a tool that throws. */
export function testTools(): Tool[] {
  const lookup = createLookupTool({ resolve: (q) => `result for ${q}` })
  const slow = defineTool({
    id: 'slow',
    description: 'Waits for the given milliseconds, then returns.',
    parameters: z.object({ ms: z.number().int().nonnegative() }),
    execute: (args, ctx) =>
      new Promise((resolve, reject) => {
        ctx.progress({ waiting: args.ms })
        const timer = setTimeout(() => resolve({ output: `waited ${args.ms}ms` }), args.ms)
        ctx.abort.addEventListener('abort', () => {
          clearTimeout(timer)
          reject(new ToolFailure('aborted', 'slow tool aborted'))
        })
      }),
  })
  const broken = defineTool({
    id: 'broken',
    description: 'Always fails.',
    parameters: z.object({}),
    async execute(): Promise<{ output: string }> {
      throw new Error('disk on fire')
    },
  })
  return [lookup, slow, broken]
}

export interface Harness {
  readonly store: EventStore
  readonly ids: IdSource
  readonly runtime: Runtime
  readonly agents: Map<string, AgentDefinition>
  readonly directory: string
  session(opts?: { model?: string | null; agent?: string }): string
  events(sessionId: string): StoredEvent[]
  types(sessionId: string, opts?: { deltas?: boolean }): string[]
  close(): Promise<void>
}

export interface HarnessOptions {
  readonly model?: LanguageModel
  readonly models?: RuntimeDeps['models']
  readonly tools?: Tool[]
  readonly permissions?: PermissionGate
  readonly agents?: Partial<AgentDefinition>[]
  readonly limits?: RuntimeDeps['limits']
  /** generated titles after a session's first exchange (default off) */
  readonly titles?: boolean
  /** paths never attached as files (the data dir, the config) */
  readonly forbidden?: readonly string[]
  /** the sessions' directory (default: a new temporary one) */
  readonly directory?: string
  /** the config's `permission.continueOnReject` (default off: a person's reject ends the run) */
  readonly continueOnReject?: boolean
  /** the skills the system prompt lists (default none) */
  readonly skills?: SkillSource
  /** (cluster) whether the node's lease runs (default: no cluster) */
  readonly leased?: () => boolean
}

/** A real store (SQLite :memory:), real registry and permission gate, a temp session directory. */
export function harness(options: HarnessOptions = {}): Harness {
  const store = openStore(':memory:')
  const ids = sequentialIds()
  const agents = resolveAgents(options.agents ?? [])
  const directory = options.directory ?? mkdtempSync(join(tmpdir(), 'chronicle-runtime-'))
  const tools = createToolRegistry({ agents, tools: options.tools ?? testTools() })
  const permissions = options.permissions ?? createPermissionGate({ ports: sqlitePorts(store), ids, agents })
  const models =
    options.models ?? (options.model ? fixedModelResolver(options.model, 'mock:model') : createModelResolver({}))
  const runtime = createRuntime({
    ports: sqlitePorts(store),
    ids,
    models,
    tools,
    permissions,
    agents,
    limits: { retry: { initialMs: 5, maxMs: 50 }, ...options.limits },
    environment: () => ({ platform: 'test', date: '2026-01-01' }),
    ...(options.titles !== undefined && { titles: options.titles }),
    ...(options.forbidden && { forbidden: options.forbidden }),
    ...(options.continueOnReject !== undefined && { continueOnReject: options.continueOnReject }),
    ...(options.skills && { skills: options.skills }),
    ...(options.leased && { leased: options.leased }),
  })
  return {
    store,
    ids,
    runtime,
    agents,
    directory,
    session(opts = {}) {
      const id = ids.next('ses')
      const command = {
        type: 'create' as const,
        directory,
        agent: opts.agent ?? 'build',
        model: opts.model === undefined ? 'mock:model' : opts.model,
      }
      executeNow(store, id, (s) => decideSession(command, s, id), { meta: { actor: 'user' } })
      return id
    },
    events: (sessionId) => store.readSession(sessionId),
    types(sessionId, opts = {}) {
      const all = store.readSession(sessionId).map((e) => e.type)
      return opts.deltas === false ? collapse(all) : all
    },
    async close() {
      await runtime.stop()
      store.close()
    },
  }
}

const DELTAS = new Set(['text.delta', 'reasoning.delta', 'tool.input.delta'])

/** Runs of the same delta type collapsed to one entry: traces independent of chunking. */
export function collapse(types: readonly string[]): string[] {
  const out: string[] = []
  for (const t of types) if (!(DELTAS.has(t) && out[out.length - 1] === t)) out.push(t)
  return out
}

export const text = (t: string) => [{ type: 'text' as const, text: t }]
export { DEFAULT_AGENTS }

/**
 * Answers every permission request of the store with `reply` (as a user would, through the decider). With `by`,
 * as a named person over the API does: the meta names who answered and the request.
 */
export function autoReply(
  h: Harness,
  reply: 'once' | 'always' | 'reject',
  message?: string,
  by?: { id: string; name: string },
): string[] {
  const asked: string[] = []
  h.store.onCommit((events) => {
    for (const e of events) {
      if (e.type !== 'permission.requested') continue
      asked.push(e.data.permission)
      const { requestId } = e.data
      setImmediate(() =>
        executeNow(
          h.store,
          e.sessionId,
          (s) =>
            decidePermission({ type: 'reply', requestId, reply, ...(message && { message }) }, s, e.sessionId, h.ids),
          { meta: { actor: 'user', ...(by && { by, request: requestId }) }, durability: 'full' },
        ),
      )
    }
  })
  return asked
}
