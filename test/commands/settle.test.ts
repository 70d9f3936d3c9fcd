import { describe, it } from 'vitest'
import { FORK_SETTLEMENT, type SettleReason, settleInFlight } from '../../src/commands/settle.js'
import { givenView } from './given.js'
import {
  accepted,
  assistant,
  compactionCompleted,
  compactionRequested,
  compactionStarted,
  completed,
  created,
  delivered,
  permissionReplied,
  permissionRequested,
  reasoningStarted,
  runFinished,
  runStarted,
  subtaskFinished,
  subtaskStarted,
  textEnded,
  textStarted,
  toolCalled,
  toolCompleted,
  toolInputStarted,
} from './history.js'

/**
 * Settlement closes whatever a session had in flight: open text/reasoning
 * parts ended, pending/running tools failed with the reason's kind,
 * unfinished subtasks finished `cancelled` (parts in id order); then pending
 * permission requests rejected (if asked); a requested or running compaction
 * failed; open assistant messages completed with an error; the run finished
 * `cancelled` (if asked). Undelivered inputs are left queued.
 */

const RECOVERY: SettleReason = {
  kind: 'interrupted',
  message: 'server restarted',
  rejectPermissions: false,
  finishRun: false,
}
const aborted = { kind: 'aborted', message: 'forked while running' } as const
const interrupted = { kind: 'interrupted', message: 'server restarted' } as const

/** A user turn delivered and an assistant message msg_2 streaming in run_1. */
const running = [
  created,
  accepted('in_1'),
  delivered('in_1', 'msg_1', 'prt_u1'),
  runStarted('run_1'),
  assistant('msg_2'),
]
const closed = [...running, completed('msg_2'), runFinished('run_1')]

describe('settleInFlight', () => {
  it('nothing in flight: nothing to settle', () => {
    givenView(...closed)
      .when((view) => settleInFlight(view, FORK_SETTLEMENT))
      .then([])
  })

  it('no session at all: nothing to settle', () => {
    givenView()
      .when((view) => settleInFlight(view, FORK_SETTLEMENT))
      .then([])
  })

  it('ends open text and reasoning parts; ended ones are left alone', () => {
    givenView(
      ...closed.slice(0, -2),
      textStarted('msg_2', 'prt_a'),
      textEnded('prt_a'),
      textStarted('msg_2', 'prt_b'),
      reasoningStarted('msg_2', 'prt_c'),
      completed('msg_2'),
      runFinished('run_1'),
    )
      .when((view) => settleInFlight(view, FORK_SETTLEMENT))
      .then([
        { type: 'text.ended', data: { partId: 'prt_b' } },
        { type: 'reasoning.ended', data: { partId: 'prt_c' } },
      ])
  })

  it('fails pending and running tools with the given kind; finished tools are left alone', () => {
    const history = [
      ...running,
      toolInputStarted('msg_2', 'prt_a'),
      toolCalled('msg_2', 'prt_b'),
      toolCalled('msg_2', 'prt_c'),
      toolCompleted('prt_c'),
      completed('msg_2'),
      runFinished('run_1'),
    ]
    givenView(...history)
      .when((view) => settleInFlight(view, FORK_SETTLEMENT))
      .then([
        { type: 'tool.failed', data: { partId: 'prt_a', error: aborted } },
        { type: 'tool.failed', data: { partId: 'prt_b', error: aborted } },
      ])
    givenView(...history)
      .when((view) => settleInFlight(view, RECOVERY))
      .then([
        { type: 'tool.failed', data: { partId: 'prt_a', error: interrupted } },
        { type: 'tool.failed', data: { partId: 'prt_b', error: interrupted } },
      ])
  })

  it('finishes an unfinished subtask cancelled, by its call’s part id; a finished one is left alone', () => {
    const history = [
      ...running,
      toolCalled('msg_2', 'prt_a', 'task'),
      subtaskStarted('prt_a', 'ses_child_a'),
      subtaskFinished('prt_a', 'ses_child_a'),
      toolCompleted('prt_a'),
      toolCalled('msg_2', 'prt_b', 'task'),
      subtaskStarted('prt_b', 'ses_child_b'),
    ]
    givenView(...history, completed('msg_2'), runFinished('run_1'))
      .when((view) => settleInFlight(view, FORK_SETTLEMENT))
      .then([
        { type: 'tool.failed', data: { partId: 'prt_b', error: aborted } },
        {
          type: 'subtask.finished',
          data: { partId: 'prt_b', callId: 'call_prt_b', childSessionId: 'ses_child_b', outcome: 'cancelled' },
        },
      ])
  })

  it('rejects pending permission requests when asked to, saying why; answered ones are gone already', () => {
    const history = [
      created,
      permissionRequested('per_1'),
      permissionRequested('per_2'),
      permissionRequested('per_3'),
      permissionReplied('per_2'),
    ]
    givenView(...history)
      .when((view) => settleInFlight(view, FORK_SETTLEMENT))
      .then([
        {
          type: 'permission.replied',
          data: {
            requestId: 'per_1',
            reply: 'reject',
            message: 'forked while running: the request was closed unanswered',
          },
        },
        {
          type: 'permission.replied',
          data: {
            requestId: 'per_3',
            reply: 'reject',
            message: 'forked while running: the request was closed unanswered',
          },
        },
      ])
    givenView(...history)
      .when((view) => settleInFlight(view, RECOVERY))
      .then([])
  })

  it('fails a requested or running compaction; a completed one is left alone', () => {
    givenView(created, compactionRequested('cmp_1'))
      .when((view) => settleInFlight(view, FORK_SETTLEMENT))
      .then([{ type: 'compaction.failed', data: { compactionId: 'cmp_1', error: 'forked while running' } }])
    givenView(created, compactionRequested('cmp_1'), compactionStarted('cmp_1'))
      .when((view) => settleInFlight(view, RECOVERY))
      .then([{ type: 'compaction.failed', data: { compactionId: 'cmp_1', error: 'server restarted' } }])
    givenView(
      ...closed,
      compactionRequested('cmp_1'),
      compactionStarted('cmp_1'),
      compactionCompleted('cmp_1', 'msg_2'),
    )
      .when((view) => settleInFlight(view, FORK_SETTLEMENT))
      .then([])
  })

  it('completes open assistant messages with the error, in id order; user and completed messages are left alone', () => {
    givenView(...running, completed('msg_2'), assistant('msg_4'), assistant('msg_3'))
      .when((view) => settleInFlight(view, RECOVERY))
      .then([
        { type: 'message.completed', data: { messageId: 'msg_3', error: interrupted } },
        { type: 'message.completed', data: { messageId: 'msg_4', error: interrupted } },
      ])
  })

  it('finishes the run cancelled when asked to; otherwise leaves it to be resumed', () => {
    givenView(created, accepted('in_1'), delivered('in_1', 'msg_1', 'prt_u1'), runStarted('run_1'))
      .when((view) => settleInFlight(view, FORK_SETTLEMENT))
      .then([{ type: 'run.finished', data: { runId: 'run_1', outcome: 'cancelled', error: aborted } }])
    givenView(created, accepted('in_1'), delivered('in_1', 'msg_1', 'prt_u1'), runStarted('run_1'))
      .when((view) => settleInFlight(view, RECOVERY))
      .then([])
  })

  it('leaves undelivered input queued', () => {
    givenView(created, accepted('in_1'), accepted('in_2'))
      .when((view) => settleInFlight(view, FORK_SETTLEMENT))
      .then([])
  })

  it('settles everything at once in order: parts by id, permissions, compaction, messages, run', () => {
    const history = [
      ...running,
      reasoningStarted('msg_2', 'prt_c'),
      textStarted('msg_2', 'prt_b'),
      toolInputStarted('msg_2', 'prt_e'),
      toolCalled('msg_2', 'prt_d', 'bash'),
      permissionRequested('per_1', { partId: 'prt_d', callId: 'call_prt_d' }),
      toolCalled('msg_2', 'prt_g', 'task'),
      subtaskStarted('prt_g', 'ses_child'),
      permissionRequested('per_2', { from: { sessionId: 'ses_child' } }),
      compactionRequested('cmp_1'),
      accepted('in_2'),
    ]
    givenView(...history)
      .when((view) => settleInFlight(view, FORK_SETTLEMENT))
      .then([
        { type: 'text.ended', data: { partId: 'prt_b' } },
        { type: 'reasoning.ended', data: { partId: 'prt_c' } },
        { type: 'tool.failed', data: { partId: 'prt_d', error: aborted } },
        { type: 'tool.failed', data: { partId: 'prt_e', error: aborted } },
        { type: 'tool.failed', data: { partId: 'prt_g', error: aborted } },
        {
          type: 'subtask.finished',
          data: { partId: 'prt_g', callId: 'call_prt_g', childSessionId: 'ses_child', outcome: 'cancelled' },
        },
        {
          type: 'permission.replied',
          data: {
            requestId: 'per_1',
            reply: 'reject',
            message: 'forked while running: the request was closed unanswered',
          },
        },
        {
          type: 'permission.replied',
          data: {
            requestId: 'per_2',
            reply: 'reject',
            message: 'forked while running: the request was closed unanswered',
          },
        },
        { type: 'compaction.failed', data: { compactionId: 'cmp_1', error: 'forked while running' } },
        { type: 'message.completed', data: { messageId: 'msg_2', error: aborted } },
        { type: 'run.finished', data: { runId: 'run_1', outcome: 'cancelled', error: aborted } },
      ])
    givenView(...history)
      .when((view) => settleInFlight(view, RECOVERY))
      .then([
        { type: 'text.ended', data: { partId: 'prt_b' } },
        { type: 'reasoning.ended', data: { partId: 'prt_c' } },
        { type: 'tool.failed', data: { partId: 'prt_d', error: interrupted } },
        { type: 'tool.failed', data: { partId: 'prt_e', error: interrupted } },
        { type: 'tool.failed', data: { partId: 'prt_g', error: interrupted } },
        {
          type: 'subtask.finished',
          data: { partId: 'prt_g', callId: 'call_prt_g', childSessionId: 'ses_child', outcome: 'cancelled' },
        },
        { type: 'compaction.failed', data: { compactionId: 'cmp_1', error: 'server restarted' } },
        { type: 'message.completed', data: { messageId: 'msg_2', error: interrupted } },
      ])
  })
})
