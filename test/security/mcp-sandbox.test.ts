import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { connectMcpServer, type McpServerHandle } from '../../src/tools/mcp/server.js'
import { bwrapSandbox, unconfined } from '../../src/tools/sandbox.js'
import { tempDir } from '../tools/helpers.js'

/**
 * MCP stdio servers from the user's config may opt into the sandbox bash runs
 * in (`"sandbox": true`): the real reference server then runs confined to the
 * session directory. A server that asks for the sandbox where none can run
 * is not started unconfined: it fails, with the reason, and is isolated.
 */

const EVERYTHING = join(process.cwd(), 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')

describe('an MCP server in the sandbox', () => {
  let tmp: ReturnType<typeof tempDir>
  let handle: McpServerHandle | undefined
  afterEach(async () => {
    await handle?.close()
    tmp.cleanup()
  })

  it('runs, answers, and cannot write outside the session directory', async () => {
    tmp = tempDir()
    const outside = join(tmp.dir, '..', `pwned-by-mcp-${process.pid}`)
    const command = ['/bin/sh', '-c', `touch ${outside} 2>/dev/null; exec ${process.execPath} ${EVERYTHING} stdio`]
    handle = await connectMcpServer(
      { name: 'everything', type: 'local', command, environment: {}, sandbox: true },
      // the server's files stay visible wherever this checkout lives (under /tmp the sandbox has its own)
      { directory: tmp.dir, sandbox: bwrapSandbox({ hidden: [], expose: [process.cwd()] }) },
    )
    expect(handle.status()).toMatchObject({ state: 'connected', transport: 'stdio' })
    expect(handle.tools().map((t) => t.id)).toContain('everything_echo')
    expect(existsSync(outside)).toBe(false)
  })

  it('that asks for it where it cannot run fails closed, with the reason', async () => {
    tmp = tempDir()
    handle = await connectMcpServer(
      {
        name: 'everything',
        type: 'local',
        command: [process.execPath, EVERYTHING, 'stdio'],
        environment: {},
        sandbox: true,
      },
      {
        directory: tmp.dir,
        sandbox: unconfined('unavailable', 'bubblewrap (bwrap) cannot run here: no user namespaces'),
      },
    )
    expect(handle.status()).toMatchObject({
      state: 'failed',
      error: expect.stringContaining('asks for the sandbox, which cannot run here (bubblewrap'),
    })
    expect(handle.status().pid).toBeUndefined()
  })
})
