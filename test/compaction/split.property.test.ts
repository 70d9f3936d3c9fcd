import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { Message, Part, SessionView } from '../../src/projections/fold/model.js'
import { fitTranscript, splitHistory, transcriptEntries } from '../../src/runtime/compaction/split.js'
import { partsByMessage } from '../../src/runtime/loop/chat-messages.js'
import { estimateMessage } from '../../src/runtime/compaction/tokens.js'

/** Random histories: turns of a user message, then assistant messages with text and tool calls of random sizes. */
const turnArb = fc.record({
  user: fc.integer({ min: 1, max: 400 }),
  replies: fc.array(
    fc.record({
      text: fc.integer({ min: 0, max: 600 }),
      tools: fc.array(fc.integer({ min: 0, max: 3000 }), { maxLength: 3 }),
    }),
    {
      minLength: 1,
      maxLength: 4,
    },
  ),
})

function build(turns: { user: number; replies: { text: number; tools: number[] }[] }[]): SessionView {
  const messages = new Map<string, Message>()
  const parts = new Map<string, Part>()
  let n = 0
  const id = (p: string) => `${p}_${String(++n).padStart(6, '0')}`
  const at = '2026-01-01T00:00:00.000Z'
  for (const t of turns) {
    const u = id('msg')
    messages.set(u, { id: u, sessionId: 's', role: 'user', agent: 'build', model: null, createdAt: at })
    const up = id('prt')
    parts.set(up, { id: up, sessionId: 's', messageId: u, type: 'text', text: 'u'.repeat(t.user), ended: true })
    for (const r of t.replies) {
      const a = id('msg')
      messages.set(a, {
        id: a,
        sessionId: 's',
        role: 'assistant',
        parentId: u,
        agent: 'build',
        model: 'm',
        createdAt: at,
        completedAt: at,
      })
      if (r.text > 0) {
        const tp = id('prt')
        parts.set(tp, { id: tp, sessionId: 's', messageId: a, type: 'text', text: 'a'.repeat(r.text), ended: true })
      }
      for (const size of r.tools) {
        const p = id('prt')
        parts.set(p, {
          id: p,
          sessionId: 's',
          messageId: a,
          type: 'tool',
          callId: p,
          tool: 'read',
          state: 'completed',
          rawInput: '{}',
          input: {},
          output: 'o'.repeat(size),
        })
      }
    }
  }
  return { session: { id: 's', compaction: null } as unknown as SessionView['session'], messages, parts }
}

describe('head/tail split over random histories', () => {
  it('the tail starts at a user message, fits its budget, is the longest such suffix, and the head is never empty', () => {
    fc.assert(
      fc.property(
        fc.array(turnArb, { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 0, max: 3000 }),
        (turns, budget) => {
          const view = build(turns)
          const { head, tail, tailStartMessageId } = splitHistory(view, budget)
          const all = [...head, ...tail]
          expect(all.map((m) => m.id)).toEqual([...view.messages.keys()]) // a partition, in order
          expect(head.length).toBeGreaterThan(0)
          const parts = partsByMessage(view)
          const size = (ms: readonly Message[]) => ms.reduce((s, m) => s + estimateMessage(parts.get(m.id) ?? []), 0)
          if (tail.length > 0) {
            expect(tail[0]!.role).toBe('user')
            expect(tailStartMessageId).toBe(tail[0]!.id)
            expect(size(tail)).toBeLessThanOrEqual(budget)
          } else {
            expect(tailStartMessageId).toBeUndefined()
          }
          // No longer tail would do: every earlier user boundary (after the first message) passes the budget.
          for (let i = 1; i < head.length; i++) {
            if (head[i]!.role === 'user') expect(size(all.slice(i))).toBeGreaterThan(budget)
          }
        },
      ),
      { numRuns: 200 },
    )
  })

  it('the transcript fits its target, keeps the newest entry and says how many it omitted', () => {
    fc.assert(
      fc.property(
        fc.array(turnArb, { minLength: 1, maxLength: 10 }),
        fc.integer({ min: 50, max: 5000 }),
        (turns, target) => {
          const view = build(turns)
          const entries = transcriptEntries(view, [...view.messages.values()])
          const fit = fitTranscript(entries, target)
          const last = entries.at(-1)!
          expect(fit.text).toContain(`${last.label}: ${last.text.slice(0, 100)}`)
          if (fit.omitted > 0) expect(fit.text.startsWith(`[… ${fit.omitted} earlier entries omitted`)).toBe(true)
          // Within the target unless a single cut entry's 200-character floor exceeds it.
          expect(fit.tokens).toBeLessThanOrEqual(Math.max(target, 100) + 30)
        },
      ),
      { numRuns: 200 },
    )
  })
})
