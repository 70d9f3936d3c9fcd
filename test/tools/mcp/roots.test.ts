import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { fork } from '../../../src/commands/fork.js'
import { sequentialIds } from '../../../src/events/ids.js'
import type { EventStore } from '../../../src/events/store.js'
import { openStore } from '../../../src/projections/open.js'
import type { McpServerConfig } from '../../../src/tools/mcp/config.js'
import { createMcpManager, type McpManager } from '../../../src/tools/mcp/manager.js'
import { createSessionRoots, type SessionRoots } from '../../../src/runtime/mcp/roots.js'
import type { Tool } from '../../../src/tools/tool.js'
import { type Fixture, fixture, tempDir } from '../helpers.js'
import { sqlitePorts } from '../../../src/projections/store-ports.js'

/**
 * Roots (docs/TOOLS.md "Roots"): the client declares `roots` with
 * `listChanged`, answers `roots/list` with the directories sessions work in,
 * and tells the servers when that set changes. Real servers: a small SDK
 * server that calls listRoots(), and @modelcontextprotocol/server-filesystem,
 * which takes the client's roots as the directories it may touch.
 */

const ROOTS_SERVER = join(process.cwd(), 'test/tools/fixtures/roots-server.mjs')
const FILESYSTEM = join(process.cwd(), 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js')
const meta = { actor: 'user' as const }

let tmp: ReturnType<typeof tempDir> | undefined
let store: EventStore | undefined
let roots: SessionRoots | undefined
let manager: McpManager | undefined
let f: Fixture | undefined

afterEach(async () => {
  await manager?.close()
  roots?.close()
  store?.close()
  f?.gate.close()
  f?.store.close()
  tmp?.cleanup()
  manager = roots = store = f = tmp = undefined
})

async function setup(server: McpServerConfig) {
  tmp = tempDir('chronicle-mcp-roots-')
  const work = join(tmp.dir, 'work')
  mkdirSync(work)
  store = openStore(join(tmp.dir, 'chronicle.db'))
  const sessionRoots = await createSessionRoots(sqlitePorts(store), work, [work, join(tmp.dir, 'forks')])
  const m = createMcpManager([server], { directory: work, connectTimeoutMs: 15_000, roots: () => sessionRoots.list() })
  sessionRoots.onChange(() => void m.rootsChanged())
  roots = sessionRoots
  manager = m
  await m.start()
  f = fixture({ directory: work, agentRules: [{ permission: '*', pattern: '*', action: 'allow' }] })
  return { work, store, manager: m }
}

async function call(m: McpManager, id: string, args: unknown = {}): Promise<string> {
  const tool = m.tools().find((t: Tool) => t.id === id)
  if (!tool || !f) throw new Error(`no tool ${id}`)
  return (await tool.execute(tool.parameters.parse(args), f.ctx())).output
}

async function until(what: string, check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 30))
  }
}

const root = (dir: string) => ({ uri: pathToFileURL(dir).href, name: dir.split('/').at(-1) })
const created = (directory: string) => ({
  type: 'session.created' as const,
  data: { directory, agent: 'build', model: null },
})

describe('MCP roots', () => {
  it("answers roots/list with the server directory and the live sessions' directories inside it or the forks directory, and says when they change", async () => {
    const { work, store, manager } = await setup({
      name: 'r',
      type: 'local',
      command: [process.execPath, ROOTS_SERVER],
      environment: {},
    })
    expect(JSON.parse(await call(manager, 'r_roots'))).toEqual([root(work)])

    // a session in the same directory changes nothing, nor one outside the workspace and the forks
    // directory (an operator's choice must not widen what a shared server reaches: it would be told
    // before the fork's and counted); a fork into its own directory adds that directory
    const [first] = store.append('ses_a', [created(work)], { meta })
    const elsewhere = join(tmp?.dir as string, 'elsewhere')
    mkdirSync(elsewhere)
    store.append('ses_x', [created(elsewhere)], { meta })
    store.append('ses_root', [created('/')], { meta })
    const forkDir = join(tmp?.dir as string, 'forks', 'fork-of-a')
    mkdirSync(forkDir, { recursive: true })
    await fork(sqlitePorts(store), sequentialIds(), 'ses_a', first?.seq as number, { directory: forkDir })
    await until('the list_changed', async () => (await call(manager, 'r_heard')) === '1')
    expect(JSON.parse(await call(manager, 'r_roots'))).toEqual([root(forkDir), root(work)].sort(byUri))

    // a fork's files written into its directory: the same set, told again (a server may have dropped a missing root)
    const child = store.readAll(0).find((e) => e.type === 'session.forked')?.sessionId as string
    const tree = 'a'.repeat(40)
    store.append(
      child,
      [
        { type: 'workspace.materialize.started', data: { tree, directory: forkDir } },
        { type: 'workspace.materialized', data: { tree, files: 0, bytes: 0 } },
      ],
      { meta },
    )
    await until('the second list_changed', async () => (await call(manager, 'r_heard')) === '2')

    // archiving the fork takes its directory away again
    store.append(child, [{ type: 'session.archived', data: {} }], { meta })
    await until('the third list_changed', async () => (await call(manager, 'r_heard')) === '3')
    expect(JSON.parse(await call(manager, 'r_roots'))).toEqual([root(work)])
  })

  it('server-filesystem started without directories works in the roots it is given, and follows their changes', async () => {
    const { work, store, manager } = await setup({
      name: 'fs',
      type: 'local',
      command: [process.execPath, FILESYSTEM],
      environment: {},
    })
    await until('the initial roots', async () => (await call(manager, 'fs_list_allowed_directories')).includes(work))
    const other = join(work, 'other')
    mkdirSync(other)
    store.append('ses_b', [created(other)], { meta })
    await until('the new root', async () => (await call(manager, 'fs_list_allowed_directories')).includes(other))
    expect(await call(manager, 'fs_list_allowed_directories')).toBe(
      `Allowed directories:\n${[other, work].sort().join('\n')}`,
    )
  })

  it('a server is offered no roots capability when there are no roots to give', async () => {
    tmp = tempDir('chronicle-mcp-roots-')
    const m = createMcpManager(
      [{ name: 'r', type: 'local', command: [process.execPath, ROOTS_SERVER], environment: {} }],
      {
        connectTimeoutMs: 15_000,
      },
    )
    manager = m
    await m.start()
    f = fixture({ directory: tmp.dir, agentRules: [{ permission: '*', pattern: '*', action: 'allow' }] })
    await expect(call(m, 'r_roots')).rejects.toThrow(/does not support roots|Method not found/)
  })
})

const byUri = (a: { uri: string }, b: { uri: string }) => (a.uri < b.uri ? -1 : a.uri > b.uri ? 1 : 0)
