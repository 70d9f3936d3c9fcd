import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { ChronicleConfig } from '../../src/config.js'
import { ABORTED_REASON } from '../../src/runtime/elicitation/bridge.js'
import { allowElicitTools, ELICIT_SERVER, elicitScript, eventsOf, waitEvent } from './elicitation-fixture.js'
import { Client, type Frame, startServer, type TestServer } from './helpers.js'

/**
 * MCP elicitation end to end (docs/TOOLS.md "Elicitation"): a real MCP server
 * (a child process, the SDK's McpServer) asks from inside its tool call; the
 * real Chronicle server, listening, records the question in the session; a
 * real `ws` client answers it; the server's tool reports what it got back.
 * The scripted model calls the MCP tool.
 */

let server: TestServer | undefined
let client: Client | undefined
afterEach(async () => {
  client?.close()
  await server?.close()
  server = undefined
  client = undefined
})

async function setup(): Promise<{ s: TestServer; c: Client; session: string }> {
  const file = join(mkdtempSync(join(tmpdir(), 'chronicle-script-')), 'script.json')
  writeFileSync(file, JSON.stringify(elicitScript))
  const config: Partial<ChronicleConfig> = {
    mcp: [{ name: 'elicit', type: 'local', command: [process.execPath, ELICIT_SERVER], environment: {} }],
    rules: allowElicitTools,
  }
  server = await startServer({ CHRONICLE_MODEL: `scripted:${file}`, CHRONICLE_LOG_LEVEL: 'info' }, { config })
  const s = server
  await until(() => s.logs.some((l) => l.includes('"state":"connected"') && l.includes('"name":"elicit"')))
  client = await Client.connect(s.wsUrl, s.token)
  const created = await client.call('session.create', { directory: s.dir })
  const session = (created.result as { session: { id: string } }).session.id
  await client.call('subscribe', { sessions: [session], after: 0 })
  return { s, c: client, session }
}

async function until(check: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out')
    await new Promise((r) => setTimeout(r, 20))
  }
}

/** Submits the prompt and resolves with the elicitation it leads to. */
async function askVia(c: Client, session: string, prompt: string) {
  await c.call('input.submit', { session, parts: [{ type: 'text', text: prompt }] })
  const frame = await waitEvent(c, 'elicitation.requested')
  return {
    seq: frame.seq,
    elicitationId: String(frame.event.data['elicitationId']),
    partId: frame.event.data['partId'],
  }
}

/** The tool's text once the call completed (the MCP server reports what it was answered). */
async function toolOutput(c: Client): Promise<string> {
  const done = await waitEvent(c, ['tool.completed', 'tool.failed'])
  const output = done.event.data['output']
  return typeof output === 'string' ? output : JSON.stringify(done.event.data['error'])
}

const typesAfter = (c: Client, seq: number) =>
  eventsOf(c)
    .filter((e) => e.seq > seq)
    .map((e) => e.event.type)

describe('an MCP elicitation answered over WebSocket', () => {
  it('is pending in the session, then accept sends the content with the schema defaults applied', async () => {
    const { c, session } = await setup()
    const asked = await askVia(c, session, '#book a table')

    const pending = (await c.call('session.get', { session })).result as { session: Record<string, unknown> }
    expect(pending.session['status']).toBe('waiting')
    expect(pending.session['pendingElicitations']).toEqual([
      {
        elicitationId: asked.elicitationId,
        seq: asked.seq,
        server: 'elicit',
        message: 'Who is the booking for?',
        requestedSchema: {
          type: 'object',
          properties: {
            name: { type: 'string', title: 'Name', minLength: 1 },
            seats: { type: 'integer', minimum: 1, maximum: 8, default: 2 },
            newsletter: { type: 'boolean', default: false },
          },
          required: ['name'],
        },
        partId: asked.partId,
        callId: expect.any(String),
      },
    ])

    const answered = await c.call('elicitation.answer', {
      session,
      elicitationId: asked.elicitationId,
      action: 'accept',
      content: { name: 'Ada' },
    })
    expect(answered).toEqual({ id: answered.id, result: {} })
    expect(await toolOutput(c)).toBe(
      'answered {"action":"accept","content":{"name":"Ada","seats":2,"newsletter":false}}',
    )
    const closing = await waitEvent(c, 'elicitation.answered')
    expect(closing.event.data).toEqual({
      elicitationId: asked.elicitationId,
      action: 'accept',
      content: { name: 'Ada', seats: 2, newsletter: false },
    })
    expect(closing.event.meta).toMatchObject({ actor: 'user', request: asked.elicitationId, by: { id: 'owner' } })
    await waitEvent(c, 'run.finished')
    expect(typesAfter(c, asked.seq - 1)).toEqual([
      'elicitation.requested',
      'elicitation.answered',
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
    const after = (await c.call('session.get', { session })).result as { session: Record<string, unknown> }
    expect(after.session).toMatchObject({ status: 'idle', pendingElicitations: [] })
  })

  it('decline goes back to the server as decline, with no content', async () => {
    const { c, session } = await setup()
    const asked = await askVia(c, session, '#book')
    await c.call('elicitation.answer', { session, elicitationId: asked.elicitationId, action: 'decline' })
    expect(await toolOutput(c)).toBe('answered {"action":"decline"}')
  })

  it('cancel over the HTTP route goes back to the server as cancel', async () => {
    const { s, c, session } = await setup()
    const asked = await askVia(c, session, '#book')
    const res = await fetch(`${s.url}/sessions/${session}/elicitations/${asked.elicitationId}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ action: 'cancel' }),
    })
    expect(res.status).toBe(200)
    expect(await toolOutput(c)).toBe('answered {"action":"cancel"}')
  })

  it('content that does not match the requested schema is refused with ELICITATION_INVALID, and nothing is appended', async () => {
    const { s, c, session } = await setup()
    const asked = await askVia(c, session, '#book')
    const answer = (action: string, content?: unknown) =>
      c.call('elicitation.answer', {
        session,
        elicitationId: asked.elicitationId,
        action,
        ...(content !== undefined && { content }),
      })
    const codeOf = (f: Frame) => (f['error'] as { code: string; message: string }).code
    const missing = await answer('accept', { seats: 3 })
    expect(missing['error']).toEqual({
      code: 'ELICITATION_INVALID',
      message: 'the content does not match the requested schema: ELICITATION_MISSING_FIELD: "name" is required',
    })
    expect(codeOf(await answer('accept', { name: 'Ada', seats: 20 }))).toBe('ELICITATION_INVALID')
    expect(codeOf(await answer('accept', { name: 'Ada', seats: '2' }))).toBe('ELICITATION_INVALID')
    expect(codeOf(await answer('accept', { name: 'Ada', admin: true }))).toBe('ELICITATION_INVALID')
    expect(codeOf(await answer('decline', { name: 'Ada' }))).toBe('ELICITATION_INVALID')
    const http = await fetch(`${s.url}/sessions/${session}/elicitations/${asked.elicitationId}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ action: 'accept', content: { seats: 1 } }),
    })
    expect(http.status).toBe(400)
    expect(await http.json()).toMatchObject({ code: 'ELICITATION_INVALID' })

    expect(typesAfter(c, asked.seq)).toEqual([]) // still pending: nothing was appended
    const state = (await c.call('session.get', { session })).result as { session: { pendingElicitations: unknown[] } }
    expect(state.session.pendingElicitations).toHaveLength(1)

    expect((await answer('accept', { name: 'Grace', seats: 8, newsletter: true }))['result']).toEqual({})
    expect(await toolOutput(c)).toBe(
      'answered {"action":"accept","content":{"name":"Grace","seats":8,"newsletter":true}}',
    )
  })

  it('an unknown or already answered elicitation is ELICITATION_NOT_FOUND', async () => {
    const { c, session } = await setup()
    const unknown = await c.call('elicitation.answer', { session, elicitationId: 'eli_nope', action: 'decline' })
    expect(unknown['error']).toMatchObject({ code: 'ELICITATION_NOT_FOUND' })
    const asked = await askVia(c, session, '#book')
    await c.call('elicitation.answer', { session, elicitationId: asked.elicitationId, action: 'decline' })
    const again = await c.call('elicitation.answer', {
      session,
      elicitationId: asked.elicitationId,
      action: 'accept',
      content: { name: 'Ada' },
    })
    expect(again['error']).toEqual({
      code: 'ELICITATION_NOT_FOUND',
      message: `no pending elicitation ${asked.elicitationId} in ${session} (unknown, or already answered)`,
    })
    expect(await toolOutput(c)).toBe('answered {"action":"decline"}')
  })

  it('cancelling the run cancels the pending elicitation (by the runtime) and the call is aborted', async () => {
    const { c, session } = await setup()
    const asked = await askVia(c, session, '#book')
    await c.call('run.cancel', { session })
    const closing = await waitEvent(c, 'elicitation.answered')
    expect(closing.event.data).toEqual({ elicitationId: asked.elicitationId, action: 'cancel', reason: ABORTED_REASON })
    expect(closing.event.meta).toMatchObject({ actor: 'runtime' })
    const finished = await waitEvent(c, 'run.finished')
    expect(finished.event.data).toMatchObject({ outcome: 'cancelled' })
    const failed = eventsOf(c).find((e) => e.event.type === 'tool.failed')
    expect(failed?.event.data['error']).toMatchObject({ kind: 'aborted' })
    const after = (await c.call('session.get', { session })).result as { session: Record<string, unknown> }
    expect(after.session).toMatchObject({ status: 'idle', pendingElicitations: [] })
  })
})

describe('a hostile MCP server asking', () => {
  it('a form over the bounds is declined without reaching the log, and the reason is logged', async () => {
    const { s, c, session } = await setup()
    await c.call('input.submit', { session, parts: [{ type: 'text', text: '#huge' }] })
    expect(await toolOutput(c)).toBe('answered {"action":"decline"}')
    await waitEvent(c, 'run.finished')
    expect(eventsOf(c).filter((e) => e.event.type.startsWith('elicitation.'))).toEqual([])
    const line = s.logs.find((l) => l.includes('mcp elicitation declined'))
    expect(line).toContain('its schema is')
  })

  it('a form the spec forbids (a nested object) is refused by the client as invalid params, and nothing is appended', async () => {
    const { c, session } = await setup()
    await c.call('input.submit', { session, parts: [{ type: 'text', text: '#malformed' }] })
    // the SDK's parse of the request fails before any handler runs: the server gets a JSON-RPC error
    const failure = JSON.parse(await toolOutput(c)) as { kind: string; message: string }
    expect(failure.kind).toBe('failed')
    expect(failure.message).toMatch(/^elicitation failed: MCP error -32603: /)
    expect(failure.message).toContain('"requestedSchema",')
    await waitEvent(c, 'run.finished')
    expect(eventsOf(c).filter((e) => e.event.type.startsWith('elicitation.'))).toEqual([])
  })
})

describe('sampling', () => {
  it('is not offered: the client declares no sampling capability, so the server cannot ask for the model', async () => {
    const { c, session } = await setup()
    await c.call('input.submit', { session, parts: [{ type: 'text', text: '#sample' }] })
    const output = await toolOutput(c)
    const [refusal, declared] = output.split('; client capabilities: ')
    expect(refusal).toBe('sampling refused: MCP error -32601: Method not found')
    const capabilities = JSON.parse(declared ?? 'null') as Record<string, unknown>
    expect(capabilities['elicitation']).toEqual({ form: {} })
    expect(Object.keys(capabilities)).not.toContain('sampling')
  })
})
