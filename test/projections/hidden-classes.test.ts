import { setFlagsFromString } from 'node:v8'
import { describe, expect, it } from 'vitest'
import type { StoredEvent } from '../../src/events/envelope.js'
import { copyWith, mergeOwn } from '../../src/events/copy.js'
import { fold } from '../../src/projections/fold/fold.js'
import { emptyView, type SessionView } from '../../src/projections/fold/model.js'

/**
 * What the read models hold, folded by evolve, shares hidden classes: two
 * sessions with the same history give parts and messages of the same shape.
 * On Node 20 an object literal that starts with a spread and adds members
 * gets a class of its own each time (src/events/copy.ts): the soak's views
 * then held one per part and message, and every read of them went
 * megamorphic.
 */

setFlagsFromString('--allow-natives-syntax')
const sameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (a: unknown, b: unknown) => boolean

let seq = 0
function history(sessionId: string): StoredEvent[] {
  const at = '2026-12-03T10:00:00.000Z'
  const meta = { actor: 'runtime' as const }
  const events = [
    { type: 'session.created', data: { directory: '/w', agent: 'build', model: 'scripted:x' } },
    { type: 'input.accepted', data: { inputId: 'in_1', parts: [{ type: 'text', text: 'hi' }], delivery: 'queue' } },
    { type: 'run.started', data: { runId: 'run_1', reason: 'input' } },
    { type: 'input.delivered', data: { inputId: 'in_1', messageId: 'msg_1', partIds: ['prt_0'] } },
    {
      type: 'message.created',
      data: { messageId: 'msg_2', role: 'assistant', parentId: 'msg_1', agent: 'build', model: 'scripted:x' },
    },
    { type: 'step.started', data: { messageId: 'msg_2', partId: 'prt_1', step: 1, contextDigest: 'd' } },
    { type: 'text.started', data: { messageId: 'msg_2', partId: 'prt_2' } },
    { type: 'text.delta', data: { partId: 'prt_2', text: 'hello' } },
    { type: 'text.ended', data: { partId: 'prt_2' } },
    { type: 'tool.input.started', data: { messageId: 'msg_2', partId: 'prt_3', callId: 'c1', tool: 'read' } },
    { type: 'tool.called', data: { messageId: 'msg_2', partId: 'prt_3', callId: 'c1', tool: 'read', input: {} } },
    { type: 'tool.completed', data: { partId: 'prt_3', output: 'x', metadata: { lines: 1 } } },
    {
      type: 'step.finished',
      data: { messageId: 'msg_2', partId: 'prt_4', finishReason: 'tool-calls', usage: { inputTokens: 1 } },
    },
    { type: 'message.completed', data: { messageId: 'msg_2', finish: 'tool-calls' } },
    { type: 'run.finished', data: { runId: 'run_1', outcome: 'idle' } },
  ]
  return events.map(
    (e, i) => ({ ...e, seq: ++seq, sessionId, version: i + 1, schemaVersion: 1, meta, at }) as StoredEvent,
  )
}

describe('hidden classes of the read models', () => {
  it('are shared by the parts, messages and sessions of two sessions with the same history', () => {
    let a: SessionView = emptyView()
    let b: SessionView = emptyView()
    // enough folds for the inline caches to settle, as a server's would
    for (let i = 0; i < 50; i++) {
      a = fold(emptyView(), history(`ses_a${i}`))
      b = fold(emptyView(), history(`ses_b${i}`))
    }
    const parts = (v: SessionView) => [...v.parts.values()]
    const kinds = parts(a).map((p) => p.type)
    expect(kinds).toEqual(['text', 'step-start', 'text', 'tool', 'step-finish'])
    expect(parts(a).map((p, i) => sameMap(p, parts(b)[i]))).toEqual(kinds.map(() => true))
    const messages = (v: SessionView) => [...v.messages.values()]
    expect(messages(a).map((m, i) => sameMap(m, messages(b)[i]))).toEqual([true, true])
    expect(sameMap(a.session, b.session)).toBe(true)
  })

  it('copyWith and mergeOwn share them too, where a spread-first literal does not', () => {
    const spread = (o: { id: string }) => ({ ...o, done: true })
    const made = Array.from({ length: 200 }, (_, i) => ({
      spread: spread({ id: `p${i}` }),
      copy: copyWith({ id: `p${i}`, done: false }, { done: true }),
      merged: mergeOwn<Record<string, unknown>>({ a: i }, { b: i }),
    }))
    const last = made.slice(-2) as [(typeof made)[0], (typeof made)[0]]
    expect(sameMap(last[0].copy, last[1].copy)).toBe(true)
    expect(sameMap(last[0].merged, last[1].merged)).toBe(true)
    // the engine bug the helpers avoid (Node 20); a newer engine shares these as well
    if (process.versions.node.startsWith('20.')) expect(sameMap(last[0].spread, last[1].spread)).toBe(false)
  })

  it('mergeOwn keeps a "__proto__" key a key', () => {
    const hostile = JSON.parse('{"__proto__": {"polluted": true}, "lines": 2}') as Record<string, unknown>
    const merged = mergeOwn<Record<string, unknown>>({ lines: 1 }, hostile)
    expect(Object.getPrototypeOf(merged)).toBe(Object.prototype)
    expect((merged as { polluted?: boolean }).polluted).toBeUndefined()
    expect(JSON.stringify(merged)).toBe('{"lines":2,"__proto__":{"polluted":true}}')
  })
})
