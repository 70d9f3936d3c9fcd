import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { decideSession } from '../../src/commands/session.js'
import type { StoredEvent } from '../../src/events/envelope.js'
import { type IdSource, sequentialIds } from '../../src/events/ids.js'
import type { EventStore } from '../../src/events/store.js'
import { openStore } from '../../src/projections/open.js'
import { fixedModelResolver } from '../../src/runtime/model/providers.js'
import { createScriptedModel, type ScriptStep } from '../../src/runtime/model/scripted-model.js'
import { createPermissionGate } from '../../src/runtime/permissions/gate.js'
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js'
import { createToolRegistry } from '../../src/runtime/tools/registry.js'
import { createWorkspaceHistory, type WorkspaceHistory } from '../../src/runtime/workspace/history.js'
import { createWorkspaceForks, type WorkspaceForks } from '../../src/runtime/workspace/forks.js'
import { createWorkspaceRestorer, type WorkspaceRestorer } from '../../src/runtime/workspace/restore.js'
import { createShadowStore, type ShadowStore } from '../../src/runtime/workspace/shadow-store.js'
import { createWorkspaceSnapshots } from '../../src/runtime/workspace/snapshots.js'
import { resolveAgents } from '../../src/tools/agents.js'
import { createBuiltinTools } from '../../src/tools/builtin/index.js'
import { executeNow } from '../support/execute-now.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/**
 * A world for workspace tests: a real git repository as the session
 * directory, the real tools driven by a scripted model, a real store and a
 * real shadow store, with the runtime recording the workspace.
 */

export interface World {
  readonly store: EventStore
  readonly runtime: Runtime
  readonly history: WorkspaceHistory
  readonly restorer: WorkspaceRestorer
  readonly forks: WorkspaceForks
  readonly ids: IdSource
  readonly shadow: ShadowStore
  readonly directory: string
  readonly dataDir: string
  /** a new session working in the world's directory, or in `directory` */
  session(directory?: string): string
  events(id: string): StoredEvent[]
  close(): Promise<void>
}

export function world(
  steps: ScriptStep[],
  options: { maxFileBytes?: number; repository?: boolean; forbidden?: string[] } = {},
): World {
  const { repository = true, forbidden, ...shadowOptions } = options
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'chronicle-workspace-')))
  const directory = join(root, 'repo')
  const dataDir = join(root, 'data')
  mkdirSync(directory)
  if (repository) execFileSync('git', ['init', '-q'], { cwd: directory })
  writeFileSync(join(directory, '.gitignore'), 'build/\n')
  writeFileSync(join(directory, 'README.md'), '# demo\n')
  const store = openStore(join(root, 'chronicle.db'))
  const ids = sequentialIds()
  const agents = resolveAgents([], [{ permission: '*', pattern: '*', action: 'allow' }])
  const shadow = createShadowStore({ root: join(dataDir, 'workspaces'), globalExcludes: null, ...shadowOptions })
  const tools = createToolRegistry({
    agents,
    tools: createBuiltinTools({ dataDir, updateTodos: () => undefined }),
  })
  const runtime = createRuntime({
    ports: sqlitePorts(store),
    ids,
    models: fixedModelResolver(createScriptedModel({ steps, uniqueCallIds: true }), 'mock:model'),
    tools,
    permissions: createPermissionGate({ ports: sqlitePorts(store), ids, agents }),
    agents,
    workspace: createWorkspaceSnapshots({ ports: sqlitePorts(store), shadow }),
    environment: () => ({ platform: 'test', date: '2026-01-01' }),
  })
  return {
    store,
    runtime,
    history: createWorkspaceHistory(sqlitePorts(store), shadow),
    restorer: createWorkspaceRestorer({ ports: sqlitePorts(store), shadow, ids }),
    forks: createWorkspaceForks({
      ports: sqlitePorts(store),
      ids,
      shadow,
      forksDir: join(dataDir, 'forks'),
      forbidden: forbidden ?? [dataDir],
    }),
    ids,
    shadow,
    directory,
    dataDir,
    session(within = directory) {
      const id = ids.next('ses')
      executeNow(
        store,
        id,
        (s) => decideSession({ type: 'create', directory: within, agent: 'build', model: 'mock:model' }, s, id),
        {
          meta: { actor: 'user' },
        },
      )
      return id
    },
    events: (id) => store.readSession(id),
    async close() {
      await runtime.stop()
      shadow.close()
      store.close()
    },
  }
}

export const write = (filePath: string, content: string) => ({ name: 'write', input: { filePath, content } })
export const bash = (command: string) => ({ name: 'bash', input: { command } })

/** The model makes one round of tool calls per prompt keyword, then answers. */
export function script(rounds: Record<string, { name: string; input: Record<string, unknown> }[]>): ScriptStep[] {
  return [
    ...Object.entries(rounds).map(([keyword, toolCalls]) => ({
      when: { userContains: keyword, afterToolResult: false },
      toolCalls,
    })),
    { when: { afterToolResult: true }, text: 'done' },
  ]
}

/** Submits a prompt and waits for the run it starts to end. */
export async function prompt(w: World, id: string, text: string): Promise<void> {
  await w.runtime.submit(id, { parts: [{ type: 'text', text }] })
  await w.runtime.settled(id)
}
