import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { Message, Part, Session, SessionView, ToolState } from '../../src/projections/fold/model.js'
import { STEER_PREFIX, toChatMessages, type ChatMessage } from '../../src/runtime/loop/chat-messages.js'

/** History → model messages: every tool call is followed by exactly one result; no result is orphaned. */

const session = { id: 'ses_1', compaction: null } as unknown as Session

const toolPart = fc.record({
  callId: fc.constantFrom('c1', 'c2', 'c3', 'c4', 'c5', 'c6'),
  tool: fc.constantFrom('lookup', 'read'),
  state: fc.constantFrom<ToolState>('pending', 'running', 'completed', 'error'),
  kind: fc.constantFrom('failed', 'invalid', 'denied', 'aborted', 'interrupted' as const),
  rawInput: fc.constantFrom<string>('{"query":"x"}', '{bad', '', '{}'),
})
const partSpec = fc.oneof(
  fc.record({ type: fc.constant('text' as const), text: fc.string({ maxLength: 5 }) }),
  fc.record({ type: fc.constant('tool' as const), tool: toolPart }),
  fc.record({ type: fc.constant('step' as const) }),
)
const messageSpec = fc.record({
  role: fc.constantFrom('user' as const, 'assistant' as const),
  steered: fc.boolean(),
  parts: fc.array(partSpec, { maxLength: 5 }),
})

type MessageSpec = typeof messageSpec extends fc.Arbitrary<infer T> ? T : never

function buildView(specs: MessageSpec[]): SessionView {
  const messages = new Map<string, Message>()
  const parts = new Map<string, Part>()
  let n = 0
  const id = (p: string) => `${p}_${String(++n).padStart(4, '0')}`
  for (const spec of specs) {
    const messageId = id('msg')
    messages.set(messageId, {
      id: messageId,
      sessionId: 'ses_1',
      role: spec.role,
      agent: 'build',
      model: null,
      createdAt: '',
      ...(spec.steered && { steered: true }),
    })
    for (const p of spec.parts) {
      const partId = id('prt')
      const base = { id: partId, sessionId: 'ses_1', messageId }
      if (p.type === 'text') parts.set(partId, { ...base, type: 'text', text: p.text, ended: true })
      else if (p.type === 'step') parts.set(partId, { ...base, type: 'step-start', step: 1, contextDigest: 'd' })
      else {
        const t = p.tool
        parts.set(partId, {
          ...base,
          type: 'tool',
          callId: t.callId,
          tool: t.tool,
          state: t.state,
          rawInput: t.rawInput,
          ...(t.state === 'completed' && { output: 'out' }),
          ...(t.state === 'error' && { error: { kind: t.kind, message: 'why' } }),
        })
      }
    }
  }
  return { session, messages, parts }
}

function checkPairing(chat: ChatMessage[]): void {
  const seen = new Set<string>()
  for (let i = 0; i < chat.length; i++) {
    const m = chat[i] as ChatMessage
    if (m.role === 'tool') {
      const prev = chat[i - 1]
      expect(prev?.role).toBe('assistant') // a result never stands alone
      continue
    }
    if (m.role !== 'assistant') continue
    const calls = m.content.flatMap((c) => (c.type === 'tool-call' ? [c.toolCallId] : []))
    for (const c of calls) {
      expect(seen.has(c)).toBe(false) // a call id is never repeated
      seen.add(c)
    }
    const next = chat[i + 1]
    if (calls.length === 0) {
      expect(next?.role).not.toBe('tool')
      continue
    }
    expect(next?.role).toBe('tool')
    const results = next?.role === 'tool' ? next.content.map((r) => r.toolCallId) : []
    expect(results).toEqual(calls) // exactly one result per call, in order
  }
}

describe('history → model messages', () => {
  it('pairs every tool call with exactly one result, for any history', () => {
    fc.assert(
      fc.property(fc.array(messageSpec, { maxLength: 12 }), (specs) => {
        const chat = toChatMessages(buildView(specs))
        checkPairing(chat)
        for (const m of chat) expect(m.content.length).toBeGreaterThan(0)
      }),
      { numRuns: 500 },
    )
  })

  it('gives unfinished and failed calls synthetic error results the model can read', () => {
    const view = buildView([
      { role: 'user', steered: false, parts: [{ type: 'text', text: 'go' }] },
      {
        role: 'assistant',
        steered: false,
        parts: [
          {
            type: 'tool',
            tool: { callId: 'c1', tool: 'read', state: 'running', kind: 'failed', rawInput: '{"query":"x"}' },
          },
          { type: 'tool', tool: { callId: 'c2', tool: 'read', state: 'error', kind: 'denied', rawInput: '{bad' } },
          { type: 'tool', tool: { callId: 'c3', tool: 'read', state: 'completed', kind: 'failed', rawInput: '{}' } },
        ],
      },
      { role: 'user', steered: true, parts: [{ type: 'text', text: 'hurry' }] },
    ])
    expect(toChatMessages(view)).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'go' }] },
      {
        role: 'assistant',
        content: [
          { type: 'tool-call', toolCallId: 'c1', toolName: 'read', input: { query: 'x' } },
          { type: 'tool-call', toolCallId: 'c2', toolName: 'read', input: {} },
          { type: 'tool-call', toolCallId: 'c3', toolName: 'read', input: {} },
        ],
      },
      {
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId: 'c1',
            toolName: 'read',
            output: {
              type: 'error-text',
              value: 'Error: [Tool execution was interrupted before it returned a result]',
            },
          },
          {
            type: 'tool-result',
            toolCallId: 'c2',
            toolName: 'read',
            output: { type: 'error-text', value: 'Error (denied): why' },
          },
          { type: 'tool-result', toolCallId: 'c3', toolName: 'read', output: { type: 'text', value: 'out' } },
        ],
      },
      { role: 'user', content: [{ type: 'text', text: expect.stringContaining(STEER_PREFIX) }] },
    ])
  })
})
