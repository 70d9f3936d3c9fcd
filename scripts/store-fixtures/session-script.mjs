/**
 * The scripted session every store fixture holds (docs/UPGRADES.md): one
 * parent session with a permission-gated tool call, a denied one, tokens, a
 * sub-agent's child session, a compaction, a revert and a fork, plus the MCP
 * manager's events — each part only where the version that writes it knows
 * its event types. Plain data, shared by every version's driver.
 */

const TREE_1 = 'a'.repeat(40)
const TREE_2 = 'b'.repeat(40)
const usage = { inputTokens: 120, outputTokens: 30, reasoningTokens: 5, cachedInputTokens: 20 }

/** The parent session up to its first run's end; `child` runs where the sub-agent's task tool does. */
export function firstRun(has) {
  const events = [
    ['session.created', { directory: '/tmp/fx-workspace', agent: 'build', model: 'scripted:fixture', title: 'upgrade fixture', rules: [{ permission: 'bash', pattern: '*', action: 'ask' }] }],
    ['input.accepted', { inputId: 'inp_1', parts: [{ type: 'text', text: 'list the files, then ask a helper' }], delivery: 'queue', noReply: false, digest: 'digest-inp-1' }],
    ['run.started', { runId: 'run_1', reason: 'input' }],
    ['input.delivered', { inputId: 'inp_1', messageId: 'msg_u1', partIds: ['prt_u1'] }],
    ['message.created', { messageId: 'msg_a1', role: 'assistant', parentId: 'msg_u1', agent: 'build', model: 'scripted:fixture' }],
    ['step.started', { messageId: 'msg_a1', partId: 'prt_s1', step: 1, contextDigest: 'fixture-digest-1' }],
    ['reasoning.started', { messageId: 'msg_a1', partId: 'prt_r1' }],
    ['reasoning.delta', { partId: 'prt_r1', text: 'The user wants a listing. ' }],
    ['reasoning.ended', { partId: 'prt_r1' }],
    ['text.started', { messageId: 'msg_a1', partId: 'prt_t1' }],
    ['text.delta', { partId: 'prt_t1', text: 'Listing ' }],
    ['text.delta', { partId: 'prt_t1', text: 'the files.' }],
    ['text.ended', { partId: 'prt_t1' }],
    ['tool.input.started', { messageId: 'msg_a1', partId: 'prt_c1', callId: 'call_1', tool: 'bash' }],
    ['tool.input.delta', { partId: 'prt_c1', delta: '{"command":"ls"}' }],
    ['tool.called', { messageId: 'msg_a1', partId: 'prt_c1', callId: 'call_1', tool: 'bash', input: { command: 'ls' } }],
    ['permission.requested', { requestId: 'per_1', partId: 'prt_c1', callId: 'call_1', permission: 'bash', patterns: ['ls'] }],
    ['permission.replied', { requestId: 'per_1', reply: 'once' }],
    ['tool.progressed', { partId: 'prt_c1', metadata: { output: 'a.txt\n' } }],
    ['tool.completed', { partId: 'prt_c1', output: 'a.txt\nb.txt\n', title: 'ls', metadata: { exit: 0 } }],
    ['tool.input.started', { messageId: 'msg_a1', partId: 'prt_c2', callId: 'call_2', tool: 'bash' }],
    ['tool.called', { messageId: 'msg_a1', partId: 'prt_c2', callId: 'call_2', tool: 'bash', input: { command: 'rm -rf /' } }],
    ['permission.requested', { requestId: 'per_2', partId: 'prt_c2', callId: 'call_2', permission: 'bash', patterns: ['rm -rf /'] }],
    ['permission.replied', { requestId: 'per_2', reply: 'reject', message: 'no' }],
    ['tool.failed', { partId: 'prt_c2', error: { kind: 'denied', message: 'the user rejected this call' } }],
    ['step.finished', { messageId: 'msg_a1', partId: 'prt_f1', finishReason: 'tool-calls', usage }],
  ]
  if (has('workspace.snapshotted'))
    events.push(['workspace.snapshotted', { tree: TREE_1, reason: 'step', messageId: 'msg_a1', changed: [] }])
  events.push(
    ['step.started', { messageId: 'msg_a1', partId: 'prt_s2', step: 2, contextDigest: 'fixture-digest-2' }],
    ['tool.input.started', { messageId: 'msg_a1', partId: 'prt_c3', callId: 'call_3', tool: 'task' }],
    ['tool.called', { messageId: 'msg_a1', partId: 'prt_c3', callId: 'call_3', tool: 'task', input: { description: 'count', prompt: 'count the files', subagent_type: 'general' } }],
    ['subtask.started', { partId: 'prt_c3', callId: 'call_3', childSessionId: 'ses_fx_child' }],
    'child',
    ['subtask.finished', { partId: 'prt_c3', callId: 'call_3', childSessionId: 'ses_fx_child', outcome: 'idle' }],
    ['tool.completed', { partId: 'prt_c3', output: 'two files', title: 'count' }],
    ['todo.updated', { items: [{ content: 'list files', status: 'completed', priority: 'high' }, { content: 'tidy', status: 'pending', priority: 'low' }] }],
    ['step.finished', { messageId: 'msg_a1', partId: 'prt_f2', finishReason: 'stop', usage }],
    ['message.completed', { messageId: 'msg_a1', finish: 'stop', usage: { inputTokens: 240, outputTokens: 60, reasoningTokens: 10, cachedInputTokens: 40 }, cost: 0.0012 }],
    ['run.finished', { runId: 'run_1', outcome: 'idle' }],
    ['permission.rule.added', { ruleId: 'rul_1', rule: { permission: 'bash', pattern: 'ls', action: 'allow' } }],
    ['session.renamed', { title: 'listing files' }],
  )
  return events
}

/** The sub-agent's child session, all of it. */
export function childSession() {
  return [
    ['session.created', { directory: '/tmp/fx-workspace', agent: 'general', model: 'scripted:fixture', parent: { sessionId: 'ses_fx_parent', callId: 'call_3' } }],
    ['input.accepted', { inputId: 'inp_c1', parts: [{ type: 'text', text: 'count the files' }], delivery: 'queue', noReply: false, digest: 'digest-inp-c1' }],
    ['run.started', { runId: 'run_c1', reason: 'input' }],
    ['input.delivered', { inputId: 'inp_c1', messageId: 'msg_cu1', partIds: ['prt_cu1'] }],
    ['message.created', { messageId: 'msg_ca1', role: 'assistant', parentId: 'msg_cu1', agent: 'general', model: 'scripted:fixture' }],
    ['step.started', { messageId: 'msg_ca1', partId: 'prt_cs1', step: 1, contextDigest: 'fixture-digest-c1' }],
    ['text.started', { messageId: 'msg_ca1', partId: 'prt_ct1' }],
    ['text.delta', { partId: 'prt_ct1', text: 'two files' }],
    ['text.ended', { partId: 'prt_ct1' }],
    ['step.finished', { messageId: 'msg_ca1', partId: 'prt_cf1', finishReason: 'stop', usage }],
    ['message.completed', { messageId: 'msg_ca1', finish: 'stop', usage, cost: 0.0004 }],
    ['run.finished', { runId: 'run_c1', outcome: 'idle' }],
  ]
}

/** A second input, a manual compaction of the history, then (where the version has revert) a revert to the first run's end. */
export function compactionAndRevert(has, firstRunEnd) {
  const events = [
    ['input.accepted', { inputId: 'inp_2', parts: [{ type: 'text', text: 'now summarise' }], delivery: 'queue', noReply: false, digest: 'digest-inp-2' }],
    ['run.started', { runId: 'run_2', reason: 'input' }],
    ['input.delivered', { inputId: 'inp_2', messageId: 'msg_u2', partIds: ['prt_u2'] }],
    ['compaction.requested', { compactionId: 'cmp_1', reason: 'manual' }],
    ['compaction.started', { compactionId: 'cmp_1' }],
    ['message.created', { messageId: 'msg_sum', role: 'assistant', parentId: 'msg_u2', agent: 'compaction', model: 'scripted:fixture', summary: true }],
    ['step.started', { messageId: 'msg_sum', partId: 'prt_ss', step: 1, contextDigest: 'fixture-digest-sum' }],
    ['text.started', { messageId: 'msg_sum', partId: 'prt_st' }],
    ['text.delta', { partId: 'prt_st', text: 'Summary: two files were listed.' }],
    ['text.ended', { partId: 'prt_st' }],
    ['step.finished', { messageId: 'msg_sum', partId: 'prt_sf', finishReason: 'stop', usage }],
    ['message.completed', { messageId: 'msg_sum', finish: 'stop', usage, cost: 0.0002 }],
    ['compaction.completed', { compactionId: 'cmp_1', summaryMessageId: 'msg_sum', tokensBefore: 300, tokensAfter: 40 }],
    ['run.finished', { runId: 'run_2', outcome: 'idle' }],
  ]
  if (has('workspace.restore.started')) {
    events.push(
      ['workspace.snapshotted', { tree: TREE_2, reason: 'revert', changed: [] }],
      ['workspace.restore.started', { restoreId: 'rst_1', kind: 'revert', to: firstRunEnd, from: TREE_2, tree: TREE_1, messages: ['msg_u2', 'msg_sum'] }],
      ['workspace.restore.completed', { restoreId: 'rst_1', changed: [] }],
    )
  }
  return events
}

/** The fork's own events after its session.forked. */
export function forkRun() {
  return [
    ['input.accepted', { inputId: 'inp_f1', parts: [{ type: 'text', text: 'and in the fork?' }], delivery: 'queue', noReply: false, digest: 'digest-inp-f1' }],
    ['input.delivered', { inputId: 'inp_f1', messageId: 'msg_fu1', partIds: ['prt_fu1'] }],
    ['session.renamed', { title: 'the fork' }],
  ]
}

/** The MCP manager's events, in its own system stream (where the version has them). */
export function mcpServer() {
  return [
    ['mcp.server.connecting', { server: 'ev', attempt: 1 }],
    ['mcp.server.ready', { server: 'ev', transport: 'stdio', tools: ['ev_echo', 'ev_add'], toolCount: 2, toolsDigest: 'c'.repeat(64) }],
  ]
}
