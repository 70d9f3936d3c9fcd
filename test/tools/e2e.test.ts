import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { LanguageModelV3StreamPart } from '@ai-sdk/provider'
import { convertArrayToReadableStream, MockLanguageModelV3 } from 'ai/test'
import { afterEach, describe, expect, it } from 'vitest'
import { createBuiltinTools } from '../../src/tools/builtin/index.js'
import { createMcpManager } from '../../src/tools/mcp/manager.js'
import { autoReply, collapse, harness, type Harness, text } from '../runtime/helpers.js'

/**
 * End to end through the real runtime, store, registry and gate, with the
 * model mocked: the model calls a built-in tool that asks permission; the
 * reply decides whether it runs, and the model's next prompt shows the outcome.
 */
const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
}
const toolCall = (id: string, toolName: string, input: object): LanguageModelV3StreamPart[] => [
  { type: 'tool-call', toolCallId: id, toolName, input: JSON.stringify(input) },
  { type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage },
]
const answer = (t: string): LanguageModelV3StreamPart[] => [
  { type: 'text-start', id: 't1' },
  { type: 'text-delta', id: 't1', delta: t },
  { type: 'text-end', id: 't1' },
  { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
]
const mockModel = (...steps: LanguageModelV3StreamPart[][]) =>
  new MockLanguageModelV3({ doStream: steps.map((s) => ({ stream: convertArrayToReadableStream(s) })) })

describe('permission replies end to end', () => {
  let h: Harness
  afterEach(() => h.close())

  const setup = (model: MockLanguageModelV3) => {
    const todos: unknown[] = []
    h = harness({
      model,
      tools: createBuiltinTools({
        dataDir: '/tmp/unused-chronicle-data',
        updateTodos: (_s, items) => void todos.push(items),
      }),
    })
    return h.session()
  }

  it('reject with a message: the call fails as denied, nothing is written, and the next prompt carries the message', async () => {
    const model = mockModel(toolCall('c1', 'write', { filePath: 'notes.txt', content: 'hi' }), answer('Understood.'))
    const id = setup(model)
    autoReply(h, 'reject', 'Do not create files; answer in chat.')
    await h.runtime.submit(id, { parts: text('write a note') })
    await h.runtime.idle(id)

    expect(existsSync(join(h.directory, 'notes.txt'))).toBe(false)
    // the trace in docs/TOOLS.md ("ask → reject")
    expect(collapse(h.types(id))).toEqual([
      'session.created',
      'input.accepted',
      'run.started',
      'input.delivered',
      'message.created',
      'step.started',
      'tool.input.started',
      'tool.input.delta',
      'step.finished',
      'message.completed',
      'tool.called',
      'permission.requested',
      'permission.replied',
      'tool.failed',
      'message.created',
      'step.started',
      'text.started',
      'text.delta',
      'text.ended',
      'step.finished',
      'message.completed',
      'run.finished',
    ])
    const failed = h.events(id).find((e) => e.type === 'tool.failed')
    expect(failed?.data).toMatchObject({ error: { kind: 'denied', message: 'Do not create files; answer in chat.' } })
    const lastMessage = model.doStreamCalls[1]?.prompt.at(-1)
    expect(lastMessage).toMatchObject({
      role: 'tool',
      content: [
        {
          type: 'tool-result',
          toolCallId: 'c1',
          output: { value: expect.stringContaining('Do not create files; answer in chat.') },
        },
      ],
    })
  })

  it('once: the call runs and the model sees its result', async () => {
    const model = mockModel(toolCall('c1', 'write', { filePath: 'notes.txt', content: 'hi' }), answer('Done.'))
    const id = setup(model)
    const asked = autoReply(h, 'once')
    await h.runtime.submit(id, { parts: text('write a note') })
    await h.runtime.idle(id)
    expect(asked).toEqual(['edit'])
    expect(readFileSync(join(h.directory, 'notes.txt'), 'utf8')).toBe('hi')
    expect(model.doStreamCalls[1]?.prompt.at(-1)).toMatchObject({
      role: 'tool',
      content: [{ toolCallId: 'c1', output: { value: expect.stringContaining('Created notes.txt') } }],
    })
  })

  it('always: the approval is recorded, so the second identical bash call does not ask', async () => {
    const model = mockModel(
      toolCall('c1', 'bash', { command: 'echo one' }),
      toolCall('c2', 'bash', { command: 'echo two' }),
      answer('Both ran.'),
    )
    const id = setup(model)
    const asked = autoReply(h, 'always')
    await h.runtime.submit(id, { parts: text('echo twice') })
    await h.runtime.idle(id)
    expect(asked).toEqual(['bash'])
    expect(
      h
        .events(id)
        .filter((e) => e.type === 'permission.rule.added')
        .map((e) => e.data),
    ).toEqual([
      { ruleId: expect.stringMatching(/^rul_/), rule: { permission: 'bash', pattern: 'echo *', action: 'allow' } },
    ])
    const outputs = h.events(id).flatMap((e) => (e.type === 'tool.completed' ? [e.data.output] : []))
    expect(outputs).toEqual([
      'one\n<bash_metadata>\nexit code: 0\n</bash_metadata>',
      'two\n<bash_metadata>\nexit code: 0\n</bash_metadata>',
    ])
  })
})

describe('an MCP server dying mid-call, end to end', () => {
  it('the call is recorded tool.failed {failed}, the model is told, and the run completes', async () => {
    const everything = join(process.cwd(), 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')
    const mcp = createMcpManager([
      { name: 'ev', type: 'local', command: [process.execPath, everything, 'stdio'], environment: {} },
    ])
    await mcp.start()
    const model = mockModel(
      toolCall('c1', 'ev_trigger-long-running-operation', { duration: 20, steps: 40 }),
      answer('The server went away.'),
    )
    const h = harness({
      model,
      tools: [...mcp.tools()],
      agents: [{ name: 'build', rules: [{ permission: 'ev_*', pattern: '*', action: 'allow' }] }],
    })
    try {
      const id = h.session()
      const pid = mcp.status()[0]?.pid as number
      h.store.onCommit((events) => {
        if (events.some((e) => e.type === 'tool.progressed')) process.kill(pid, 'SIGKILL') // first progress: it is running
      })
      await h.runtime.submit(id, { parts: text('run the long operation') })
      await h.runtime.idle(id)
      const toolEvents = collapse(h.types(id)).filter((t) => t.startsWith('tool.') && t !== 'tool.progressed')
      expect(toolEvents).toEqual(['tool.input.started', 'tool.input.delta', 'tool.called', 'tool.failed'])
      const failed = h.events(id).find((e) => e.type === 'tool.failed')
      expect(failed?.data).toMatchObject({
        error: {
          kind: 'failed',
          message: expect.stringMatching(/^The MCP server "ev" failed during trigger-long-running-operation/),
        },
      })
      expect(model.doStreamCalls[1]?.prompt.at(-1)).toMatchObject({ role: 'tool', content: [{ toolCallId: 'c1' }] })
      expect(h.events(id).at(-1)).toMatchObject({ type: 'run.finished', data: { outcome: 'idle' } })
      expect(mcp.status()[0]).toMatchObject({ state: 'failed' })
    } finally {
      await h.close()
      await mcp.close()
    }
  })
})
