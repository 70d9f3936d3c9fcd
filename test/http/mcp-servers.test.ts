import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Client, startServer, type TestServer } from './helpers.js'

/**
 * MCP server state through a real Chronicle (docs/API.md "MCP servers"):
 * the configured server is a real child process; its state reaches the log
 * through main.ts's wiring, and `GET /mcp/servers?at=` and the WebSocket's
 * `mcp.servers` answer it at any seq — after a crash and the reconnect too.
 */

const ROOTS_SERVER = join(process.cwd(), 'test/tools/fixtures/roots-server.mjs')

let server: TestServer | undefined
let pidDir: string | undefined
afterEach(async () => {
  await server?.close()
  if (pidDir) rmSync(pidDir, { recursive: true, force: true })
  server = pidDir = undefined
})

interface ServersAt {
  seq: number
  servers: { name: string; state: string; attempt: number; tools: string[]; error?: string; retryInMs?: number }[]
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe('GET /mcp/servers', () => {
  it('answers the servers and tools at any seq: ready, then failed after a crash, then ready again', async () => {
    pidDir = mkdtempSync(join(tmpdir(), 'chronicle-mcp-pid-'))
    const file = join(pidDir, 'pid')
    server = await startServer(
      { CHRONICLE_LOG_LEVEL: 'warn' },
      {
        config: {
          mcp: [
            { name: 'r', type: 'local', command: [process.execPath, ROOTS_SERVER], environment: { PID_FILE: file } },
          ],
        },
      },
    )
    const s = server
    const get = async (query = '') => {
      const res = await fetch(`${s.url}/mcp/servers${query}`, { headers: { authorization: `Bearer ${s.token}` } })
      return { status: res.status, body: (await res.json()) as ServersAt & { code?: string } }
    }
    const log = () => s.chronicle.store.readSession('sys_mcp')

    const ready = await until('ready', async () => {
      const { body } = await get()
      return body.servers[0]?.state === 'ready' ? body : undefined
    })
    expect(ready.servers).toEqual([
      expect.objectContaining({ name: 'r', state: 'ready', attempt: 1, tools: ['r_roots', 'r_heard'] }),
    ])
    const readySeq = ready.seq

    process.kill(Number(readFileSync(file, 'utf8')), 'SIGKILL')
    await until('the second ready', async () =>
      log().filter((e) => e.type === 'mcp.server.ready').length === 2 ? true : undefined,
    )
    expect(log().map((e) => e.type)).toEqual([
      'mcp.server.connecting',
      'mcp.server.ready',
      'mcp.server.failed',
      'mcp.server.connecting',
      'mcp.server.ready',
    ])
    const failedSeq = log()[2]?.seq as number

    expect((await get(`?at=${readySeq}`)).body.servers[0]).toMatchObject({
      state: 'ready',
      tools: ['r_roots', 'r_heard'],
    })
    expect((await get(`?at=${failedSeq}`)).body).toEqual({
      seq: failedSeq,
      servers: [
        expect.objectContaining({
          name: 'r',
          state: 'failed',
          attempt: 1,
          tools: [],
          error: 'the server closed the connection (it exited or crashed)',
          retryInMs: expect.any(Number),
        }),
      ],
    })
    expect((await get()).body.servers[0]).toMatchObject({ state: 'ready', attempt: 2, tools: ['r_roots', 'r_heard'] })
    const past = await get(`?at=${s.chronicle.store.head() + 1000}`)
    expect([past.status, past.body.code]).toEqual([404, 'SEQ_OUT_OF_RANGE'])
    expect((await get('?at=x')).status).toBe(400)

    // the same answer over the WebSocket
    const ws = await Client.connect(s.wsUrl, s.token)
    await ws.call('hello', { protocol: 1 })
    expect((await ws.call('mcp.servers', { at: failedSeq })).result).toEqual((await get(`?at=${failedSeq}`)).body)
    ws.close()
  })
})
