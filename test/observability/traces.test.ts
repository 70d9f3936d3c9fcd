import { afterEach, describe, expect, it } from 'vitest'
import { Client, type Frame } from '../http/helpers.js'
import { startTracing, tracesUrl } from '../../src/observability/tracing.js'
import { subagentHarness, task } from '../subagents/helpers.js'
import { attributes, type OtlpSpan, Receiver } from './otlp-receiver.js'
import { type ScriptedServer, serverWithScript, scriptedRun } from './scripted-run.js'

/**
 * Traces sent over OTLP/HTTP to a real receiver on 127.0.0.1 that decodes
 * the JSON export (docs/OBSERVABILITY.md "Traces"): the run → model call →
 * tool → permission wait tree, the GenAI attributes, the session id and seq
 * range; nothing sent when no endpoint is configured.
 */

let server: ScriptedServer | undefined
let receiver: Receiver | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
  await receiver?.close()
  receiver = undefined
})

describe('traces', () => {
  it('a run is a span; its model calls its children; the tool a child of its call; the permission wait of the tool', async () => {
    receiver = await Receiver.start()
    server = await serverWithScript({ traces: { endpoint: receiver.url, content: false } })
    const client = await Client.connect(server.wsUrl, server.token)
    const { session, events } = await scriptedRun(server, client)
    const { file } = server
    client.close()
    await server.close() // sends what is queued
    server = undefined

    expect(receiver.requests.every((r) => r.path === '/v1/traces' && r.contentType === 'application/json')).toBe(true)
    expect(receiver.resources[0]).toMatchObject({ 'service.name': 'chronicle' })
    // the run's tree: the socket calls that created, subscribed, submitted and answered are spans of their own
    const spans = receiver.spans.filter((s) => !s.name.startsWith('ws '))
    const byName = (name: string) => spans.filter((s) => s.name === name)
    const [run] = byName('chronicle.run')
    const chats = byName(`chat ${file}`)
    const [tool] = byName('execute_tool bash')
    const [wait] = byName('chronicle.permission.wait')
    expect(spans.map((s) => s.name).sort()).toEqual(
      ['chronicle.run', chats[0]?.name, chats[1]?.name, 'execute_tool bash', 'chronicle.permission.wait'].sort(),
    )
    if (!run || !tool || !wait || chats.length !== 2) throw new Error('missing spans')
    // one trace, one tree
    expect(new Set(spans.map((s) => s.traceId)).size).toBe(1)
    expect(run.parentSpanId ?? '').toBe('')
    const [first, second] = chats.sort((a, b) => Number(BigInt(a.startTimeUnixNano) - BigInt(b.startTimeUnixNano)))
    expect(first?.parentSpanId).toBe(run.spanId)
    expect(second?.parentSpanId).toBe(run.spanId)
    expect(tool.parentSpanId).toBe(first?.spanId)
    expect(wait.parentSpanId).toBe(tool.spanId)

    // what each says, by the GenAI conventions and the log's own names
    const runStarted = events.find((e) => e.type === 'run.started')
    expect(attributes(run.attributes)).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'chronicle.session.id': session,
      'chronicle.run.id': runStarted?.data.runId,
      'chronicle.run.outcome': 'idle',
    })
    const runAttributes = attributes(run.attributes)
    expect(runAttributes['chronicle.seq.start']).toBeLessThan(runAttributes['chronicle.seq.end'] as number)
    expect(runAttributes['chronicle.page']).toBe(`#/s/${session}@${runAttributes['chronicle.seq.end']}`)
    expect(attributes(first!.attributes)).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'scripted',
      'gen_ai.system': 'scripted',
      'gen_ai.request.model': file,
      'gen_ai.usage.input_tokens': 10,
      'gen_ai.usage.output_tokens': 5,
      'gen_ai.response.finish_reasons': ['tool-calls'],
      'chronicle.session.id': session,
      'chronicle.cost.usd': 0.02,
    })
    expect(attributes(second!.attributes)).toMatchObject({
      'gen_ai.usage.input_tokens': 20,
      'gen_ai.usage.output_tokens': 7,
      'gen_ai.response.finish_reasons': ['stop'],
    })
    expect(attributes(tool.attributes)).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'bash',
      'gen_ai.tool.call.id': 'call_1',
      'chronicle.session.id': session,
    })
    expect(attributes(wait.attributes)).toMatchObject({
      'chronicle.permission': 'bash',
      'chronicle.permission.reply': 'once',
      'chronicle.session.id': session,
    })
    // every span lies within the run's time
    const within = (span: OtlpSpan) =>
      BigInt(span.startTimeUnixNano) >= BigInt(run.startTimeUnixNano) &&
      BigInt(span.endTimeUnixNano) <= BigInt(run.endTimeUnixNano)
    expect([first, second, tool, wait].every((s) => within(s!))).toBe(true)
    // no prompt or output text in any span
    const text = JSON.stringify(spans)
    expect(text).not.toContain('run echo')
    expect(text).not.toContain('The command printed')
  })

  it("with content asked for, the run carries the user's text, the model call its answer, the tool its arguments and result", async () => {
    receiver = await Receiver.start()
    server = await serverWithScript({ traces: { endpoint: receiver.url, content: true } })
    const client = await Client.connect(server.wsUrl, server.token)
    await scriptedRun(server, client)
    client.close()
    await server.close()
    server = undefined
    const spans = receiver.spans
    const run = spans.find((s) => s.name === 'chronicle.run')
    const tool = spans.find((s) => s.name === 'execute_tool bash')
    const chats = spans.filter((s) => s.name.startsWith('chat '))
    if (!run || !tool) throw new Error('missing spans')
    expect(JSON.parse(attributes(run.attributes)['gen_ai.input.messages'] as string)).toEqual([
      { role: 'user', parts: [{ type: 'text', content: 'run echo' }] },
    ])
    const outputs = chats.map((c) => attributes(c.attributes)['gen_ai.output.messages'])
    expect(outputs).toContain(
      JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: 'The command printed from-bash.' }] }]),
    )
    expect(outputs.filter((o) => o !== undefined)).toHaveLength(1) // the first call only called the tool
    const toolAttributes = attributes(tool.attributes)
    expect(JSON.parse(toolAttributes['gen_ai.tool.call.arguments'] as string)).toMatchObject({
      command: 'echo from-bash',
    })
    expect(toolAttributes['gen_ai.tool.call.result']).toContain('from-bash')
  })

  it('nothing is sent when no endpoint is configured', async () => {
    receiver = await Receiver.start()
    server = await serverWithScript({ traces: { endpoint: undefined, content: false } })
    const client = await Client.connect(server.wsUrl, server.token)
    await scriptedRun(server, client)
    client.close()
    await server.close()
    server = undefined
    expect(receiver.requests).toEqual([])
  })

  it('the endpoint is a base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is; a full traces URL is kept', () => {
    expect(tracesUrl('http://127.0.0.1:4318')).toBe('http://127.0.0.1:4318/v1/traces')
    expect(tracesUrl('http://collector:4318/otlp/')).toBe('http://collector:4318/otlp/v1/traces')
    expect(tracesUrl('http://collector:4318/v1/traces')).toBe('http://collector:4318/v1/traces')
  })
})

describe('traces of sub-agents', () => {
  it("a sub-agent's run is a child of the task call that started it, in the parent's trace", async () => {
    receiver = await Receiver.start()
    const PARENT = 'delegate please'
    const h = subagentHarness([
      { when: { userContains: PARENT, afterToolResult: false }, ...task('c_task', 'CHILD: look up x') },
      {
        when: { userContains: 'CHILD:', afterToolResult: false },
        toolCalls: [{ id: 'c_look', name: 'lookup', input: { query: 'x' } }],
      },
      { when: { userContains: 'CHILD:', afterToolResult: true }, text: 'child found: result for x' },
      { when: { userContains: PARENT, afterToolResult: true }, text: 'parent: done' },
    ])
    const tracing = startTracing(h.store, { endpoint: receiver.url, version: 'test' })
    const id = h.session()
    await h.runtime.submit(id, { parts: [{ type: 'text', text: PARENT }] })
    await h.runtime.idle(id)
    const [childId] = h.children(id)
    await tracing.close()
    await h.close()

    const spans = receiver.spans
    const session = (s: OtlpSpan) => attributes(s.attributes)['chronicle.session.id']
    const runs = spans.filter((s) => s.name === 'chronicle.run')
    const parentRun = runs.find((s) => session(s) === id)
    const childRun = runs.find((s) => session(s) === childId)
    const taskCall = spans.find((s) => s.name === 'execute_tool task')
    const lookup = spans.find((s) => s.name === 'execute_tool lookup')
    expect(runs).toHaveLength(2)
    expect(new Set(spans.map((s) => s.traceId)).size).toBe(1)
    expect(parentRun?.parentSpanId ?? '').toBe('')
    expect(childRun?.parentSpanId).toBe(taskCall?.spanId)
    expect(session(taskCall!)).toBe(id)
    // the child's model calls hang under the child's run, its lookup under the child's first call
    const childCalls = spans.filter((s) => s.name.startsWith('chat ') && session(s) === childId)
    expect(childCalls.map((s) => s.parentSpanId)).toEqual([childRun?.spanId, childRun?.spanId])
    expect(childCalls.map((s) => s.spanId)).toContain(lookup?.parentSpanId)
    expect(session(lookup!)).toBe(childId)
  })
})

describe('traces of requests', () => {
  const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
  const CALLER_SPAN = '00f067aa0ba902b7'
  const SERVER_KIND = 2

  /** A session whose input is submitted over HTTP with the given headers; its permission answered over the socket. */
  async function runOverHttp(headers: Record<string, string>, whileWaiting: (session: string) => void = () => {}) {
    const s = server as ScriptedServer
    const client = await Client.connect(s.wsUrl, s.token)
    const created = await client.call('session.create', { directory: s.dir })
    const session = (created.result as { session: { id: string } }).session.id
    await client.call('subscribe', { sessions: [session], after: 0 })
    const submitted = await fetch(`${s.url}/sessions/${session}/inputs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ inputId: 'in_1', parts: [{ type: 'text', text: 'run echo' }] }),
    })
    expect(submitted.status).toBeLessThan(300)
    const type = (f: Frame) => (f.event as { type?: string } | undefined)?.type
    const requested = await client.wait((f) => type(f) === 'permission.requested')
    whileWaiting(session)
    const requestId = (requested.event as { data: { requestId: string } }).data.requestId
    await client.call('permission.reply', { session, requestId, reply: 'once' })
    await client.wait((f) => type(f) === 'run.finished')
    const events = client.events().map((f) => f.event as { type: string; meta: Record<string, unknown> })
    client.close()
    await s.close() // sends what is queued
    server = undefined
    return { session, events }
  }

  it("a request is a server span, the caller's traceparent its parent; the run links to it, and the permission wait to the socket call that answered", async () => {
    receiver = await Receiver.start()
    server = await serverWithScript({ traces: { endpoint: receiver.url, content: false } })
    const { session, events } = await runOverHttp({ traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` })

    const spans = receiver.spans
    const request = spans.find((s) => s.name === 'POST /sessions/:id/inputs')
    const reply = spans.find((s) => s.name === 'ws permission.reply')
    const run = spans.find((s) => s.name === 'chronicle.run')
    const wait = spans.find((s) => s.name === 'chronicle.permission.wait')
    if (!request || !reply || !run || !wait) throw new Error(`missing spans: ${spans.map((s) => s.name)}`)
    // the request continues the caller's trace
    expect(request).toMatchObject({ traceId: CALLER_TRACE, parentSpanId: CALLER_SPAN, kind: SERVER_KIND })
    expect(attributes(request.attributes)).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/sessions/:id/inputs',
      'http.response.status_code': 202,
      'chronicle.session.id': session,
    })
    expect(attributes(reply.attributes)).toMatchObject({ 'rpc.method': 'permission.reply' })
    // what the calls caused records them, as the server's spans (never the caller's header as given)
    const accepted = events.find((e) => e.type === 'input.accepted')
    expect(accepted?.meta.trace).toBe(`00-${CALLER_TRACE}-${request.spanId}-01`)
    const replied = events.find((e) => e.type === 'permission.replied')
    expect(replied?.meta.trace).toBe(`00-${reply.traceId}-${reply.spanId}-01`)
    // the run is its own trace, linked to the request that gave it its input; the wait to the answer
    expect(run.traceId).not.toBe(CALLER_TRACE)
    expect(
      run.links?.map((l) => ({ traceId: l.traceId, spanId: l.spanId, why: attributes(l.attributes ?? []) })),
    ).toEqual([{ traceId: CALLER_TRACE, spanId: request.spanId, why: { 'chronicle.link': 'input' } }])
    expect(wait.links?.map((l) => l.spanId)).toEqual([reply.spanId])
  })

  it('log lines carry trace and span ids: a request its span, a line about a session its open run', async () => {
    receiver = await Receiver.start()
    server = await serverWithScript({ traces: { endpoint: receiver.url, content: false }, logLevel: 'info' })
    const s = server
    await runOverHttp({}, (session) => s.chronicle.logger.warn({ sessionId: session }, 'a line about the session'))

    const lines = s.logs
      .flatMap((l) => l.split('\n').filter(Boolean))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
    const request = receiver.spans.find((sp) => sp.name === 'POST /sessions/:id/inputs')
    const run = receiver.spans.find((sp) => sp.name === 'chronicle.run')
    if (!request || !run) throw new Error('missing spans')
    const ofRequest = lines.filter((l) => l.span_id === request.spanId)
    expect(ofRequest.map((l) => l.msg)).toEqual(['incoming request', 'request completed'])
    expect(ofRequest.every((l) => l.trace_id === request.traceId)).toBe(true)
    const aboutSession = lines.find((l) => l.msg === 'a line about the session')
    expect(aboutSession).toMatchObject({ trace_id: run.traceId, span_id: run.spanId })
  })

  it("a caller's traceparent that is not one is ignored: the request starts a trace of its own", async () => {
    receiver = await Receiver.start()
    const hostile = [
      `00-${'0'.repeat(32)}-${CALLER_SPAN}-01`, // the all-zero trace
      `00-${CALLER_TRACE.toUpperCase()}-${CALLER_SPAN}-01`,
      `ff-${CALLER_TRACE}-${CALLER_SPAN}-01`,
      `00-${CALLER_TRACE}-${CALLER_SPAN}-01-extra`,
      `00-${CALLER_TRACE}-${CALLER_SPAN}-01`.repeat(200),
    ]
    server = await serverWithScript({ traces: { endpoint: receiver.url, content: false } })
    const s = server
    for (const traceparent of hostile) {
      const res = await fetch(`${s.url}/sessions`, {
        headers: { authorization: `Bearer ${s.token}`, traceparent },
      })
      expect(res.status).toBe(200)
    }
    await s.close()
    server = undefined
    const lists = receiver.spans.filter((sp) => sp.name === 'GET /sessions')
    expect(lists).toHaveLength(hostile.length)
    for (const span of lists) {
      expect(span.parentSpanId ?? '').toBe('')
      expect(span.traceId).not.toBe(CALLER_TRACE)
      expect(span.traceId).toMatch(/^[0-9a-f]{32}$/)
    }
  })

  it('with traces off, no event records a trace', async () => {
    server = await serverWithScript({ traces: { endpoint: undefined, content: false } })
    const { events } = await runOverHttp({ traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` })
    expect(events.length).toBeGreaterThan(10)
    expect(events.filter((e) => 'trace' in e.meta)).toEqual([])
  })
})
