import { type ChildProcess, spawn } from 'node:child_process'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { execute } from '../../src/commands/execute.js'
import { decidePermission } from '../../src/commands/permission.js'
import { getSession, requireSession } from '../../src/projections/queries/read-model.js'
import { resolveAgents } from '../../src/tools/agents.js'
import { mcpToolName, parseMcpConfig } from '../../src/tools/mcp/config.js'
import { createMcpManager, type McpManager } from '../../src/tools/mcp/manager.js'
import type { McpServerStatus } from '../../src/tools/mcp/server.js'
import { createToolRegistry } from '../../src/runtime/tools/registry.js'
import type { Tool } from '../../src/tools/tool.js'
import { freePort } from '../http/helpers.js'
import { type Fixture, fixture, tempDir } from './helpers.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/** marks the hung server's process, to find it afterwards */
const SILENT = `chronicle-silent-mcp-${process.pid}`
const EVERYTHING = join(process.cwd(), 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')
const FILESYSTEM = join(process.cwd(), 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js')
const PAGED = join(process.cwd(), 'test/tools/fixtures/paged-server.mjs')
const allowAll = [{ permission: '*', pattern: '*', action: 'allow' as const }]

const byId = (tools: readonly Tool[], id: string): Tool => {
  const t = tools.find((x) => x.id === id)
  if (!t) throw new Error(`no tool ${id} in ${tools.map((x) => x.id).join(', ')}`)
  return t
}

/** Runs a tool the way the runtime does: validate with its zod schema, then execute. */
async function run(tool: Tool, args: unknown, f: Fixture, abort?: AbortSignal) {
  const parsed = tool.parameters.parse(args)
  return tool.execute(parsed, f.ctx(abort ? { abort } : {}))
}

describe('MCP configuration', () => {
  it('accepts the OpenCode and the Claude Desktop shapes as one list', () => {
    expect(
      parseMcpConfig({
        mcp: {
          everything: {
            type: 'local',
            command: ['npx', '@modelcontextprotocol/server-everything'],
            environment: { A: '1' },
          },
          docs: { type: 'remote', url: 'http://127.0.0.1:3001/mcp', headers: { Authorization: 'Bearer x' } },
          off: { type: 'local', command: ['x'], enabled: false },
        },
        mcpServers: {
          fs: { command: 'npx', args: ['@modelcontextprotocol/server-filesystem', '/srv/repo'], env: { B: '2' } },
        },
      }),
    ).toEqual([
      {
        name: 'everything',
        type: 'local',
        command: ['npx', '@modelcontextprotocol/server-everything'],
        environment: { A: '1' },
      },
      { name: 'docs', type: 'remote', url: 'http://127.0.0.1:3001/mcp', headers: { Authorization: 'Bearer x' } },
      {
        name: 'fs',
        type: 'local',
        command: ['npx', '@modelcontextprotocol/server-filesystem', '/srv/repo'],
        environment: { B: '2' },
      },
    ])
    expect(() =>
      parseMcpConfig({ mcp: { a: { type: 'local', command: ['x'] } }, mcpServers: { a: { command: 'y' } } }),
    ).toThrow(/twice/)
  })

  it('names tools <server>_<tool>, sanitised to [a-zA-Z0-9_-]', () => {
    expect(mcpToolName('my server', 'get-sum')).toBe('my_server_get-sum')
    expect(mcpToolName('fs', 'dotted.name/x')).toBe('fs_dotted_name_x')
  })
})

describe('MCP client against the reference servers', () => {
  let tmp: ReturnType<typeof tempDir>
  let f: Fixture
  let manager: McpManager | undefined
  let http: ChildProcess | undefined
  let port = 0

  beforeAll(async () => {
    port = await freePort()
    http = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], {
      env: { ...process.env, PORT: String(port) },
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('everything server did not start')), 15_000)
      http?.stderr?.on('data', (d: Buffer) => {
        if (d.toString().includes('listening')) {
          clearTimeout(timer)
          resolve()
        }
      })
    })
  })
  afterAll(() => {
    http?.kill('SIGKILL')
  })
  afterEach(async () => {
    await manager?.close()
    manager = undefined
    f.gate.close()
    f.store.close()
    tmp.cleanup()
  })

  const setup = async (servers: Parameters<typeof createMcpManager>[0], statuses?: McpServerStatus[]) => {
    tmp = tempDir()
    f = fixture({ directory: tmp.dir, agentRules: allowAll })
    manager = createMcpManager(servers, {
      directory: tmp.dir,
      dataDir: join(tmp.dir, '.data'),
      connectTimeoutMs: 15_000,
      ...(statuses && { onStatus: (s) => statuses.push(s) }),
    })
    await manager.start()
    return manager
  }

  it('server-everything over stdio: echo, get-sum, get-tiny-image → an image attachment', async () => {
    const m = await setup([
      { name: 'everything', type: 'local', command: [process.execPath, EVERYTHING, 'stdio'], environment: {} },
    ])
    expect(m.status()).toMatchObject([{ name: 'everything', state: 'connected', transport: 'stdio' }])
    const tools = m.tools()
    expect(tools.map((t) => t.id)).toEqual(
      expect.arrayContaining(['everything_echo', 'everything_get-sum', 'everything_get-tiny-image']),
    )
    expect((await run(byId(tools, 'everything_echo'), { message: 'hi' }, f)).output).toBe('Echo: hi')
    expect((await run(byId(tools, 'everything_get-sum'), { a: 2, b: 40 }, f)).output).toContain('42')
    const image = await run(byId(tools, 'everything_get-tiny-image'), {}, f)
    expect(image.attachments).toEqual([
      { type: 'image', mediaType: 'image/png', data: expect.stringMatching(/^iVBOR/) },
    ])
    // arguments are validated with the server's own schema, turned into zod
    expect(byId(tools, 'everything_get-sum').parameters.safeParse({ a: 'x', b: 1 }).success).toBe(false)
  })

  it('server-everything over Streamable HTTP', async () => {
    const m = await setup([{ name: 'remote', type: 'remote', url: `http://127.0.0.1:${port}/mcp`, headers: {} }])
    expect(m.status()).toMatchObject([{ name: 'remote', state: 'connected', transport: 'streamable-http' }])
    const tools = m.tools()
    expect((await run(byId(tools, 'remote_echo'), { message: 'over http' }, f)).output).toBe('Echo: over http')
    expect((await run(byId(tools, 'remote_get-sum'), { a: 1, b: 2 }, f)).output).toContain('3')
    const image = await run(byId(tools, 'remote_get-tiny-image'), {}, f)
    expect(image.attachments?.map((a) => [a.type, a.mediaType])).toEqual([['image', 'image/png']])
  })

  it('a remote URL that only speaks the legacy HTTP+SSE transport falls back to SSE', async () => {
    const ssePort = await freePort()
    const sse = spawn(process.execPath, [EVERYTHING, 'sse'], {
      env: { ...process.env, PORT: String(ssePort) },
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('sse server did not start')), 15_000)
        sse.stderr?.on('data', (d: Buffer) => {
          if (/listening|running on port/i.test(d.toString())) {
            clearTimeout(timer)
            resolve()
          }
        })
      })
      const m = await setup([{ name: 'legacy', type: 'remote', url: `http://127.0.0.1:${ssePort}/sse`, headers: {} }])
      expect(m.status()).toMatchObject([{ name: 'legacy', state: 'connected', transport: 'sse' }])
      expect((await run(byId(m.tools(), 'legacy_echo'), { message: 'old school' }, f)).output).toBe('Echo: old school')
    } finally {
      sse.kill('SIGKILL')
    }
  })

  it('server-filesystem over stdio: reads inside its root; an isError result is a failed call the model sees', async () => {
    tmp = tempDir()
    writeFileSync(join(tmp.dir, 'hello.txt'), 'hello from disk')
    const dir = tmp.dir
    f = fixture({ directory: dir, agentRules: allowAll })
    manager = createMcpManager(
      [{ name: 'fs', type: 'local', command: [process.execPath, FILESYSTEM, dir], environment: {} }],
      { connectTimeoutMs: 15_000 },
    )
    await manager.start()
    const tools = manager.tools()
    expect((await run(byId(tools, 'fs_read_text_file'), { path: join(dir, 'hello.txt') }, f)).output).toBe(
      'hello from disk',
    )
    await expect(run(byId(tools, 'fs_read_text_file'), { path: '/etc/hostname' }, f)).rejects.toMatchObject({
      name: 'ToolFailure',
      kind: 'failed',
      message: expect.stringContaining('Access denied'),
    })
  })

  it('MCP calls go through the permission gate: the permission is the tool name', async () => {
    const m = await setup([
      { name: 'everything', type: 'local', command: [process.execPath, EVERYTHING, 'stdio'], environment: {} },
    ])
    const g = fixture({ directory: tmp.dir, rules: [{ permission: 'everything_echo', pattern: '*', action: 'deny' }] })
    await expect(run(byId(m.tools(), 'everything_echo'), { message: 'x' }, g)).rejects.toMatchObject({ kind: 'denied' })
    // the build agent allows other tools ('*' allow), so get-sum runs without asking
    expect((await run(byId(m.tools(), 'everything_get-sum'), { a: 1, b: 1 }, g)).output).toContain('2')
    expect(g.requested()).toEqual([])
    // and a registry hides a tool whose rules deny everything
    const registry = createToolRegistry({ agents: resolveAgents(), tools: [], mcp: m })
    const { rules } = requireSession(g.store, g.sessionId)
    const offered = (await registry.tools({ sessionId: g.sessionId, agent: 'build', rules })).map((t) => t.id)
    expect(offered).not.toContain('everything_echo')
    expect(offered).toContain('everything_get-sum')
    g.gate.close()
    g.store.close()
  })

  it('a server killed mid-call fails that call; its status says so and other servers go on', async () => {
    const statuses: McpServerStatus[] = []
    const m = await setup(
      [
        { name: 'victim', type: 'local', command: [process.execPath, EVERYTHING, 'stdio'], environment: {} },
        { name: 'other', type: 'remote', url: `http://127.0.0.1:${port}/mcp`, headers: {} },
      ],
      statuses,
    )
    const victim = m.status().find((s) => s.name === 'victim')
    expect(victim?.state).toBe('connected')
    const long = run(byId(m.tools(), 'victim_trigger-long-running-operation'), { duration: 20, steps: 20 }, f).catch(
      (e) => e,
    )
    await new Promise((r) => setTimeout(r, 500))
    process.kill(victim?.pid as number, 'SIGKILL')
    const err = await long
    expect(err).toMatchObject({ name: 'ToolFailure', kind: 'failed' })
    expect(err.message).toMatch(/^The MCP server "victim" failed during trigger-long-running-operation: /)
    expect(m.status().find((s) => s.name === 'victim')).toMatchObject({ state: 'failed', tools: 0 })
    expect(statuses.at(-1)).toMatchObject({
      name: 'victim',
      state: 'failed',
      error: expect.stringContaining('closed the connection'),
    })
    expect(m.tools().some((t) => t.id.startsWith('victim_'))).toBe(false)
    expect((await run(byId(m.tools(), 'other_echo'), { message: 'still here' }, f)).output).toBe('Echo: still here')
  })

  it('a cancelled call is aborted', async () => {
    const m = await setup([
      { name: 'everything', type: 'local', command: [process.execPath, EVERYTHING, 'stdio'], environment: {} },
    ])
    const ac = new AbortController()
    const long = run(
      byId(m.tools(), 'everything_trigger-long-running-operation'),
      { duration: 20, steps: 20 },
      f,
      ac.signal,
    ).catch((e) => e)
    setTimeout(() => ac.abort(), 300)
    expect(await long).toMatchObject({ kind: 'aborted' })
    expect((await run(byId(m.tools(), 'everything_echo'), { message: 'after' }, f)).output).toBe('Echo: after')
  })

  it('a server that fails to start or times out is reported and isolated', async () => {
    tmp = tempDir()
    f = fixture({ directory: tmp.dir, agentRules: allowAll })
    manager = createMcpManager(
      [
        { name: 'missing', type: 'local', command: ['/nonexistent/mcp-server'], environment: {} },
        {
          name: 'silent',
          type: 'local',
          command: [process.execPath, '-e', `setInterval(() => {}, 1000) // ${SILENT}`],
          environment: {},
        },
        {
          name: 'crashy',
          type: 'local',
          command: [process.execPath, '-e', 'console.error("boom: bad config"); process.exit(3)'],
          environment: {},
        },
        { name: 'ok', type: 'local', command: [process.execPath, EVERYTHING, 'stdio'], environment: {} },
      ],
      { connectTimeoutMs: 2000 },
    )
    await manager.start()
    const status = Object.fromEntries(manager.status().map((s) => [s.name, s]))
    expect(status['missing']).toMatchObject({ state: 'failed', tools: 0 })
    expect(status['silent']).toMatchObject({ state: 'failed', error: 'connecting timed out after 2000 ms' })
    expect(status['crashy']).toMatchObject({ state: 'failed', error: expect.stringContaining('boom: bad config') })
    expect(status['ok']).toMatchObject({ state: 'connected' })
    expect(manager.tools().every((t) => t.id.startsWith('ok_'))).toBe(true)
    // the server that never answered is killed, not left running
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(processesRunning(SILENT)).toBe(0)
  })

  it('lists tools page by page and picks up tools/list_changed', async () => {
    const m = await setup([{ name: 'paged', type: 'local', command: [process.execPath, PAGED], environment: {} }])
    expect(m.tools().map((t) => t.id)).toEqual([
      'paged_alpha',
      'paged_beta',
      'paged_gamma',
      'paged_grow',
      'paged_mutate',
      'paged_dotted_name',
    ])
    expect((await run(byId(m.tools(), 'paged_grow'), {}, f)).output).toBe('grown')
    for (let i = 0; i < 100 && m.tools().length < 7; i++) await new Promise((r) => setTimeout(r, 20))
    expect(
      m
        .tools()
        .map((t) => t.id)
        .at(-1),
    ).toBe('paged_grown6')
  })

  it('an "always" approval pins the tool definition: a changed tool is asked again', async () => {
    const m = await setup([{ name: 'paged', type: 'local', command: [process.execPath, PAGED], environment: {} }])
    const g = fixture({
      directory: tmp.dir,
      agentRules: [
        { permission: 'paged_*', pattern: '*', action: 'ask' },
        { permission: 'paged_mutate', pattern: '*', action: 'allow' },
      ],
    })
    const answer = async (requestId: string, reply: 'always' | 'once') =>
      execute(
        sqlitePorts(g.store),
        g.sessionId,
        (s) => decidePermission({ type: 'reply', requestId, reply }, s, g.sessionId, g.ids),
        {
          meta: { actor: 'user' },
        },
      )
    const first = run(byId(m.tools(), 'paged_alpha'), {}, g)
    await new Promise((r) => setImmediate(r))
    const [request] = g.requested()
    expect(request?.patterns).toEqual([expect.stringMatching(/^definition:[0-9a-f]{16}$/)])
    await answer(request?.requestId as string, 'always')
    expect(getSession(g.store, g.sessionId)?.approvals.map((a) => [a.permission, a.pattern])).toEqual([
      ['paged_alpha', request?.patterns[0]],
    ])
    expect((await first).output).toBe('called alpha')
    expect((await run(byId(m.tools(), 'paged_alpha'), {}, g)).output).toBe('called alpha') // approved: no new request
    expect(g.requested().length).toBe(1)

    await run(byId(m.tools(), 'paged_mutate'), {}, g)
    for (let i = 0; i < 100 && !byId(m.tools(), 'paged_alpha').description.startsWith('IMPORTANT'); i++)
      await new Promise((r) => setTimeout(r, 20))
    const again = run(byId(m.tools(), 'paged_alpha'), {}, g)
    await new Promise((r) => setImmediate(r))
    expect(g.requested().length).toBe(2) // the changed definition is not covered by the old approval
    await answer(g.requested()[1]?.requestId as string, 'once')
    expect((await again).output).toBe('called alpha')
    g.gate.close()
    g.store.close()
  })
})

/** How many processes have `marker` in their command line (Linux /proc). */
function processesRunning(marker: string): number {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker)
      } catch {
        return false // exited meanwhile
      }
    }).length
}
