import type { ChronicleEvent, DataOf, PermissionRule } from '../../src/events/catalogue.js'

/** Named facts for the decider specs' `given(…)` histories (all of session `ses_1`). */

export const created: ChronicleEvent = {
  type: 'session.created',
  data: { directory: '/repo', agent: 'build', model: 'openai:gpt-5' },
}
export const archived: ChronicleEvent = { type: 'session.archived', data: {} }
export const imported: ChronicleEvent = {
  type: 'session.imported',
  data: { originalId: 'ses_orig', importId: 'imp_1', events: 1, digest: 'sha256:file' },
}

export const accepted = (
  inputId: string,
  text = 'fix the bug',
  delivery: 'steer' | 'queue' = 'steer',
): ChronicleEvent => ({
  type: 'input.accepted',
  data: { inputId, parts: [{ type: 'text', text }], delivery, noReply: false, digest: `digest:${inputId}` },
})
export const delivered = (inputId: string, messageId: string, partId: string): ChronicleEvent => ({
  type: 'input.delivered',
  data: { inputId, messageId, partIds: [partId] },
})

export const runStarted = (runId = 'run_1'): ChronicleEvent => ({
  type: 'run.started',
  data: { runId, reason: 'input' },
})
export const cancelRequested = (runId = 'run_1'): ChronicleEvent => ({ type: 'run.cancel.requested', data: { runId } })
export const runFinished = (runId = 'run_1'): ChronicleEvent => ({
  type: 'run.finished',
  data: { runId, outcome: 'idle' },
})

export const assistant = (messageId: string): ChronicleEvent => ({
  type: 'message.created',
  data: { messageId, role: 'assistant', agent: 'build', model: 'openai:gpt-5' },
})
export const completed = (messageId: string): ChronicleEvent => ({
  type: 'message.completed',
  data: { messageId, finish: 'stop' },
})

export const textStarted = (messageId: string, partId: string): ChronicleEvent => ({
  type: 'text.started',
  data: { messageId, partId },
})
export const textEnded = (partId: string): ChronicleEvent => ({ type: 'text.ended', data: { partId } })
export const reasoningStarted = (messageId: string, partId: string): ChronicleEvent => ({
  type: 'reasoning.started',
  data: { messageId, partId },
})

export const toolInputStarted = (messageId: string, partId: string, tool = 'read'): ChronicleEvent => ({
  type: 'tool.input.started',
  data: { messageId, partId, callId: `call_${partId}`, tool },
})
export const toolCalled = (messageId: string, partId: string, tool = 'read'): ChronicleEvent => ({
  type: 'tool.called',
  data: { messageId, partId, callId: `call_${partId}`, tool, input: {} },
})
export const toolCompleted = (partId: string): ChronicleEvent => ({
  type: 'tool.completed',
  data: { partId, output: 'done' },
})

export const subtaskStarted = (partId: string, childSessionId: string): ChronicleEvent => ({
  type: 'subtask.started',
  data: { partId, callId: `call_${partId}`, childSessionId },
})
export const subtaskFinished = (partId: string, childSessionId: string): ChronicleEvent => ({
  type: 'subtask.finished',
  data: { partId, callId: `call_${partId}`, childSessionId, outcome: 'idle' },
})

export const permissionRequested = (
  requestId: string,
  over: Partial<DataOf<'permission.requested'>> = {},
): ChronicleEvent => ({
  type: 'permission.requested',
  data: { requestId, permission: 'bash', patterns: ['git status'], ...over },
})
export const permissionReplied = (requestId: string, reply: 'once' | 'always' | 'reject' = 'once'): ChronicleEvent => ({
  type: 'permission.replied',
  data: { requestId, reply },
})
export const ruleAdded = (ruleId: string, rule: PermissionRule): ChronicleEvent => ({
  type: 'permission.rule.added',
  data: { ruleId, rule },
})

export const compactionRequested = (
  compactionId: string,
  reason: 'auto' | 'overflow' | 'manual' = 'auto',
): ChronicleEvent => ({
  type: 'compaction.requested',
  data: { compactionId, reason },
})
export const compactionStarted = (compactionId: string): ChronicleEvent => ({
  type: 'compaction.started',
  data: { compactionId },
})
export const compactionCompleted = (compactionId: string, summaryMessageId: string): ChronicleEvent => ({
  type: 'compaction.completed',
  data: { compactionId, summaryMessageId, tokensBefore: 1000, tokensAfter: 100 },
})
export const compactionFailed = (compactionId: string): ChronicleEvent => ({
  type: 'compaction.failed',
  data: { compactionId, error: 'model failed' },
})
