import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { execute } from '../../src/commands/execute.js'
import { decideSession } from '../../src/commands/session.js'
import type { DataOf } from '../../src/events/catalogue.js'
import { sequentialIds } from '../../src/events/ids.js'
import type { PostgresEventLog } from '../../src/events/postgres/log.js'
import { openPostgresStore } from '../../src/projections/postgres/open.js'
import { postgresPorts } from '../../src/projections/store-ports.js'
import { fixedModelResolver } from '../../src/runtime/model/providers.js'
import { createScriptedModel } from '../../src/runtime/model/scripted-model.js'
import { createPermissionGate } from '../../src/runtime/permissions/gate.js'
import { createRuntime } from '../../src/runtime/runtime.js'
import { createToolRegistry } from '../../src/runtime/tools/registry.js'
import { createWorkspaceForks } from '../../src/runtime/workspace/forks.js'
import { createWorkspaceRestorer } from '../../src/runtime/workspace/restore.js'
import { createShadowStore } from '../../src/runtime/workspace/shadow-store.js'
import { createWorkspaceSnapshots } from '../../src/runtime/workspace/snapshots.js'
import { resolveAgents } from '../../src/tools/agents.js'
import { createBuiltinTools } from '../../src/tools/builtin/index.js'
import { usePostgres } from '../support/use-postgres.js'
import { hashTree, tempDir } from './helpers.js'
import { describeWorkspaceContract } from './workspace-contract.js'
import { script, write } from './world.js'

/**
 * The workspace's history over the store's ports on a real PostgreSQL server (`npm run test:postgres`): a new
 * database per test; a restart kills the server (`pg_ctl stop -m immediate`) and starts it again.
 */
const server = usePostgres()

describeWorkspaceContract('PostgreSQL', async () => {
  const url = await server().database()
  let log: PostgresEventLog = await openPostgresStore(url)
  return {
    ports: postgresPorts(log),
    async restart() {
      await server().crash()
      await log.close().catch(() => undefined)
      await server().restart()
      log = await openPostgresStore(url)
      return postgresPorts(log)
    },
    close: () => log.close(),
  }
})

describe('the workspace recorded by a run on PostgreSQL', () => {
  it("a run's step and tool snapshots, then a revert to before it and a fork with its files", async () => {
    const log = await openPostgresStore(await server().database())
    const { dir: root, cleanup } = tempDir('pg-runtime')
    const ports = postgresPorts(log)
    const ids = sequentialIds()
    const directory = join(root, 'repo')
    mkdirSync(directory)
    writeFileSync(join(directory, 'README.md'), '# demo\n')
    const shadow = createShadowStore({ root: join(root, 'workspaces'), globalExcludes: null })
    const agents = resolveAgents([], [{ permission: '*', pattern: '*', action: 'allow' }])
    const runtime = createRuntime({
      ports,
      ids,
      models: fixedModelResolver(
        createScriptedModel({ steps: script({ first: [write('a.txt', 'first\n')] }), uniqueCallIds: true }),
        'mock:model',
      ),
      tools: createToolRegistry({
        agents,
        tools: createBuiltinTools({ dataDir: join(root, 'data'), updateTodos: () => undefined }),
      }),
      permissions: createPermissionGate({ ports, ids, agents }),
      agents,
      workspace: createWorkspaceSnapshots({ ports, shadow }),
      environment: () => ({ platform: 'test', date: '2026-12-06' }),
    })
    try {
      const id = ids.next('ses')
      const create = { type: 'create' as const, directory, agent: 'build', model: 'mock:model' }
      await execute(ports, id, (s) => decideSession(create, s, id), { meta: { actor: 'user' } })
      const before = hashTree(directory)
      const created = (await log.readSession(id)).at(-1)?.seq as number
      await runtime.submit(id, { parts: [{ type: 'text', text: 'first' }] })
      await runtime.settled(id)

      const snapshots = (await log.readSessionOfType(id, 'workspace.snapshotted')).map(
        (e) => e.data as DataOf<'workspace.snapshotted'>,
      )
      // the first step's baseline, the write, and the answer's step (nothing changed: nothing recorded)
      expect(snapshots.map((s) => [s.reason, s.changed.map((c) => c.path)])).toEqual([
        ['step', []],
        ['tool', ['a.txt']],
      ])
      const after = hashTree(directory)

      const forks = createWorkspaceForks({ ports, ids, shadow, forksDir: join(root, 'forks') })
      const child = await forks.fork(id, created)
      expect(hashTree(child.directory)).toEqual(before)
      await createWorkspaceRestorer({ ports, shadow, ids }).revert(id, created)
      expect(hashTree(directory)).toEqual(before)
      expect(hashTree(directory)).not.toEqual(after)
      expect(readFileSync(join(directory, 'README.md'), 'utf8')).toBe('# demo\n')
    } finally {
      await runtime.stop()
      await log.close()
      shadow.close()
      cleanup()
    }
  })
})
