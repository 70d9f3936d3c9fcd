import { describe, expect, it } from 'vitest'
import type { ChronicleEvent, DataOf } from '../../src/events/catalogue.js'
import { decideElicitation, type ElicitationCommand } from '../../src/commands/elicitation.js'
import { FORK_SETTLEMENT, settleInFlight } from '../../src/commands/settle.js'
import { checkElicitationContent } from '../../src/tools/mcp/elicitation-check.js'
import { given, givenView, viewOf } from './given.js'
import { assistant, created, imported, permissionRequested, runStarted, toolCalled } from './history.js'

/**
 * MCP elicitations: `request` parks a server's question in the session
 * (status `waiting`, listed in pendingElicitations); `answer` closes it —
 * accept with content that gets the schema's defaults and must match the
 * schema, decline or cancel without content; `abandon` closes a question
 * whose call was aborted (and only a pending one). Settlement (fork,
 * recovery) cancels every pending question: its call was running.
 */

const schema = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1 },
    seats: { type: 'integer', minimum: 1, maximum: 8, default: 2 },
  },
  required: ['name'],
}
const request: DataOf<'elicitation.requested'> = {
  elicitationId: 'eli_1',
  server: 'booking',
  message: 'Who is the booking for?',
  requestedSchema: schema,
  partId: 'prt_1',
  callId: 'call_1',
}
const requested: ChronicleEvent = { type: 'elicitation.requested', data: request }
const history = [created, runStarted(), assistant('msg_1'), toolCalled('msg_1', 'prt_1', 'booking_book'), requested]

const decide = (command: ElicitationCommand) => (s: Parameters<typeof decideElicitation>[1]) =>
  decideElicitation(command, s, 'ses_1', checkElicitationContent)
const answer = (action: 'accept' | 'decline' | 'cancel', content?: Record<string, unknown>): ElicitationCommand => ({
  type: 'answer',
  elicitationId: 'eli_1',
  action,
  ...(content !== undefined && { content }),
})

describe('decideElicitation: request', () => {
  it('parks the question: the session is waiting and lists it', () => {
    given(created, runStarted())
      .when(decide({ type: 'request', request }))
      .then([requested])
    const session = viewOf(...history).session
    expect(session?.status).toBe('waiting')
    expect(session?.pendingElicitations).toEqual([{ ...request, seq: 5 }])
  })

  it('an imported session is never asked (SESSION_READ_ONLY)', () => {
    given(created, imported)
      .when(decide({ type: 'request', request }))
      .thenFails('SESSION_READ_ONLY')
  })
})

describe('decideElicitation: answer', () => {
  it('accept: the content with the schema defaults applied', () => {
    given(...history)
      .when(decide(answer('accept', { name: 'Ada' })))
      .then([
        {
          type: 'elicitation.answered',
          data: { elicitationId: 'eli_1', action: 'accept', content: { name: 'Ada', seats: 2 } },
        },
      ])
  })

  it('a value the user gave is kept over the default', () => {
    given(...history)
      .when(decide(answer('accept', { name: 'Ada', seats: 5 })))
      .then([
        {
          type: 'elicitation.answered',
          data: { elicitationId: 'eli_1', action: 'accept', content: { name: 'Ada', seats: 5 } },
        },
      ])
  })

  it('decline and cancel carry no content', () => {
    for (const action of ['decline', 'cancel'] as const) {
      given(...history)
        .when(decide(answer(action)))
        .then([{ type: 'elicitation.answered', data: { elicitationId: 'eli_1', action } }])
    }
  })

  it('content against the schema is ELICITATION_INVALID, naming the problem', () => {
    const g = given(...history)
    g.when(decide(answer('accept', {}))).thenFails('ELICITATION_INVALID', /"name" is required/)
    g.when(decide(answer('accept', { name: 'Ada', seats: 9 }))).thenFails('ELICITATION_INVALID', /at most 8/)
    g.when(decide(answer('accept', { name: 'Ada', seats: 1.5 }))).thenFails('ELICITATION_INVALID', /whole number/)
    g.when(decide(answer('accept', { name: '' }))).thenFails('ELICITATION_INVALID', /at least 1 characters/)
    g.when(decide(answer('accept', { name: 'Ada', role: 'admin' }))).thenFails(
      'ELICITATION_INVALID',
      /"role" is not a field/,
    )
    g.when(decide(answer('decline', { name: 'Ada' }))).thenFails('ELICITATION_INVALID', /only with action accept/)
  })

  it('a field named __proto__ in the answer is a stray field, never the prototype', () => {
    given(...history)
      .when(
        decide(answer('accept', JSON.parse('{"name":"Ada","__proto__":{"admin":true}}') as Record<string, unknown>)),
      )
      .thenFails('ELICITATION_INVALID', /"__proto__" is not a field/)
  })

  it('an unknown or already answered question is ELICITATION_NOT_FOUND', () => {
    given(...history)
      .when(decide({ ...answer('decline'), elicitationId: 'eli_9' } as ElicitationCommand))
      .thenFails('ELICITATION_NOT_FOUND', 'no pending elicitation eli_9 in ses_1 (unknown, or already answered)')
    const done: ChronicleEvent = { type: 'elicitation.answered', data: { elicitationId: 'eli_1', action: 'decline' } }
    given(...history, done)
      .when(decide(answer('cancel')))
      .thenFails('ELICITATION_NOT_FOUND')
  })

  it('after the answer the session is busy again (its run goes on), or still waiting on a permission', () => {
    const done: ChronicleEvent = { type: 'elicitation.answered', data: { elicitationId: 'eli_1', action: 'decline' } }
    expect(viewOf(...history, done).session).toMatchObject({ status: 'busy', pendingElicitations: [] })
    const both = [...history, permissionRequested('per_1'), done]
    expect(viewOf(...both).session?.status).toBe('waiting')
  })

  it('no session is SESSION_NOT_FOUND', () => {
    given()
      .when(decide(answer('decline')))
      .thenFails('SESSION_NOT_FOUND')
  })
})

describe('decideElicitation: abandon', () => {
  it('closes a pending question as cancel, with the reason', () => {
    given(...history)
      .when(decide({ type: 'abandon', elicitationId: 'eli_1', reason: 'the call was cancelled' }))
      .then([
        {
          type: 'elicitation.answered',
          data: { elicitationId: 'eli_1', action: 'cancel', reason: 'the call was cancelled' },
        },
      ])
  })

  it('nothing when it was answered in between (the answer stands)', () => {
    const done: ChronicleEvent = { type: 'elicitation.answered', data: { elicitationId: 'eli_1', action: 'decline' } }
    given(...history, done)
      .when(decide({ type: 'abandon', elicitationId: 'eli_1', reason: 'late' }))
      .then([])
  })
})

describe('settlement closes pending questions with their calls', () => {
  it('a fork cancels the question after failing the call it belongs to', () => {
    givenView(...history)
      .when((view) => settleInFlight(view, FORK_SETTLEMENT))
      .then([
        { type: 'tool.failed', data: { partId: 'prt_1', error: { kind: 'aborted', message: 'forked while running' } } },
        {
          type: 'elicitation.answered',
          data: {
            elicitationId: 'eli_1',
            action: 'cancel',
            reason: "forked while running: the MCP server's request ended with its tool call",
          },
        },
        {
          type: 'message.completed',
          data: { messageId: 'msg_1', error: { kind: 'aborted', message: 'forked while running' } },
        },
        {
          type: 'run.finished',
          data: { runId: 'run_1', outcome: 'cancelled', error: { kind: 'aborted', message: 'forked while running' } },
        },
      ])
  })
})
