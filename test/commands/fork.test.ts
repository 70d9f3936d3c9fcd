import { describe, expect, it } from 'vitest'
import { decideFork } from '../../src/commands/fork.js'
import { givenView, viewOf } from './given.js'
import {
  accepted,
  assistant,
  delivered,
  imported,
  permissionRequested,
  ruleAdded,
  runStarted,
  textStarted,
  toolCalled,
} from './history.js'

/**
 * Fork, the pure half: given the parent's view at the fork point, the
 * child's first events — `session.forked {from}` then the settlement of what
 * was in flight there (FORK_SETTLEMENT: `aborted`, "forked while running"),
 * so the child starts idle. A fork of imported history needs a directory
 * (DIRECTORY_REQUIRED) and is marked `fromImport`, so the child keeps none of
 * the file's rules, approvals or queued input.
 *
 * Not specified here, because `fork` resolves them through the store: the
 * view at the seq (SESSION_NOT_FOUND, SEQ_OUT_OF_RANGE), whether the fork
 * point is imported, the directory check and the append.
 */

const rules = [{ permission: 'bash', pattern: '*', action: 'ask' as const }]
const parent = [
  {
    type: 'session.created' as const,
    data: { directory: '/repo', agent: 'build', model: 'openai:gpt-5', title: 'Parent', rules },
  },
  accepted('in_1'),
  delivered('in_1', 'msg_1', 'prt_u1'),
  ruleAdded('rul_1', { permission: 'edit', pattern: 'src/**', action: 'allow' }),
]
const at = { sessionId: 'ses_1', seq: 4 }
const aborted = { kind: 'aborted', message: 'forked while running' } as const

describe('decideFork', () => {
  it('an idle fork point: the child is just forked from it', () => {
    givenView(...parent)
      .when((view) => decideFork(view, at))
      .then([{ type: 'session.forked', data: { from: { sessionId: 'ses_1', seq: 4 } } }])
  })

  it('carries the title and the directory the child works in', () => {
    givenView(...parent)
      .when((view) => decideFork(view, at, { title: 'Try another way', directory: '/elsewhere' }))
      .then([
        {
          type: 'session.forked',
          data: { from: { sessionId: 'ses_1', seq: 4 }, title: 'Try another way', directory: '/elsewhere' },
        },
      ])
  })

  it('history that is not imported is not marked so', () => {
    givenView(...parent)
      .when((view) => decideFork(view, at, { directory: '/elsewhere', fromImport: false }))
      .then([{ type: 'session.forked', data: { from: { sessionId: 'ses_1', seq: 4 }, directory: '/elsewhere' } }])
  })

  it('a fork point in the middle of a run: the same decision settles what was in flight, so the child starts idle', () => {
    const midRun = [
      ...parent,
      runStarted('run_1'),
      assistant('msg_2'),
      textStarted('msg_2', 'prt_a'),
      toolCalled('msg_2', 'prt_b', 'bash'),
      permissionRequested('per_1', { partId: 'prt_b', callId: 'call_prt_b' }),
    ]
    givenView(...midRun)
      .when((view) => decideFork(view, { sessionId: 'ses_1', seq: 9 }))
      .then([
        { type: 'session.forked', data: { from: { sessionId: 'ses_1', seq: 9 } } },
        { type: 'text.ended', data: { partId: 'prt_a' } },
        { type: 'tool.failed', data: { partId: 'prt_b', error: aborted } },
        {
          type: 'permission.replied',
          data: {
            requestId: 'per_1',
            reply: 'reject',
            message: 'forked while running: the request was closed unanswered',
          },
        },
        { type: 'message.completed', data: { messageId: 'msg_2', error: aborted } },
        { type: 'run.finished', data: { runId: 'run_1', outcome: 'cancelled', error: aborted } },
      ])
    const child = viewOf(...midRun, ...decideFork(viewOf(...midRun), { sessionId: 'ses_1', seq: 9 })).session
    expect({ status: child?.status, run: child?.run, pendingPermissions: child?.pendingPermissions }).toEqual({
      status: 'idle',
      run: null,
      pendingPermissions: [],
    })
  })

  it('imported history with a directory: the child is marked fromImport', () => {
    givenView(...parent, imported)
      .when((view) => decideFork(view, { sessionId: 'ses_1', seq: 5 }, { directory: '/mine', fromImport: true }))
      .then([
        {
          type: 'session.forked',
          data: { from: { sessionId: 'ses_1', seq: 5 }, directory: '/mine', fromImport: true },
        },
      ])
  })

  it('imported history without a directory: DIRECTORY_REQUIRED (the imported directory is never used)', () => {
    const error = givenView(...parent, imported)
      .when((view) => decideFork(view, { sessionId: 'ses_1', seq: 5 }, { title: 'Mine', fromImport: true }))
      .thenFails('DIRECTORY_REQUIRED', 'session ses_1 at seq 5 is imported history: a fork of it needs a directory')
    expect(error.details).toEqual({ sessionId: 'ses_1', seq: 5 })
  })

  it('the child of imported history keeps its messages but none of its rules, approvals or queued input, and is writable', () => {
    const history = [...parent, accepted('in_2'), imported]
    const events = decideFork(
      viewOf(...history),
      { sessionId: 'ses_1', seq: 6 },
      { directory: '/mine', fromImport: true },
    )
    const child = viewOf(...history, ...events)
    expect(child.session).toMatchObject({
      directory: '/mine',
      title: 'Parent (fork)',
      rules: [],
      approvals: [],
      inbox: [],
      forkedFrom: { sessionId: 'ses_1', seq: 6 },
    })
    expect(child.session?.imported).toBeUndefined()
    expect([...child.messages.keys()]).toEqual(['msg_1'])
  })

  it('the child of a plain fork keeps the parent’s rules, approvals and queued input', () => {
    const history = [...parent, accepted('in_2')]
    const child = viewOf(...history, ...decideFork(viewOf(...history), { sessionId: 'ses_1', seq: 5 })).session
    expect({
      directory: child?.directory,
      rules: child?.rules,
      approvals: child?.approvals,
      inbox: child?.inbox.map((i) => i.inputId),
    }).toEqual({
      directory: '/repo',
      rules,
      approvals: [{ ruleId: 'rul_1', permission: 'edit', pattern: 'src/**', action: 'allow' }],
      inbox: ['in_2'],
    })
  })
})
