import type { ChronicleEvent } from '../../src/events/catalogue.js'
import type { EventMeta } from '../../src/events/envelope.js'
import type { EventStore } from '../../src/events/store.js'

/**
 * A recorded session, appended event by event as the runtime would: two
 * runs; user input, reasoning and text deltas, tool calls with input deltas
 * (completed, failed, a sub-agent task), a permission request answered
 * "once", a steering input that waits in the inbox, usage and retries, a
 * compaction, and a third run cut off mid-stream. Ids are fixed strings.
 */
export function recordSession(store: EventStore, sessionId = 'ses_rec'): number[] {
  const seqs: number[] = []
  const add = (actor: EventMeta['actor'], ...events: ChronicleEvent[]) => {
    for (const e of events) seqs.push(...store.append(sessionId, [e], { meta: { actor } }).map((s) => s.seq))
  }
  const text = (type: 'text' | 'reasoning', messageId: string, partId: string, chunks: string[]): ChronicleEvent[] => [
    { type: `${type}.started`, data: { messageId, partId } },
    ...chunks.map((t): ChronicleEvent => ({ type: `${type}.delta`, data: { partId, text: t } })),
    { type: `${type}.ended`, data: { partId } },
  ]
  const usage = { inputTokens: 120, outputTokens: 40 }

  add('user', {
    type: 'session.created',
    data: { directory: '/repo', agent: 'build', model: 'scripted:demo', title: 'Read a file' },
  })
  add('user', {
    type: 'input.accepted',
    data: {
      inputId: 'in_1',
      parts: [{ type: 'text', text: 'what is in README.md?' }],
      delivery: 'queue',
      noReply: false,
      digest: 'd1',
    },
  })
  add('runtime', { type: 'run.started', data: { runId: 'run_1', reason: 'input' } })
  add('runtime', { type: 'input.delivered', data: { inputId: 'in_1', messageId: 'msg_u1', partIds: ['prt_u1'] } })
  add('runtime', {
    type: 'message.created',
    data: { messageId: 'msg_a1', role: 'assistant', parentId: 'msg_u1', agent: 'build', model: 'scripted:demo' },
  })
  add('model', {
    type: 'step.started',
    data: { messageId: 'msg_a1', partId: 'prt_s1', step: 1, contextDigest: 'sha256:aa' },
  })
  add('model', ...text('reasoning', 'msg_a1', 'prt_r1', ['I should ', 'read it']))
  add('model', ...text('text', 'msg_a1', 'prt_t1', ['Let me ', 'look at ', 'the file.']))
  add(
    'model',
    { type: 'tool.input.started', data: { messageId: 'msg_a1', partId: 'prt_c1', callId: 'call_1', tool: 'read' } },
    { type: 'tool.input.delta', data: { partId: 'prt_c1', delta: '{"filePath":' } },
    { type: 'tool.input.delta', data: { partId: 'prt_c1', delta: '"README.md"}' } },
    {
      type: 'tool.called',
      data: { messageId: 'msg_a1', partId: 'prt_c1', callId: 'call_1', tool: 'read', input: { filePath: 'README.md' } },
    },
  )
  add('tool', { type: 'tool.progressed', data: { partId: 'prt_c1', metadata: { bytes: 10 } } })
  add('runtime', { type: 'tool.completed', data: { partId: 'prt_c1', output: '# Demo\n', title: 'README.md' } })
  add(
    'model',
    { type: 'tool.input.started', data: { messageId: 'msg_a1', partId: 'prt_c2', callId: 'call_2', tool: 'bash' } },
    { type: 'tool.input.delta', data: { partId: 'prt_c2', delta: '{"command":"rm -rf build"}' } },
    {
      type: 'tool.called',
      data: {
        messageId: 'msg_a1',
        partId: 'prt_c2',
        callId: 'call_2',
        tool: 'bash',
        input: { command: 'rm -rf build' },
      },
    },
  )
  add('tool', {
    type: 'permission.requested',
    data: { requestId: 'per_1', partId: 'prt_c2', callId: 'call_2', permission: 'bash', patterns: ['rm -rf build'] },
  })
  add('user', {
    type: 'input.accepted',
    data: {
      inputId: 'in_2',
      parts: [{ type: 'text', text: 'careful!' }],
      delivery: 'steer',
      noReply: false,
      digest: 'd2',
    },
  })
  add('user', { type: 'permission.replied', data: { requestId: 'per_1', reply: 'once' } })
  add('runtime', { type: 'tool.failed', data: { partId: 'prt_c2', error: { kind: 'failed', message: 'exit code 1' } } })
  add('model', {
    type: 'step.finished',
    data: { messageId: 'msg_a1', partId: 'prt_f1', finishReason: 'tool-calls', usage },
  })
  add('runtime', { type: 'message.completed', data: { messageId: 'msg_a1', finish: 'tool-calls', usage, cost: 0.01 } })
  add('runtime', {
    type: 'input.delivered',
    data: { inputId: 'in_2', messageId: 'msg_u2', partIds: ['prt_u2'], steered: true },
  })
  add('runtime', {
    type: 'message.created',
    data: { messageId: 'msg_a2', role: 'assistant', parentId: 'msg_u2', agent: 'build', model: 'scripted:demo' },
  })
  add('model', { type: 'step.retried', data: { messageId: 'msg_a2', attempt: 1, delayMs: 100, error: 'rate limited' } })
  add('model', {
    type: 'step.started',
    data: { messageId: 'msg_a2', partId: 'prt_s2', step: 2, contextDigest: 'sha256:bb' },
  })
  add('model', ...text('text', 'msg_a2', 'prt_t2', ['README ', 'says ', '"Demo".']))
  add('model', { type: 'step.finished', data: { messageId: 'msg_a2', partId: 'prt_f2', finishReason: 'stop', usage } })
  add('runtime', { type: 'message.completed', data: { messageId: 'msg_a2', finish: 'stop', usage, cost: 0.02 } })
  add('runtime', { type: 'run.finished', data: { runId: 'run_1', outcome: 'idle' } })
  add('runtime', { type: 'session.renamed', data: { title: 'README contents' } })

  // Second run: a todo list, a sub-agent task, an "always" approval, a compaction.
  add('user', {
    type: 'input.accepted',
    data: {
      inputId: 'in_3',
      parts: [
        { type: 'text', text: 'plan the docs' },
        { type: 'file', path: 'docs/a.md' },
      ],
      delivery: 'queue',
      noReply: false,
      digest: 'd3',
    },
  })
  add('runtime', { type: 'run.started', data: { runId: 'run_2', reason: 'input' } })
  add('runtime', {
    type: 'input.delivered',
    data: { inputId: 'in_3', messageId: 'msg_u3', partIds: ['prt_u3a', 'prt_u3b'] },
  })
  add('runtime', {
    type: 'message.created',
    data: { messageId: 'msg_a3', role: 'assistant', parentId: 'msg_u3', agent: 'build', model: 'scripted:demo' },
  })
  add('model', {
    type: 'step.started',
    data: { messageId: 'msg_a3', partId: 'prt_s3', step: 1, contextDigest: 'sha256:cc' },
  })
  add('model', {
    type: 'tool.called',
    data: { messageId: 'msg_a3', partId: 'prt_c3', callId: 'call_3', tool: 'todowrite', input: { todos: [] } },
  })
  add('tool', {
    type: 'todo.updated',
    data: { items: [{ content: 'write docs', status: 'in_progress', priority: 'high' }] },
  })
  add('runtime', { type: 'tool.completed', data: { partId: 'prt_c3', output: 'ok' } })
  add('model', {
    type: 'tool.called',
    data: { messageId: 'msg_a3', partId: 'prt_c4', callId: 'call_4', tool: 'task', input: { prompt: 'x' } },
  })
  add('tool', {
    type: 'permission.requested',
    data: { requestId: 'per_2', partId: 'prt_c4', callId: 'call_4', permission: 'task', patterns: ['general'] },
  })
  add(
    'user',
    { type: 'permission.replied', data: { requestId: 'per_2', reply: 'always' } },
    {
      type: 'permission.rule.added',
      data: { ruleId: 'rul_1', rule: { permission: 'task', pattern: 'general', action: 'allow' } },
    },
  )
  add('runtime', { type: 'subtask.started', data: { partId: 'prt_c4', callId: 'call_4', childSessionId: 'ses_child' } })
  add('runtime', {
    type: 'subtask.finished',
    data: { partId: 'prt_c4', callId: 'call_4', childSessionId: 'ses_child', outcome: 'idle' },
  })
  add('runtime', { type: 'tool.completed', data: { partId: 'prt_c4', output: 'done' } })
  add('model', {
    type: 'step.finished',
    data: { messageId: 'msg_a3', partId: 'prt_f3', finishReason: 'tool-calls', usage },
  })
  add('runtime', { type: 'message.completed', data: { messageId: 'msg_a3', finish: 'tool-calls', usage } })
  add('runtime', { type: 'compaction.requested', data: { compactionId: 'cmp_1', reason: 'auto' } })
  add('runtime', { type: 'compaction.started', data: { compactionId: 'cmp_1' } })
  add('runtime', {
    type: 'message.created',
    data: {
      messageId: 'msg_sum',
      role: 'assistant',
      parentId: 'msg_u3',
      agent: 'compaction',
      model: 'scripted:demo',
      summary: true,
    },
  })
  add('model', ...text('text', 'msg_sum', 'prt_sum', ['Summary: ', 'docs planned.']))
  add('runtime', { type: 'message.completed', data: { messageId: 'msg_sum', finish: 'stop' } })
  add('runtime', {
    type: 'compaction.completed',
    data: { compactionId: 'cmp_1', summaryMessageId: 'msg_sum', tokensBefore: 900, tokensAfter: 100 },
  })
  add('runtime', { type: 'run.finished', data: { runId: 'run_2', outcome: 'idle' } })

  // Third run, cut off mid-stream: a tool call still streaming its input.
  add('user', {
    type: 'input.accepted',
    data: {
      inputId: 'in_4',
      parts: [{ type: 'text', text: 'now edit' }],
      delivery: 'queue',
      noReply: false,
      digest: 'd4',
    },
  })
  add('runtime', { type: 'run.started', data: { runId: 'run_3', reason: 'input' } })
  add('runtime', { type: 'input.delivered', data: { inputId: 'in_4', messageId: 'msg_u4', partIds: ['prt_u4'] } })
  add('runtime', {
    type: 'message.created',
    data: { messageId: 'msg_a4', role: 'assistant', parentId: 'msg_u4', agent: 'build', model: 'scripted:demo' },
  })
  add('model', {
    type: 'step.started',
    data: { messageId: 'msg_a4', partId: 'prt_s4', step: 1, contextDigest: 'sha256:dd' },
  })
  add('model', { type: 'text.started', data: { messageId: 'msg_a4', partId: 'prt_t4' } })
  add('model', { type: 'text.delta', data: { partId: 'prt_t4', text: 'Editing' } })
  add('model', {
    type: 'tool.input.started',
    data: { messageId: 'msg_a4', partId: 'prt_c5', callId: 'call_5', tool: 'edit' },
  })
  add('model', { type: 'tool.input.delta', data: { partId: 'prt_c5', delta: '{"filePath":"a' } })
  return seqs
}
