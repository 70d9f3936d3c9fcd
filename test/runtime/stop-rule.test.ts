import { describe, expect, it } from 'vitest'
import type { Message, Part } from '../../src/projections/fold/model.js'
import { answers, viewAnswered } from '../../src/runtime/loop/stop-rule.js'

/** The stop rule (src/runtime/loop/stop-rule.ts): when a run has nothing left to do. */

const at = '2026-12-03T10:00:00.000Z'
const user: Message = { id: 'msg_1', sessionId: 's', role: 'user', agent: 'build', model: null, createdAt: at }
const answer: Message = {
  id: 'msg_2',
  sessionId: 's',
  role: 'assistant',
  parentId: 'msg_1',
  agent: 'build',
  model: 'm',
  createdAt: at,
  completedAt: at,
  finish: 'stop',
}
const none = () => false

describe('the stop rule', () => {
  it('stops when the latest answer follows the latest user message, complete, not for tool calls', () => {
    expect(answers(user, answer, none)).toBe(true)
    expect(answers(undefined, undefined, none)).toBe(true) // nothing asked
  })

  it('goes on while the answer is missing, older, for another message, incomplete, interrupted or calls tools', () => {
    expect(answers(user, undefined, none)).toBe(false)
    expect(answers(user, { ...answer, id: 'msg_0' }, none)).toBe(false)
    expect(answers(user, { ...answer, parentId: 'msg_x' }, none)).toBe(false)
    expect(answers(user, { ...answer, completedAt: undefined } as Message, none)).toBe(false)
    expect(answers(user, { ...answer, error: { kind: 'interrupted', message: 'restart' } }, none)).toBe(false)
    expect(answers(user, { ...answer, finish: 'tool-calls' }, none)).toBe(false)
    expect(answers(user, answer, (id) => id === answer.id)).toBe(false)
  })

  it('reads a view the same way: the latest of each role, its tool parts', () => {
    const view = (messages: Message[], parts: Part[] = []) => ({
      session: null,
      messages: new Map(messages.map((m) => [m.id, m])),
      parts: new Map(parts.map((p) => [p.id, p])),
    })
    expect(viewAnswered(view([answer, user]))).toBe(true)
    const later: Message = { ...user, id: 'msg_3' }
    expect(viewAnswered(view([user, answer, later]))).toBe(false)
    const call = {
      id: 'prt_1',
      sessionId: 's',
      messageId: answer.id,
      type: 'tool',
      callId: 'c1',
      tool: 'read',
      state: 'completed',
      input: {},
    } as unknown as Part
    expect(viewAnswered(view([user, answer], [call]))).toBe(false)
  })
})
