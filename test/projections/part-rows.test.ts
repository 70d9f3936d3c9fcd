import { describe, expect, it } from 'vitest'
import { openStore } from '../../src/projections/open.js'
import type { Part } from '../../src/projections/model.js'
import { createPartWriter, encodePart } from '../../src/projections/part-rows.js'
import { getParts } from '../../src/projections/read-model.js'
import { verify } from '../../src/projections/verify.js'

/**
 * How a part row is stored: without the keys its columns hold, deflated when
 * large; what getParts reads is the part as the projection made it.
 */

const tool = (output: string): Part =>
  ({
    id: 'prt_1', sessionId: 'ses_a', messageId: 'msg_1', type: 'tool', callId: 'c1', tool: 'lookup', rawInput: '{"q":"x"}',
    state: 'completed', input: { q: 'x' }, output, title: 'lookup',
  }) as unknown as Part

describe('part rows', () => {
  it('leave out id, sessionId and messageId, keep small parts as JSON and deflate large ones', () => {
    expect(encodePart('ses_a', { id: 'prt_2', sessionId: 'ses_a', messageId: 'msg_1', type: 'step-start', step: 1, contextDigest: 'd' } as Part)).toBe(
      '{"type":"step-start","step":1,"contextDigest":"d"}',
    )
    expect(encodePart('ses_a', tool('short'))).toBeTypeOf('string')
    expect(Buffer.isBuffer(encodePart('ses_a', tool('y'.repeat(2000))))).toBe(true)
    // A part whose sessionId is not its row's keeps it.
    expect(encodePart('ses_b', tool('short'))).toContain('"sessionId":"ses_a"')
  })

  it('read back equal, key order included, whether compact, deflated or whole JSON from older code', () => {
    const store = openStore(':memory:')
    const writer = createPartWriter(store.db)
    const small = { id: 'prt_3', sessionId: 'ses_a', messageId: 'msg_1', type: 'step-start', step: 1, contextDigest: 'd' } as Part
    const large = tool('y'.repeat(5000))
    const foreign = { ...small, id: 'prt_4', sessionId: 'ses_other' } as Part
    for (const p of [large, small, foreign]) writer.write('ses_a', p, undefined)
    store.db.prepare('INSERT INTO parts (session_id, id, message_id, data) VALUES (?, ?, ?, ?)').run('ses_a', 'prt_5', 'msg_1', JSON.stringify({ ...small, id: 'prt_5' }))
    const parts = getParts(store.db, 'ses_a')
    expect(parts).toEqual([large, small, foreign, { ...small, id: 'prt_5' }])
    expect(parts.map((p) => JSON.stringify(p))).toEqual([large, small, foreign, { ...small, id: 'prt_5' }].map((p) => JSON.stringify(p)))
    store.close()
  })

  it('keep the live read model equal to the fold for a tool part with a large output', () => {
    const store = openStore(':memory:')
    const meta = { meta: { actor: 'model' as const } }
    store.append('ses_a', [{ type: 'session.created', data: { directory: '/r', agent: 'build', model: null } }], { meta: { actor: 'user' } })
    store.append('ses_a', [
      { type: 'message.created', data: { messageId: 'msg_1', role: 'assistant', agent: 'build', model: null } },
      { type: 'tool.input.started', data: { messageId: 'msg_1', partId: 'prt_1', callId: 'c1', tool: 'lookup' } },
      { type: 'tool.input.delta', data: { partId: 'prt_1', delta: '{"q":"x"}' } },
      { type: 'tool.called', data: { messageId: 'msg_1', partId: 'prt_1', callId: 'c1', tool: 'lookup', input: { q: 'x' } } },
    ], meta)
    store.append('ses_a', [{ type: 'tool.completed', data: { partId: 'prt_1', output: 'z'.repeat(4000), title: 't' } }], meta)
    const stored = store.db.prepare('SELECT data FROM parts WHERE id = ?').pluck().get('prt_1')
    expect(Buffer.isBuffer(stored)).toBe(true)
    expect(getParts(store.db, 'ses_a')[0]).toMatchObject({ type: 'tool', state: 'completed', output: 'z'.repeat(4000) })
    expect(verify(store).differences).toEqual([])
    store.close()
  })

  it('move a settled text back into its row: no slices are left, and what is read is the text streamed', () => {
    const store = openStore(':memory:')
    const meta = { meta: { actor: 'model' as const } }
    const slices = () => store.db.prepare("SELECT COUNT(*) FROM part_text WHERE part_id = 'prt_1'").pluck().get()
    store.append('ses_a', [{ type: 'session.created', data: { directory: '/r', agent: 'build', model: null } }], { meta: { actor: 'user' } })
    const chunk = 'lorem ipsum dolor sit amet é ✓ '.repeat(3)
    store.append('ses_a', [
      { type: 'message.created', data: { messageId: 'msg_1', role: 'assistant', agent: 'build', model: null } },
      { type: 'text.started', data: { messageId: 'msg_1', partId: 'prt_1' } },
    ], meta)
    for (let i = 0; i < 40; i++) store.append('ses_a', [{ type: 'text.delta', data: { partId: 'prt_1', text: chunk } }], meta)
    expect(slices()).toBeGreaterThan(1)
    expect(getParts(store.db, 'ses_a')[0]).toMatchObject({ type: 'text', text: chunk.repeat(40), ended: false })
    store.append('ses_a', [{ type: 'text.ended', data: { partId: 'prt_1' } }], meta)
    expect(slices()).toBe(0)
    expect(Buffer.isBuffer(store.db.prepare("SELECT data FROM parts WHERE id = 'prt_1'").pluck().get())).toBe(true)
    expect(JSON.stringify(getParts(store.db, 'ses_a')[0])).toBe(
      JSON.stringify({ id: 'prt_1', sessionId: 'ses_a', messageId: 'msg_1', type: 'text', text: chunk.repeat(40), ended: true }),
    )
    expect(verify(store).differences).toEqual([])
    store.close()
  })
})
