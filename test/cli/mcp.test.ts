import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { MCP_OAUTH_FILE } from '../../src/tools/mcp/oauth-store.js'
import { type ProtectedMcpServer, startProtectedMcpServer } from '../tools/mcp/oauth-server.js'
import { freePort, startServer } from '../http/helpers.js'
import { run, runToEnd } from './helpers.js'

describe('chronicle mcp list | login | logout', () => {
  let server: ProtectedMcpServer
  let dir: string
  let config: string
  let env: Record<string, string>
  beforeEach(async () => {
    server = await startProtectedMcpServer()
    dir = mkdtempSync(join(tmpdir(), 'chronicle-cli-mcp-'))
    config = join(dir, 'chronicle.json')
    const port = await freePort()
    writeFileSync(
      config,
      JSON.stringify({
        port,
        mcp: {
          protected: { type: 'remote', url: server.url },
          plain: { type: 'remote', url: 'http://127.0.0.1:9/mcp', oauth: false },
          local: { type: 'local', command: ['node', 'server.js'] },
        },
      }),
    )
    env = { CHRONICLE_DATA_DIR: join(dir, 'data') }
  })
  afterEach(async () => {
    await server.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  const list = async () => (await runToEnd(['mcp', 'list', '--config', config], env)).stdout

  it('login prints the URL, takes the browser callback on the server port, and list and logout follow', async () => {
    expect(await list()).toBe(
      [
        `protected  remote  ${server.url}  not signed in`,
        'plain  remote  http://127.0.0.1:9/mcp  sign-in off',
        'local  local  node server.js',
        '',
      ].join('\n'),
    )

    const login = run(['mcp', 'login', 'protected', '--config', config], env)
    const [, url] = (await login.waitFor(/^(http:\/\/127\.0\.0\.1:\d+\/authorize\?\S+)$/m)) as RegExpMatchArray
    // the browser: the authorization server approves and sends it to the callback, which it then opens
    const approved = await fetch(url as string, { redirect: 'manual' })
    const callback = approved.headers.get('location') ?? ''
    expect(callback).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp\/oauth\/callback\?code=/)
    expect(await (await fetch(callback)).text()).toBe('Signed in: you can close this tab and go back to Chronicle.')
    expect(await login.exited).toBe(0)
    expect(login.stdout.split('\n').at(-2)).toBe('signed in to protected (2 tools)')
    expect(statSync(join(dir, 'data', MCP_OAUTH_FILE)).mode & 0o777).toBe(0o600)

    expect((await list()).split('\n')[0]).toBe(`protected  remote  ${server.url}  signed in`)
    const again = await runToEnd(['mcp', 'login', 'protected', '--config', config], env)
    expect(again.stdout).toBe('protected is signed in already (2 tools)\n')

    const logout = await runToEnd(['mcp', 'logout', 'protected', '--config', config], env)
    expect(logout.stdout).toBe('signed out of protected: its stored sign-in is deleted\n')
    expect((await list()).split('\n')[0]).toBe(`protected  remote  ${server.url}  not signed in`)
    expect(server.seen.codeExchanges).toBe(1)
  }, 60_000)

  it('login beside a running server: its callback on the port completes the sign-in, and the CLI sees it', async () => {
    const port = await freePort()
    const chronicle = await startServer(
      { CHRONICLE_PORT: String(port) },
      { config: { mcp: [{ name: 'protected', type: 'remote', url: server.url, headers: {} }] } },
    )
    try {
      writeFileSync(config, JSON.stringify({ port, mcp: { protected: { type: 'remote', url: server.url } } }))
      const login = run(['mcp', 'login', 'protected', '--config', config], {
        CHRONICLE_DATA_DIR: join(chronicle.dir, 'data'),
      })
      const [, url] = (await login.waitFor(/^(http:\/\/127\.0\.0\.1:\d+\/authorize\?\S+)$/m)) as RegExpMatchArray
      await login.waitFor(/is in use/)
      const approved = await fetch(url as string, { redirect: 'manual' })
      const callback = approved.headers.get('location') ?? ''
      expect(callback.startsWith(`http://127.0.0.1:${port}/mcp/oauth/callback?code=`)).toBe(true)
      // the running server answers the browser: it exchanged the code the CLI's sign-in asked for
      expect(await (await fetch(callback)).text()).toBe(
        'Signed in to protected: you can close this tab and go back to Chronicle.',
      )
      expect(await login.exited).toBe(0)
      expect(login.stdout.split('\n').at(-2)).toBe('signed in to protected (2 tools)')
      expect(server.seen.codeExchanges).toBe(1)
    } finally {
      await chronicle.close()
    }
  }, 60_000)

  it('refuses what it cannot sign in to, saying why', async () => {
    const unknown = await runToEnd(['mcp', 'login', 'nope', '--config', config], env)
    expect([unknown.code, unknown.stderr]).toEqual([2, expect.stringContaining('no MCP server "nope" in the config')])
    const local = await runToEnd(['mcp', 'login', 'local', '--config', config], env)
    expect(local.stderr).toContain('local is a local server: it has no sign-in')
    const off = await runToEnd(['mcp', 'login', 'plain', '--config', config], env)
    expect(off.stderr).toContain('plain has sign-in turned off (oauth: false)')
  }, 60_000)
})
