import { afterEach, describe, expect, it } from 'vitest'
import { Client } from '../http/helpers.js'
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
    server = await serverWithScript({ traces: { endpoint: receiver.url } })
    const client = await Client.connect(server.wsUrl, server.token)
    const { session, events } = await scriptedRun(server, client)
    const { file } = server
    client.close()
    await server.close() // sends what is queued
    server = undefined

    expect(receiver.requests.every((r) => r.path === '/v1/traces' && r.contentType === 'application/json')).toBe(true)
    expect(receiver.resources[0]).toMatchObject({ 'service.name': 'chronicle' })
    const spans = receiver.spans
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

  it('nothing is sent when no endpoint is configured', async () => {
    receiver = await Receiver.start()
    server = await serverWithScript({ traces: { endpoint: undefined } })
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
