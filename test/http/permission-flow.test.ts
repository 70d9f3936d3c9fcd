import { renderTranscript } from '../../src/cli/render.js'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { ChronicleConfig } from '../../src/config.js'
import { Client, startServer, type TestServer } from './helpers.js'

/**
 * prompt → permission request over WebSocket → reply → completion, through
 * the real runtime, the scripted model, the permission gate and the bash tool.
 */

let server: TestServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

const script = {
  chunkSize: 64,
  steps: [
    {
      when: { afterToolResult: false },
      toolCalls: [{ id: 'call_1', name: 'bash', input: { command: 'echo from-bash', description: 'say hi' } }],
    },
    { when: { afterToolResult: true }, text: 'The command printed from-bash.' },
  ],
}

async function serverWithScript(config?: Partial<ChronicleConfig>): Promise<TestServer> {
  const { mkdtempSync } = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const file = join(mkdtempSync(join(tmpdir(), 'chronicle-script-')), 'script.json')
  writeFileSync(file, JSON.stringify(script))
  return startServer({ CHRONICLE_MODEL: `scripted:${file}`, CHRONICLE_LOG_LEVEL: 'warn' }, config && { config })
}

async function promptUntilPermission(s: TestServer, c: Client) {
  const created = await c.call('session.create', { directory: s.dir })
  const session = (created.result as { session: { id: string } }).session.id
  await c.call('subscribe', { sessions: [session], after: 0 })
  const submitted = await c.call('input.submit', {
    session,
    inputId: 'in_client_1',
    parts: [{ type: 'text', text: 'run echo' }],
  })
  expect(submitted.result).toMatchObject({ inputId: 'in_client_1', duplicate: false })
  const requested = await c.wait(
    (f) => f.type === 'event' && (f.event as { type: string }).type === 'permission.requested',
  )
  const data = (requested.event as { data: { requestId: string; permission: string; patterns: string[] } }).data
  expect(data).toMatchObject({ permission: 'bash', patterns: ['echo from-bash'] })
  return { session, requestId: data.requestId }
}

const types = (c: Client) => c.events().map((e) => (e.event as { type: string }).type)

describe('permission over WebSocket', () => {
  it('a reply of once lets the call run and the run completes', async () => {
    server = await serverWithScript()
    const c = await Client.connect(server.wsUrl, server.token)
    const { session, requestId } = await promptUntilPermission(server, c)
    const reply = await c.call('permission.reply', { session, requestId, reply: 'once' })
    expect(reply.result).toEqual({})
    await c.wait((f) => f.type === 'event' && (f.event as { type: string }).type === 'run.finished')
    // deltas and shell progress depend on chunking; everything else is the exact trace
    // workspace snapshots (taken alongside the step) are specified in test/workspace
    // the session's title task follows the run (test/runtime/titles.test.ts): the run's trace ends at run.finished
    const all = types(c)
    const seq = all
      .slice(0, all.indexOf('run.finished') + 1)
      .filter((t) => !t.endsWith('.delta') && t !== 'tool.progressed' && t !== 'workspace.snapshotted')
    expect(seq).toEqual([
      'session.created',
      'input.accepted',
      'run.started',
      'input.delivered',
      'message.created',
      'step.started',
      'tool.input.started',
      'step.finished',
      'message.completed',
      'tool.called',
      'permission.requested',
      'permission.replied',
      'tool.completed',
      'message.created',
      'step.started',
      'text.started',
      'text.ended',
      'step.finished',
      'message.completed',
      'run.finished',
    ])
    const completed = c.events().find((e) => (e.event as { type: string }).type === 'tool.completed')
    expect((completed!.event as { data: { output: string } }).data.output).toContain('from-bash')
    const finished = c.events().find((e) => (e.event as { type: string }).type === 'run.finished')?.event as {
      data: { outcome: string }
    }
    expect(finished.data.outcome).toBe('idle')
    // who answered: on the reply's meta, on the call's part, and in `chronicle show`
    const replied = c.events().find((e) => (e.event as { type: string }).type === 'permission.replied')
    expect((replied?.event as { meta: unknown } | undefined)?.meta).toMatchObject({
      actor: 'user',
      by: { id: 'owner', name: 'owner' },
    })
    const state = (await c.call('session.state', { session })).result as Parameters<typeof renderTranscript>[0]
    expect(state.parts.find((p) => p.type === 'tool')).toMatchObject({
      permission: { reply: 'once', by: { id: 'owner', name: 'owner' } },
    })
    expect(renderTranscript(state)).toContain('— completed (approved once by owner)')
    // a second reply to the same request is a typed error
    expect((await c.call('permission.reply', { session, requestId, reply: 'once' })).error).toMatchObject({
      code: 'PERMISSION_REQUEST_NOT_FOUND',
    })
    c.close()
  })

  it("configured rules: the config file's global rules, then the agent's own — the agent's have the last word", async () => {
    server = await serverWithScript({
      rules: [{ permission: 'bash', pattern: '*', action: 'deny' }],
      agents: [{ name: 'build', rules: [{ permission: 'bash', pattern: 'echo *', action: 'allow' }] }],
    })
    const headers = { authorization: `Bearer ${server.token}` }
    const created = await server.chronicle.app.inject({
      method: 'POST',
      url: '/sessions',
      headers,
      payload: { directory: server.dir },
    })
    const session = created.json().session.id as string
    const answered = await server.chronicle.app.inject({
      method: 'POST',
      url: `/sessions/${session}/inputs?wait=true`,
      headers,
      payload: { parts: [{ type: 'text', text: 'run echo' }] },
    })
    expect(answered.statusCode).toBe(200)
    const history = await server.chronicle.app.inject({ url: `/sessions/${session}/events`, headers })
    const events = history.json().events as { type: string; data: { output?: string } }[]
    expect(events.map((e) => e.type)).not.toContain('permission.requested')
    expect(events.find((e) => e.type === 'tool.completed')?.data.output).toContain('from-bash')
  })

  it('always adds a rule that is listed over WebSocket and HTTP, and can be revoked', async () => {
    server = await serverWithScript()
    const c = await Client.connect(server.wsUrl, server.token)
    const { session, requestId } = await promptUntilPermission(server, c)
    await c.call('permission.reply', { session, requestId, reply: 'always' })
    await c.wait((f) => f.type === 'event' && (f.event as { type: string }).type === 'run.finished')
    const rules = (await c.call('permission.rules', { session })).result as {
      rules: { ruleId: string; permission: string }[]
    }
    expect(rules.rules).toHaveLength(1)
    expect(rules.rules[0]).toMatchObject({ permission: 'bash', action: 'allow' })
    const ruleId = rules.rules[0]?.ruleId as string
    // over HTTP too: the same rules, then the revoke
    const headers = { authorization: `Bearer ${server.token}` }
    const listed = await server.chronicle.app.inject({ url: `/sessions/${session}/rules`, headers })
    expect(listed.json()).toEqual(rules)
    const revoked = await server.chronicle.app.inject({
      method: 'DELETE',
      url: `/sessions/${session}/rules/${ruleId}`,
      headers,
    })
    expect(revoked.statusCode).toBe(200)
    expect(((await c.call('permission.rules', { session })).result as { rules: unknown[] }).rules).toEqual([])
    expect(types(c).filter((t) => t.startsWith('permission.'))).toEqual([
      'permission.requested',
      'permission.replied',
      'permission.rule.added',
      'permission.rule.removed',
    ])
    c.close()
  })

  it('reject fails the tool call as denied with the user message', async () => {
    server = await serverWithScript()
    const c = await Client.connect(server.wsUrl, server.token)
    const { session, requestId } = await promptUntilPermission(server, c)
    await c.call('permission.reply', { session, requestId, reply: 'reject', message: 'not now' })
    await c.wait((f) => f.type === 'event' && (f.event as { type: string }).type === 'run.finished')
    const failed = c.events().find((e) => (e.event as { type: string }).type === 'tool.failed')
    expect((failed!.event as { data: { error: { kind: string; message: string } } }).data.error).toMatchObject({
      kind: 'denied',
    })
    expect((failed!.event as { data: { error: { message: string } } }).data.error.message).toContain('not now')
    c.close()
  })

  it('a reject without a message ends the run: the call fails denied and the model gets no further step', async () => {
    server = await serverWithScript()
    const c = await Client.connect(server.wsUrl, server.token)
    const { session, requestId } = await promptUntilPermission(server, c)
    await c.call('permission.reply', { session, requestId, reply: 'reject' })
    await c.wait((f) => f.type === 'event' && (f.event as { type: string }).type === 'run.finished')
    const all = types(c).filter((t) => !t.endsWith('.delta') && t !== 'workspace.snapshotted')
    expect(all.slice(all.indexOf('message.completed'))).toEqual([
      'message.completed',
      'tool.called',
      'permission.requested',
      'permission.replied',
      'tool.failed',
      'run.finished',
    ])
    const finished = c.events().find((e) => (e.event as { type: string }).type === 'run.finished')?.event as {
      data: { outcome: string }
    }
    expect(finished.data).toEqual({ runId: expect.any(String), outcome: 'rejected' })
    const state = (await c.call('session.state', { session })).result as Parameters<typeof renderTranscript>[0]
    expect(state.session).toMatchObject({ status: 'idle', lastRun: { outcome: 'rejected' } })
    expect(state.parts.find((p) => p.type === 'tool')).toMatchObject({
      state: 'error',
      error: { kind: 'denied' },
      permission: { reply: 'reject', by: { id: 'owner', name: 'owner' } },
    })
    c.close()
  })

  it('with permission.continueOnReject in the config a reject fails the call and the run goes on', async () => {
    server = await serverWithScript({ continueOnReject: true })
    const c = await Client.connect(server.wsUrl, server.token)
    const { session, requestId } = await promptUntilPermission(server, c)
    await c.call('permission.reply', { session, requestId, reply: 'reject' })
    await c.wait((f) => f.type === 'event' && (f.event as { type: string }).type === 'run.finished')
    const all = types(c).filter((t) => !t.endsWith('.delta') && t !== 'workspace.snapshotted')
    expect(all.slice(all.indexOf('tool.failed'))).toEqual([
      'tool.failed',
      'message.created',
      'step.started',
      'text.started',
      'text.ended',
      'step.finished',
      'message.completed',
      'run.finished',
    ])
    const finished = c.events().find((e) => (e.event as { type: string }).type === 'run.finished')?.event as {
      data: { outcome: string }
    }
    expect(finished.data.outcome).toBe('idle')
    c.close()
  })

  it('a cancel by a named operate token is attributed to it in the log', async () => {
    server = await serverWithScript()
    const owner = await Client.connect(server.wsUrl, server.token)
    const made = await owner.call('token.create', { name: 'otto', role: 'operate' })
    const { token, tokenId } = made.result as { token: string; tokenId: string }
    const c = await Client.connect(server.wsUrl, token)
    const { session } = await promptUntilPermission(server, c)
    const cancelled = await c.call('run.cancel', { session })
    expect(cancelled.result).toEqual({ cancelled: true })
    await c.wait((f) => f.type === 'event' && (f.event as { type: string }).type === 'run.finished')
    const request = c.events().find((e) => (e.event as { type: string }).type === 'run.cancel.requested')
    expect((request?.event as { meta: unknown } | undefined)?.meta).toMatchObject({
      actor: 'user',
      by: { id: tokenId, name: 'otto' },
      connection: expect.stringMatching(/^conn_/),
      commandId: String(cancelled.id),
    })
    c.close()
    owner.close()
  })

  it('a shutdown answers a ?wait=true request parked on a permission with 202, and completes', async () => {
    server = await serverWithScript()
    const c = await Client.connect(server.wsUrl, server.token)
    const created = await c.call('session.create', { directory: server.dir })
    const session = (created.result as { session: { id: string } }).session.id
    await c.call('subscribe', { sessions: [session], after: 0 })
    const waiting = fetch(`${server.url}/sessions/${session}/inputs?wait=true`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ inputId: 'in_wait', parts: [{ type: 'text', text: 'run echo' }] }),
    })
    await c.wait((f) => f.type === 'event' && (f.event as { type: string }).type === 'permission.requested')
    await server.chronicle.stop()
    const res = await waiting
    expect(res.status).toBe(202)
    expect(await res.json()).toMatchObject({ inputId: 'in_wait', duplicate: false })
    c.close()
  })
})
