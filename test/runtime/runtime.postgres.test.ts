import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { execute } from '../../src/commands/execute.js'
import { decidePermission } from '../../src/commands/permission.js'
import { fork } from '../../src/commands/fork.js'
import { decideSession } from '../../src/commands/session.js'
import { type IdSource, sequentialIds } from '../../src/events/ids.js'
import type { PostgresEventLog } from '../../src/events/postgres/log.js'
import { openPostgresStore } from '../../src/projections/postgres/open.js'
import { postgresPorts, type StorePorts } from '../../src/projections/store-ports.js'
import { audit } from '../../src/runtime/audit/audit.js'
import { fixedModelResolver } from '../../src/runtime/model/providers.js'
import { createScriptedModel, type ScriptStep } from '../../src/runtime/model/scripted-model.js'
import { createPermissionGate } from '../../src/runtime/permissions/gate.js'
import { continueRecovered, recoverSessions } from '../../src/runtime/recovery/recovery.js'
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js'
import { createToolRegistry } from '../../src/runtime/tools/registry.js'
import { createSubagents } from '../../src/runtime/subagents/subagents.js'
import { resolveAgents } from '../../src/tools/agents.js'
import { createTaskTool } from '../../src/tools/builtin/task.js'
import { createBuiltinTools } from '../../src/tools/builtin/index.js'
import { defineTool, type Tool } from '../../src/tools/tool.js'
import { usePostgres } from '../support/use-postgres.js'
import { collapse, testTools } from './helpers.js'

/**
 * The agent runtime on PostgreSQL (docs/ARCHITECTURE.md "The store port"): the same loop, tools,
 * permission gate, sub-agents and recovery as on SQLite, reading and appending only through the
 * ports, on a real server.
 */

const server = usePostgres()

/** asks for `edit` on its path before it answers: the build agent asks a person for edits */
const guarded = defineTool({
  id: 'guarded',
  description: 'Asks to edit a path, then says it did.',
  parameters: z.object({ path: z.string() }),
  async execute(args, ctx) {
    await ctx.ask({ permission: 'edit', patterns: [args.path] })
    return { output: `edited ${args.path}` }
  },
})

interface World {
  readonly log: PostgresEventLog
  readonly ports: StorePorts
  readonly directory: string
  readonly ids: IdSource
  runtime: Runtime
  start(): Runtime
  session(): Promise<string>
  types(sessionId: string): Promise<string[]>
  close(): Promise<void>
}

const worlds: World[] = []
afterEach(async () => {
  for (const w of worlds.splice(0)) await w.close()
})

async function world(steps: ScriptStep[], extra: Tool[] = []): Promise<World> {
  const log = await openPostgresStore(await server().database())
  const ports = postgresPorts(log)
  const ids = sequentialIds()
  const agents = resolveAgents([])
  const directory = mkdtempSync(join(tmpdir(), 'chronicle-runtime-pg-'))
  const dataDir = mkdtempSync(join(tmpdir(), 'chronicle-runtime-pg-data-'))
  writeFileSync(join(directory, 'notes.md'), 'The log is the truth.\n')
  const model = createScriptedModel({ uniqueCallIds: true, steps })
  let runtime: Runtime | undefined
  const subagents = createSubagents({ ports, ids, agents, runtime: () => runtime as Runtime })
  const tools = [
    ...createBuiltinTools({ dataDir, updateTodos: () => {} }),
    ...testTools(),
    guarded,
    createTaskTool({ agents, run: (r) => subagents.run(r), start: (r) => subagents.start(r) }),
    ...extra,
  ]
  const start = () =>
    createRuntime({
      ports,
      ids,
      models: fixedModelResolver(model, 'mock:model'),
      tools: createToolRegistry({ agents, tools }),
      permissions: createPermissionGate({ ports, ids, agents }),
      agents,
      environment: () => ({ platform: 'test', date: '2026-12-06' }),
    })
  runtime = start()
  const w: World = {
    log,
    ports,
    directory,
    ids,
    runtime,
    start() {
      runtime = start()
      w.runtime = runtime
      return runtime
    },
    async session() {
      const id = ids.next('ses')
      const create = { type: 'create' as const, directory, agent: 'build', model: 'mock:model' }
      await execute(ports, id, (s) => decideSession(create, s, id), { meta: { actor: 'user' } })
      return id
    },
    types: async (sessionId) => collapse((await log.readSession(sessionId)).map((e) => e.type)),
    async close() {
      await runtime?.stop()
      await log.close()
      rmSync(directory, { recursive: true, force: true })
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
  worlds.push(w)
  return w
}

const prompt = (text: string) => ({ parts: [{ type: 'text' as const, text }] })

describe('the runtime on PostgreSQL', () => {
  it('commits a turn as on SQLite: the run’s start with its delivery, a quick call’s start with its end', async () => {
    // Neither waits on a read of the store between the two: the rejections' watch is set before run.started
    // is queued, and the permission check takes the session from the loop's view.
    const w = await world([
      { when: { afterToolResult: true }, text: 'Rome.' },
      { when: { afterToolResult: false }, toolCalls: [{ name: 'lookup', input: { query: 'rome' } }] },
    ])
    const id = await w.session()
    const commits: string[][] = []
    w.log.onCommit((events) => commits.push(events.filter((e) => e.sessionId === id).map((e) => e.type)))
    await w.runtime.submit(id, prompt('rome?'))
    await w.runtime.idle(id)
    expect(commits.find((types) => types.includes('run.started'))?.slice(0, 2)).toEqual([
      'run.started',
      'input.delivered',
    ])
    expect(commits.find((types) => types.includes('tool.called'))).toEqual(['tool.called', 'tool.completed'])
  })

  it('runs a turn: the input accepted, a file read by the model, the answer streamed; log and read model agree', async () => {
    const w = await world([
      { when: { afterToolResult: true }, text: 'The notes say the log is the truth.' },
      { when: { afterToolResult: false }, toolCalls: [{ name: 'read', input: { filePath: 'notes.md' } }] },
    ])
    const id = await w.session()
    const { inputId, duplicate } = await w.runtime.submit(id, { inputId: 'in_1', ...prompt('what do the notes say?') })
    expect(duplicate).toBe(false)
    await w.runtime.idle(id)

    expect(await w.types(id)).toEqual([
      'session.created',
      'input.accepted',
      'run.started',
      'input.delivered',
      'message.created',
      'step.started',
      'tool.input.started',
      'tool.input.delta',
      'step.finished',
      'message.completed',
      'tool.called',
      'tool.completed',
      'message.created',
      'step.started',
      'text.started',
      'text.delta',
      'text.ended',
      'step.finished',
      'message.completed',
      'run.finished',
    ])
    const events = await w.log.readSession(id)
    expect(events.map((e) => e.version)).toEqual(events.map((_, i) => i + 1))
    const view = await w.ports.readModels.view(id)
    expect(view.session?.version).toBe(events.length)
    expect(view.session?.run).toBeNull()
    expect(view.session?.lastRun?.outcome).toBe('idle')
    const parts = [...view.parts.values()]
    expect(parts.find((p) => p.type === 'tool')).toMatchObject({ state: 'completed' })
    expect(parts.find((p) => p.type === 'text' && p.text.includes('the log is the truth'))).toBeDefined()
    // the same input again is the same acceptance, not a second turn
    expect(await w.runtime.submit(id, { inputId, ...prompt('what do the notes say?') })).toMatchObject({
      duplicate: true,
    })
  })

  it('a call that asks waits for a person’s reply, appended as a command, then runs', async () => {
    const w = await world([
      { when: { afterToolResult: true }, text: 'Done.' },
      { when: { afterToolResult: false }, toolCalls: [{ name: 'guarded', input: { path: 'a.txt' } }] },
    ])
    const id = await w.session()
    await w.runtime.submit(id, prompt('edit a.txt'))
    let requestId: string | undefined
    for (let i = 0; i < 200 && !requestId; i++) {
      requestId = (await w.ports.readModels.session(id))?.pendingPermissions[0]?.requestId
      if (!requestId) await new Promise((r) => setTimeout(r, 25))
    }
    expect(requestId).toBeDefined()
    expect(w.runtime.isRunning(id)).toBe(true)
    await execute(
      w.ports,
      id,
      (s) => decidePermission({ type: 'reply', requestId: requestId as string, reply: 'once' }, s, id, sequentialIds()),
      { meta: { actor: 'user' }, durability: 'full' },
    )
    await w.runtime.idle(id)
    const view = await w.ports.readModels.view(id)
    expect([...view.parts.values()].find((p) => p.type === 'tool')).toMatchObject({
      state: 'completed',
      output: 'edited a.txt',
    })
    expect(view.session?.pendingPermissions).toEqual([])
    expect(await w.types(id)).toContain('permission.replied')
  })

  it('the context at a step is the request that step recorded, the context now compiles from the read model, and audit agrees', async () => {
    const w = await world([{ text: 'Hello.' }])
    const id = await w.session()
    await w.runtime.submit(id, prompt('hi'))
    await w.runtime.idle(id)
    const step = (await w.log.readSessionOfType(id, 'step.started'))[0]
    if (step?.type !== 'step.started') throw new Error('no step')
    const sent = await w.runtime.context(id, step.seq)
    expect(sent.digest).toBe(step.data.contextDigest)
    expect(sent.step?.seq).toBe(step.seq)
    expect(JSON.stringify(sent.messages)).toContain('hi')
    const now = await w.runtime.context(id)
    expect(JSON.stringify(now.messages)).toContain('Hello.')
    // a fork at the end of the turn runs a turn of its own on the inherited history
    const forked = await fork(w.ports, w.ids, id, (await w.log.readSession(id)).at(-1)?.seq as number)
    await w.runtime.submit(forked.id, prompt('hi again'))
    await w.runtime.idle(forked.id)
    const again = (await w.runtime.context(forked.id)).messages
    expect(JSON.stringify(again)).toMatch(/hi[\s\S]*Hello\.[\s\S]*hi again/)
    // and `chronicle audit` rebuilds every step's request from PostgreSQL's log alone, the fork's on its parent's
    expect(await audit(w.ports, 'all')).toMatchObject({ sessions: 2, steps: 2, verified: 2, mismatches: [] })
  })

  it('a sub-agent runs in a child session; its answer comes back to the parent’s call', async () => {
    const w = await world([
      { when: { userContains: 'CHILD' }, text: 'child answer' },
      { when: { afterToolResult: true }, text: 'The child said so.' },
      {
        when: { afterToolResult: false, userContains: 'delegate' },
        toolCalls: [{ name: 'task', input: { description: 'look', prompt: 'CHILD: look', subagent_type: 'general' } }],
      },
    ])
    const id = await w.session()
    await w.runtime.submit(id, prompt('delegate this'))
    await w.runtime.idle(id)
    const parts = await w.ports.readModels.parts(id)
    const link = parts.find((p) => p.type === 'subtask')
    expect(link).toMatchObject({ outcome: 'idle' })
    const child = link?.type === 'subtask' ? link.childSessionId : ''
    expect((await w.ports.readModels.session(child))?.parent?.sessionId).toBe(id)
    expect(parts.find((p) => p.type === 'tool' && p.tool === 'task')).toMatchObject({ state: 'completed' })
    expect(JSON.stringify(parts)).toContain('child answer')
    expect(await audit(w.ports, 'all')).toMatchObject({ sessions: 2, steps: 3, verified: 3, mismatches: [] })
  })

  it('a run stopped mid-tool is settled by recovery and continued by a new runtime', async () => {
    const w = await world([
      { when: { afterToolResult: true }, text: 'Waited.' },
      { when: { afterToolResult: false }, toolCalls: [{ name: 'slow', input: { ms: 60_000 } }] },
    ])
    const id = await w.session()
    await w.runtime.submit(id, prompt('wait'))
    for (let i = 0; i < 200 && !(await w.types(id)).includes('tool.called'); i++)
      await new Promise((r) => setTimeout(r, 25))
    await w.runtime.stop() // a shutdown: the run stays open for recovery
    expect((await w.ports.readModels.session(id))?.run).not.toBeNull()

    const report = await recoverSessions(w.ports)
    expect(report.resumed.map((r) => r.sessionId)).toEqual([id])
    const runtime = w.start()
    await continueRecovered(report, runtime)
    await runtime.idle(id)
    const session = await w.ports.readModels.session(id)
    expect(session?.run).toBeNull()
    expect(session?.lastRun?.outcome).toBe('idle')
    const types = await w.types(id)
    expect(types).toContain('run.resumed')
    expect(types.at(-1)).toBe('run.finished')
    const tool = (await w.ports.readModels.parts(id)).find((p) => p.type === 'tool')
    expect(tool).toMatchObject({ state: 'error', error: { kind: 'interrupted' } })
  })

  /**
   * What the restarted server does before it takes a command: recovery resumed the run, and continueRecovered
   * holds it. The server's first command for the session then finds the run the runtime's — the crash harness
   * on PostgreSQL (npm run test:crash -- --store postgres) caught both commands landing while a resumed run was
   * not held yet: the cancel went unheard (the run ended `idle`), the input started a second run over the open
   * one, which never ended.
   */
  describe('a resumed run is held before the server takes a command', () => {
    const script: ScriptStep[] = [
      { when: { userContains: 'wait', afterToolResult: false }, toolCalls: [{ name: 'slow', input: { ms: 60_000 } }] },
      { when: { afterToolResult: true }, text: 'Waited.' },
      { when: { userContains: 'and then' }, text: 'Then.' },
    ]
    /** a run stopped mid-tool (a shutdown: left open), settled by recovery; the report and the run's id */
    const stoppedMidTool = async (w: World, queued?: string) => {
      const id = await w.session()
      await w.runtime.submit(id, prompt('wait'))
      for (let i = 0; i < 200 && !(await w.types(id)).includes('tool.called'); i++)
        await new Promise((r) => setTimeout(r, 25))
      if (queued) await w.runtime.submit(id, { ...prompt(queued), delivery: 'queue' })
      await w.runtime.stop()
      const report = await recoverSessions(w.ports)
      expect(report.resumed.map((r) => r.sessionId)).toEqual([id])
      return { id, report, runId: report.resumed[0]?.runId }
    }
    /** each run event of the session: type, run, and a run's outcome */
    const runs = async (w: World, id: string) =>
      (await w.log.readSession(id)).flatMap((e) =>
        e.type === 'run.started' || e.type === 'run.resumed' || e.type === 'run.cancel.requested'
          ? [`${e.type} ${e.data.runId}`]
          : e.type === 'run.finished'
            ? [`${e.type} ${e.data.runId} ${e.data.outcome}`]
            : [],
      )

    it('input that comes first joins the resumed run: it delivers the input, and no second run starts over it', async () => {
      const w = await world(script)
      const { id, report, runId } = await stoppedMidTool(w, 'and then')
      const runtime = w.start()
      const continued = continueRecovered(report, runtime)
      runtime.wake(id) // the server's first command: input for the session (a submit ends in this wake)
      await continued
      await runtime.idle(id)
      expect(await runs(w, id)).toEqual([`run.started ${runId}`, `run.resumed ${runId}`, `run.finished ${runId} idle`])
      const view = await w.ports.readModels.view(id)
      expect(view.session).toMatchObject({ run: null, inbox: [] })
      expect([...view.parts.values()].flatMap((p) => (p.type === 'text' ? [p.text] : []))).toEqual([
        'wait',
        'and then',
        'Then.',
      ])
    })

    it('a cancel that comes first ends the resumed run cancelled, and the model is not asked again', async () => {
      const w = await world(script)
      const { id, report, runId } = await stoppedMidTool(w)
      const runtime = w.start()
      const continued = continueRecovered(report, runtime)
      expect(await runtime.cancel(id)).toEqual({ cancelled: true }) // the server's first command
      await continued
      await runtime.idle(id)
      expect(await runs(w, id)).toEqual([
        `run.started ${runId}`,
        `run.resumed ${runId}`,
        `run.cancel.requested ${runId}`,
        `run.finished ${runId} cancelled`,
      ])
      const view = await w.ports.readModels.view(id)
      expect([...view.parts.values()].flatMap((p) => (p.type === 'text' ? [p.text] : []))).toEqual(['wait'])
    })
  })
})
