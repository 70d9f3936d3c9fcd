import { beforeEach, describe, expect, it } from 'vitest'
import { alwaysRules, decidePermission, type PermissionCommand } from '../../src/commands/permission.js'
import { type IdSource, sequentialIds } from '../../src/events/ids.js'
import { given, viewOf } from './given.js'
import { created, imported, permissionReplied, permissionRequested, ruleAdded } from './history.js'

/**
 * Permission requests, replies and durable approvals: `request` parks a
 * call; `once` lets the parked call run; `always` also adds an approval per
 * "always" pattern (deduplicated); `reject` fails the call with the user's
 * message and rejects every other pending request of the session; `abandon`
 * closes the request of a cancelled call (and only it); `revoke` removes an
 * approval.
 */

let ids: IdSource
beforeEach(() => {
  ids = sequentialIds()
})

const reply = (requestId: string, answer: 'once' | 'always' | 'reject', message?: string): PermissionCommand => ({
  type: 'reply',
  requestId,
  reply: answer,
  ...(message !== undefined && { message }),
})
const gitStatus = permissionRequested('per_1', {
  partId: 'prt_1',
  callId: 'call_1',
  permission: 'bash',
  patterns: ['git status'],
  metadata: { always: ['git status *'] },
})
const editSrc = permissionRequested('per_2', { permission: 'edit', patterns: ['src/a.ts', 'src/b.ts'] })
const subagentAsk = permissionRequested('per_3', {
  permission: 'webfetch',
  patterns: ['https://example.com/*'],
  from: { sessionId: 'ses_child', callId: 'call_9' },
})

describe('decidePermission: request', () => {
  it('parks a call: the request as the gate made it', () => {
    const request = {
      requestId: 'per_1',
      partId: 'prt_1',
      callId: 'call_1',
      permission: 'bash',
      patterns: ['rm -rf build'],
      metadata: { always: ['rm *'] },
    }
    given(created)
      .when((s) => decidePermission({ type: 'request', request }, s, 'ses_1', ids))
      .then([{ type: 'permission.requested', data: request }])
  })

  it('a sub-agent’s request is raised with the child that asked', () => {
    const request = {
      requestId: 'per_2',
      permission: 'edit',
      patterns: ['src/a.ts'],
      from: { sessionId: 'ses_child', partId: 'prt_9', callId: 'call_9' },
    }
    given(created, gitStatus)
      .when((s) => decidePermission({ type: 'request', request }, s, 'ses_1', ids))
      .then([{ type: 'permission.requested', data: request }])
  })
})

describe('decidePermission: once', () => {
  it('replies once; the other pending requests stay pending', () => {
    given(created, gitStatus, editSrc)
      .when((s) => decidePermission(reply('per_1', 'once'), s, 'ses_1', ids))
      .then([{ type: 'permission.replied', data: { requestId: 'per_1', reply: 'once' } }])
  })

  it('a message is not recorded with once', () => {
    given(created, gitStatus)
      .when((s) => decidePermission(reply('per_1', 'once', 'go ahead'), s, 'ses_1', ids))
      .then([{ type: 'permission.replied', data: { requestId: 'per_1', reply: 'once' } }])
  })
})

describe('decidePermission: always', () => {
  it('replies always and adds an approval for the request’s "always" patterns', () => {
    given(created, gitStatus)
      .when((s) => decidePermission(reply('per_1', 'always'), s, 'ses_1', ids))
      .then([
        { type: 'permission.replied', data: { requestId: 'per_1', reply: 'always' } },
        {
          type: 'permission.rule.added',
          data: { ruleId: 'rul_000001', rule: { permission: 'bash', pattern: 'git status *', action: 'allow' } },
        },
      ])
  })

  it('without "always" patterns: one approval per distinct pattern of the request; others stay pending', () => {
    given(
      created,
      permissionRequested('per_2', { permission: 'edit', patterns: ['src/a.ts', 'src/b.ts', 'src/a.ts'] }),
      gitStatus,
    )
      .when((s) => decidePermission(reply('per_2', 'always'), s, 'ses_1', ids))
      .then([
        { type: 'permission.replied', data: { requestId: 'per_2', reply: 'always' } },
        {
          type: 'permission.rule.added',
          data: { ruleId: 'rul_000001', rule: { permission: 'edit', pattern: 'src/a.ts', action: 'allow' } },
        },
        {
          type: 'permission.rule.added',
          data: { ruleId: 'rul_000002', rule: { permission: 'edit', pattern: 'src/b.ts', action: 'allow' } },
        },
      ])
  })

  it('an approval the session already has is not added again', () => {
    given(created, ruleAdded('rul_a', { permission: 'edit', pattern: 'src/a.ts', action: 'allow' }), editSrc)
      .when((s) => decidePermission(reply('per_2', 'always'), s, 'ses_1', ids))
      .then([
        { type: 'permission.replied', data: { requestId: 'per_2', reply: 'always' } },
        {
          type: 'permission.rule.added',
          data: { ruleId: 'rul_000001', rule: { permission: 'edit', pattern: 'src/b.ts', action: 'allow' } },
        },
      ])
  })

  it('every pattern already approved: just the reply', () => {
    given(created, ruleAdded('rul_a', { permission: 'bash', pattern: 'git status *', action: 'allow' }), gitStatus)
      .when((s) => decidePermission(reply('per_1', 'always'), s, 'ses_1', ids))
      .then([{ type: 'permission.replied', data: { requestId: 'per_1', reply: 'always' } }])
  })

  it('the same pattern approved for another permission is not a duplicate', () => {
    given(
      created,
      ruleAdded('rul_a', { permission: 'read', pattern: 'src/a.ts', action: 'allow' }),
      permissionRequested('per_2', { permission: 'edit', patterns: ['src/a.ts'] }),
    )
      .when((s) => decidePermission(reply('per_2', 'always'), s, 'ses_1', ids))
      .then([
        { type: 'permission.replied', data: { requestId: 'per_2', reply: 'always' } },
        {
          type: 'permission.rule.added',
          data: { ruleId: 'rul_000001', rule: { permission: 'edit', pattern: 'src/a.ts', action: 'allow' } },
        },
      ])
  })
})

describe('decidePermission: reject', () => {
  it('rejects the request with the user’s message, and every other pending request of the session with it', () => {
    given(created, gitStatus, editSrc, permissionReplied('per_2'), subagentAsk)
      .when((s) => decidePermission(reply('per_3', 'reject', 'use curl instead'), s, 'ses_1', ids))
      .then([
        { type: 'permission.replied', data: { requestId: 'per_3', reply: 'reject', message: 'use curl instead' } },
        { type: 'permission.replied', data: { requestId: 'per_1', reply: 'reject', message: 'use curl instead' } },
      ])
  })

  it('without a message (or a blank one), none is recorded', () => {
    given(created, gitStatus, editSrc)
      .when((s) => decidePermission(reply('per_1', 'reject'), s, 'ses_1', ids))
      .then([
        { type: 'permission.replied', data: { requestId: 'per_1', reply: 'reject' } },
        { type: 'permission.replied', data: { requestId: 'per_2', reply: 'reject' } },
      ])
    given(created, gitStatus)
      .when((s) => decidePermission(reply('per_1', 'reject', '  \n'), s, 'ses_1', ids))
      .then([{ type: 'permission.replied', data: { requestId: 'per_1', reply: 'reject' } }])
  })
})

describe('decidePermission: abandon', () => {
  it('closes a request whose call was cancelled, rejected with the reason; the others stay pending', () => {
    given(created, gitStatus, editSrc)
      .when((s) =>
        decidePermission({ type: 'abandon', requestId: 'per_1', message: 'the call was cancelled' }, s, 'ses_1', ids),
      )
      .then([
        {
          type: 'permission.replied',
          data: { requestId: 'per_1', reply: 'reject', message: 'the call was cancelled' },
        },
      ])
  })

  it('a request no longer pending: nothing to close', () => {
    given(created, gitStatus, permissionReplied('per_1'))
      .when((s) =>
        decidePermission({ type: 'abandon', requestId: 'per_1', message: 'the call was cancelled' }, s, 'ses_1', ids),
      )
      .then([])
  })
})

describe('decidePermission: revoke', () => {
  it('removes an approval', () => {
    given(created, ruleAdded('rul_a', { permission: 'edit', pattern: 'src/**', action: 'allow' }))
      .when((s) => decidePermission({ type: 'revoke', ruleId: 'rul_a' }, s, 'ses_1', ids))
      .then([{ type: 'permission.rule.removed', data: { ruleId: 'rul_a' } }])
  })

  it('refuses an approval the session does not have: RULE_NOT_FOUND', () => {
    given(created, ruleAdded('rul_a', { permission: 'edit', pattern: 'src/**', action: 'allow' }), {
      type: 'permission.rule.removed',
      data: { ruleId: 'rul_a' },
    })
      .when((s) => decidePermission({ type: 'revoke', ruleId: 'rul_a' }, s, 'ses_1', ids))
      .thenFails('RULE_NOT_FOUND', 'no approval rul_a in ses_1')
  })
})

describe('decidePermission: refusals', () => {
  it('a request that is not pending: PERMISSION_REQUEST_NOT_FOUND', () => {
    given(created, gitStatus)
      .when((s) => decidePermission(reply('per_9', 'once'), s, 'ses_1', ids))
      .thenFails('PERMISSION_REQUEST_NOT_FOUND', 'no pending permission request per_9 in ses_1')
  })

  it('a request already answered: PERMISSION_REQUEST_NOT_FOUND', () => {
    given(created, gitStatus, permissionReplied('per_1'))
      .when((s) => decidePermission(reply('per_1', 'always'), s, 'ses_1', ids))
      .thenFails('PERMISSION_REQUEST_NOT_FOUND')
  })

  it('an unknown session, whatever the command: SESSION_NOT_FOUND', () => {
    const commands: PermissionCommand[] = [
      reply('per_1', 'once'),
      { type: 'request', request: { requestId: 'per_1', permission: 'bash', patterns: ['ls'] } },
      { type: 'abandon', requestId: 'per_1', message: 'cancelled' },
      { type: 'revoke', ruleId: 'rul_a' },
    ]
    for (const command of commands) {
      given()
        .when((s) => decidePermission(command, s, 'ses_9', ids))
        .thenFails('SESSION_NOT_FOUND', 'no session ses_9')
    }
  })

  it('an imported session, even with a request pending: SESSION_READ_ONLY', () => {
    given(created, gitStatus, ruleAdded('rul_a', { permission: 'edit', pattern: 'src/**', action: 'allow' }), imported)
      .when((s) => decidePermission(reply('per_1', 'once'), s, 'ses_1', ids))
      .thenFails('SESSION_READ_ONLY')
    given(created, gitStatus, ruleAdded('rul_a', { permission: 'edit', pattern: 'src/**', action: 'allow' }), imported)
      .when((s) => decidePermission({ type: 'revoke', ruleId: 'rul_a' }, s, 'ses_1', ids))
      .thenFails('SESSION_READ_ONLY')
    given(created, imported)
      .when((s) =>
        decidePermission(
          { type: 'request', request: { requestId: 'per_2', permission: 'bash', patterns: ['ls'] } },
          s,
          'ses_1',
          ids,
        ),
      )
      .thenFails('SESSION_READ_ONLY')
    given(created, gitStatus, imported)
      .when((s) => decidePermission({ type: 'abandon', requestId: 'per_1', message: 'cancelled' }, s, 'ses_1', ids))
      .thenFails('SESSION_READ_ONLY')
  })

  it('an unknown command: BAD_REQUEST', () => {
    const unknown: PermissionCommand = JSON.parse('{"type":"grant"}')
    given(created)
      .when((s) => decidePermission(unknown, s, 'ses_1', ids))
      .thenFails('BAD_REQUEST', 'unknown permission command {"type":"grant"}')
  })
})

describe('alwaysRules', () => {
  const pending = (event: typeof gitStatus) => {
    const request = viewOf(created, event).session?.pendingPermissions[0]
    if (!request) throw new Error('no pending request')
    return request
  }

  it('the request’s metadata.always patterns, when they are all strings', () => {
    expect(alwaysRules(pending(gitStatus))).toEqual([{ permission: 'bash', pattern: 'git status *', action: 'allow' }])
  })

  it('otherwise its patterns, deduplicated', () => {
    const odd = permissionRequested('per_4', {
      permission: 'bash',
      patterns: ['ls', 'ls', 'pwd'],
      metadata: { always: ['ls *', 42] },
    })
    expect(alwaysRules(pending(odd))).toEqual([
      { permission: 'bash', pattern: 'ls', action: 'allow' },
      { permission: 'bash', pattern: 'pwd', action: 'allow' },
    ])
  })
})
