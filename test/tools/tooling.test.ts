import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { execute } from '../../src/commands/execute.js'
import { decideSession } from '../../src/commands/session.js'
import { sequentialIds } from '../../src/events/ids.js'
import type { EventStore } from '../../src/events/store.js'
import { openStore } from '../../src/projections/open.js'
import { getSession } from '../../src/projections/queries/read-model.js'
import { compileContext } from '../../src/runtime/loop/context.js'
import { createTooling, type McpServerStatus, type Tooling } from '../../src/runtime/tools/tooling.js'
import { tempDir } from './helpers.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

const EVERYTHING = join(process.cwd(), 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')

describe('createTooling (the composition root helper)', () => {
  let tooling: Tooling
  let store: EventStore
  let tmp: ReturnType<typeof tempDir>
  afterEach(async () => {
    await tooling.close()
    store.close()
    tmp.cleanup()
  })

  it('builds agents, gate and a registry of built-ins plus MCP tools; todowrite records todo.updated', async () => {
    tmp = tempDir()
    store = openStore(':memory:')
    const statuses: McpServerStatus[] = []
    tooling = createTooling({
      ports: sqlitePorts(store),
      ids: sequentialIds(),
      dataDir: join(tmp.dir, 'data'),
      rules: [{ permission: 'everything_*', pattern: '*', action: 'deny' }],
      agents: [{ name: 'build', rules: [{ permission: 'everything_echo', pattern: '*', action: 'allow' }] }],
      mcp: [
        { name: 'everything', type: 'local', command: [process.execPath, EVERYTHING, 'stdio'], environment: {} },
        { name: 'broken', type: 'local', command: ['/nonexistent/server'], environment: {} },
      ],
      onMcpStatus: (s) => statuses.push(s),
    })
    await tooling.start()
    expect(tooling.mcp.status().map((s) => [s.name, s.state])).toEqual([
      ['everything', 'connected'],
      ['broken', 'failed'],
    ])
    // Only the broken server failed. It may have failed twice: the manager tries a failed server again after
    // about a second, and on a loaded machine the other one's start can take that long (a CI run saw it).
    expect([...new Set(statuses.filter((s) => s.state === 'failed').map((s) => s.name))]).toEqual(['broken'])

    await execute(
      sqlitePorts(store),
      'ses_1',
      (s) => decideSession({ type: 'create', directory: tmp.dir, agent: 'build', model: null }, s, 'ses_1'),
      {
        meta: { actor: 'user' },
      },
    )
    const offered = (await tooling.registry.tools({ sessionId: 'ses_1', agent: 'build' })).map((t) => t.id)
    // the global deny hides every everything_* tool except echo, which build's own config re-allows
    expect(offered).toEqual([
      'bash',
      'read',
      'glob',
      'grep',
      'list',
      'edit',
      'write',
      'multiedit',
      'apply_patch',
      'todowrite',
      'webfetch',
      'everything_echo',
    ])

    const todowrite = tooling.registry.all().find((t) => t.id === 'todowrite')
    const items = [{ content: 'ship it', status: 'pending' as const, priority: 'high' as const }]
    await todowrite?.execute(
      { todos: items },
      {
        sessionId: 'ses_1',
        messageId: 'msg_1',
        callId: 'call_1',
        partId: 'prt_1',
        agent: 'build',
        directory: tmp.dir,
        abort: new AbortController().signal,
        progress: () => {},
        ask: () => Promise.resolve(),
        check: () => 'allow' as const,
      },
    )
    expect(store.readSession('ses_1').map((e) => e.type)).toEqual(['session.created', 'todo.updated'])
    expect(getSession(store, 'ses_1')?.todos).toEqual(items)

    // What the connected server asks of the model reaches the system prompt (docs/TRACES.md).
    const served = tooling.mcp.instructions()
    expect(served.map((i) => i.server)).toEqual(['everything'])
    const context = await compileContext(sqlitePorts(store), 'ses_1', undefined, {
      agents: tooling.agents,
      tools: tooling.registry,
      serverInstructions: () => tooling.mcp.instructions(),
    })
    expect(context.system).toContain(`Instructions from MCP server everything:\n${served[0]?.text.slice(0, 200)}`)
  })
})
