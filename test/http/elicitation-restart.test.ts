import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { SHUTDOWN_REASON } from '../../src/runtime/elicitation/bridge.js'
import { INTERRUPTED_MESSAGE } from '../../src/runtime/recovery/recovery.js'
import { startServer, type ServerProcess } from '../crash/server-process.js'
import { allowElicitTools, ELICIT_SERVER, elicitScript, eventsOf, waitEvent } from './elicitation-fixture.js'
import { Client } from './helpers.js'

/**
 * An elicitation across a real restart of the server process (SIGKILL, then a
 * new process on the same data dir), as docs/TOOLS.md "Elicitation across a
 * restart" decides: the MCP server's request died with the connection, so
 * recovery closes the pending elicitation (`cancel`, actor recovery) with
 * its call (`tool.failed {interrupted}`); the run resumes; answering the old
 * request is ELICITATION_NOT_FOUND; the tool called again after the restart
 * asks again, and that question is answered over WebSocket.
 */

const TOKEN = 'elicitation-restart-token-0123456789abcdef'
let dir: string | undefined
let server: ServerProcess | undefined
let client: Client | undefined
afterEach(async () => {
  client?.close()
  await server?.kill('SIGTERM')
  if (dir) rmSync(dir, { recursive: true, force: true })
  server = client = dir = undefined
})

/** The server process, once its MCP server is connected (its tools are offered from then on). */
async function start(env: Record<string, string>): Promise<ServerProcess> {
  const s = await startServer(env)
  let out = ''
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the MCP server never connected\n${out}\n${s.stderr()}`)), 20_000)
    const look = (d: Buffer) => {
      out += d.toString()
      if (/"name":"elicit"[^\n]*"state":"connected"|"state":"connected"[^\n]*"name":"elicit"/.test(out)) {
        clearTimeout(timer)
        s.child.stdout?.off('data', look)
        resolve()
      }
    }
    s.child.stdout?.on('data', look)
  })
  return s
}

/** A data dir configured with the eliciting MCP server, and the environment of a server process on it. */
function prepare(): { env: Record<string, string>; work: string } {
  dir = mkdtempSync(join(tmpdir(), 'chronicle-elicit-restart-'))
  const data = join(dir, 'data')
  const work = join(dir, 'work')
  mkdirSync(data)
  mkdirSync(work)
  const script = join(dir, 'script.json')
  writeFileSync(script, JSON.stringify(elicitScript))
  writeFileSync(
    join(data, 'chronicle.json'),
    JSON.stringify({
      mcp: { elicit: { type: 'local', command: [process.execPath, ELICIT_SERVER] } },
      permission: allowElicitTools,
      titles: false,
    }),
  )
  const env = {
    CHRONICLE_DATA_DIR: data,
    CHRONICLE_PORT: '0',
    CHRONICLE_TOKEN: TOKEN,
    CHRONICLE_MODEL: `scripted:${script}`,
    CHRONICLE_LOG_FORMAT: 'json',
    CHRONICLE_LOG_LEVEL: 'info',
    XDG_CONFIG_HOME: join(dir, 'config'), // no user config file is read
  }
  return { env, work }
}

/** Starts the server, opens a session and asks the MCP server's question in it. */
async function askedBeforeRestart(env: Record<string, string>, work: string) {
  server = await start(env)
  client = await Client.connect(`${server.url.replace(/^http/, 'ws')}/ws`, TOKEN)
  const created = await client.call('session.create', { directory: work })
  const session = (created.result as { session: { id: string } }).session.id
  await client.call('subscribe', { sessions: [session], after: 0 })
  await client.call('input.submit', { session, parts: [{ type: 'text', text: '#book a table' }] })
  const first = await waitEvent(client, 'elicitation.requested')
  client.close()
  return { session, first }
}

describe('an elicitation across a server restart', () => {
  it('is closed by recovery with its call; the call made again after the restart asks again and is answered over WebSocket', async () => {
    const { env, work } = prepare()

    // ── before: the question is pending when the process is killed ──
    const { session, first } = await askedBeforeRestart(env, work)
    const firstId = first.event.data['elicitationId']
    const callPart = first.event.data['partId']
    await server?.kill('SIGKILL')

    // ── after: recovery settled it; the old question is gone, a new one is answered ──
    server = await start(env)
    expect(server.recovered).toMatchObject({ resumed: 1 })
    client = await Client.connect(`${server.url.replace(/^http/, 'ws')}/ws`, TOKEN)
    await client.call('subscribe', { sessions: [session], after: first.seq })
    await waitEvent(client, 'run.finished', first.seq)
    const settled = eventsOf(client)
    expect(settled.slice(0, 3).map((f) => [f.event.type, f.event.data, f.event.meta['actor']])).toEqual([
      ['tool.failed', { partId: callPart, error: { kind: 'interrupted', message: INTERRUPTED_MESSAGE } }, 'recovery'],
      [
        'elicitation.answered',
        {
          elicitationId: firstId,
          action: 'cancel',
          reason: `${INTERRUPTED_MESSAGE}: the MCP server's request ended with its tool call`,
        },
        'recovery',
      ],
      ['run.resumed', expect.objectContaining({ attempt: 1 }), 'recovery'],
    ])
    const state = (await client.call('session.get', { session })).result as { session: Record<string, unknown> }
    expect(state.session).toMatchObject({ status: 'idle', pendingElicitations: [] })

    const stale = await client.call('elicitation.answer', {
      session,
      elicitationId: firstId,
      action: 'accept',
      content: { name: 'Ada' },
    })
    expect(stale['error']).toMatchObject({ code: 'ELICITATION_NOT_FOUND' })

    const head = eventsOf(client).at(-1)?.seq ?? 0
    await client.call('input.submit', { session, parts: [{ type: 'text', text: '#book it again' }] })
    const second = await waitEvent(client, 'elicitation.requested', head)
    const secondId = second.event.data['elicitationId']
    expect(secondId).not.toBe(firstId)
    const answered = await client.call('elicitation.answer', {
      session,
      elicitationId: secondId,
      action: 'accept',
      content: { name: 'Ada', seats: 4 },
    })
    expect(answered['result']).toEqual({})
    const done = await waitEvent(client, 'tool.completed', second.seq)
    expect(done.event.data['output']).toBe(
      'answered {"action":"accept","content":{"name":"Ada","seats":4,"newsletter":false}}',
    )
    const finished = await waitEvent(client, 'run.finished', second.seq)
    expect(finished.event.data).toMatchObject({ outcome: 'idle' })
  })

  it('a graceful stop closes it as the server stops (actor runtime); after the restart nothing is pending', async () => {
    const { env, work } = prepare()
    const { session, first } = await askedBeforeRestart(env, work)
    const stopped = Date.now()
    expect(await server?.kill('SIGTERM')).toBe(0)
    expect(Date.now() - stopped).toBeLessThan(10_000) // the pending question does not hold the shutdown

    server = await start(env)
    client = await Client.connect(`${server.url.replace(/^http/, 'ws')}/ws`, TOKEN)
    await client.call('subscribe', { sessions: [session], after: first.seq })
    await waitEvent(client, 'run.finished', first.seq)
    const closed = eventsOf(client).find((e) => e.event.type === 'elicitation.answered')
    expect([closed?.event.data, closed?.event.meta['actor']]).toEqual([
      { elicitationId: first.event.data['elicitationId'], action: 'cancel', reason: SHUTDOWN_REASON },
      'runtime',
    ])
    const state = (await client.call('session.get', { session })).result as { session: Record<string, unknown> }
    expect(state.session).toMatchObject({ status: 'idle', pendingElicitations: [] })
  })
})
