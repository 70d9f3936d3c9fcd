import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { openStore } from '../../src/projections/open.js'
import type { Part } from '../../src/projections/fold/model.js'
import { createPartWriter, encodePart } from '../../src/projections/rows/part-rows.js'
import { getParts, getSession } from '../../src/projections/queries/read-model.js'
import { verify } from '../../src/projections/upkeep/verify.js'

/**
 * How a part row is stored: without the keys its columns hold, deflated when
 * large, written when the part changes otherwise than by a streamed delta;
 * what getParts reads is the part as the projection made it.
 */

const tool = (output: string): Part =>
  ({
    id: 'prt_1',
    sessionId: 'ses_a',
    messageId: 'msg_1',
    type: 'tool',
    callId: 'c1',
    tool: 'lookup',
    rawInput: '{"q":"x"}',
    state: 'completed',
    input: { q: 'x' },
    output,
    title: 'lookup',
  }) as unknown as Part

describe('part rows', () => {
  it('leave out id, sessionId and messageId, keep small parts as JSON and deflate large ones', () => {
    expect(
      encodePart('ses_a', {
        id: 'prt_2',
        sessionId: 'ses_a',
        messageId: 'msg_1',
        type: 'step-start',
        step: 1,
        contextDigest: 'd',
      } as Part),
    ).toBe('{"type":"step-start","step":1,"contextDigest":"d"}')
    expect(encodePart('ses_a', tool('short'))).toBeTypeOf('string')
    expect(Buffer.isBuffer(encodePart('ses_a', tool('y'.repeat(2000))))).toBe(true)
    // A part whose sessionId is not its row's keeps it.
    expect(encodePart('ses_b', tool('short'))).toContain('"sessionId":"ses_a"')
  })

  it('read back equal, key order included, whether compact, deflated or whole JSON from older code', () => {
    const store = openStore(':memory:')
    const writer = createPartWriter(store.asCommitted.reader())
    const small = {
      id: 'prt_3',
      sessionId: 'ses_a',
      messageId: 'msg_1',
      type: 'step-start',
      step: 1,
      contextDigest: 'd',
    } as Part
    const large = tool('y'.repeat(5000))
    const foreign = { ...small, id: 'prt_4', sessionId: 'ses_other' } as Part
    for (const p of [large, small, foreign]) writer.write('ses_a', p, 1, 1)
    store.asCommitted
      .reader()
      .prepare('INSERT INTO parts (session_id, id, message_id, data) VALUES (?, ?, ?, ?)')
      .run('ses_a', 'prt_5', 'msg_1', JSON.stringify({ ...small, id: 'prt_5' }))
    const parts = getParts(store, 'ses_a')
    expect(parts).toEqual([large, small, foreign, { ...small, id: 'prt_5' }])
    expect(parts.map((p) => JSON.stringify(p))).toEqual(
      [large, small, foreign, { ...small, id: 'prt_5' }].map((p) => JSON.stringify(p)),
    )
    store.close()
  })

  it('keep the live read model equal to the fold for a tool part with a large output', () => {
    const store = openStore(':memory:')
    const meta = { meta: { actor: 'model' as const } }
    store.append('ses_a', [{ type: 'session.created', data: { directory: '/r', agent: 'build', model: null } }], {
      meta: { actor: 'user' },
    })
    store.append(
      'ses_a',
      [
        { type: 'message.created', data: { messageId: 'msg_1', role: 'assistant', agent: 'build', model: null } },
        { type: 'tool.input.started', data: { messageId: 'msg_1', partId: 'prt_1', callId: 'c1', tool: 'lookup' } },
        { type: 'tool.input.delta', data: { partId: 'prt_1', delta: '{"q":"x"}' } },
        {
          type: 'tool.called',
          data: { messageId: 'msg_1', partId: 'prt_1', callId: 'c1', tool: 'lookup', input: { q: 'x' } },
        },
      ],
      meta,
    )
    store.append(
      'ses_a',
      [{ type: 'tool.completed', data: { partId: 'prt_1', output: 'z'.repeat(4000), title: 't' } }],
      meta,
    )
    const stored = store.asCommitted.reader().prepare('SELECT data FROM parts WHERE id = ?').pluck().get('prt_1')
    expect(Buffer.isBuffer(stored)).toBe(true)
    expect(getParts(store, 'ses_a')[0]).toMatchObject({ type: 'tool', state: 'completed', output: 'z'.repeat(4000) })
    expect(verify(store).differences).toEqual([])
    store.close()
  })

  it("leave a streaming part's row as its start wrote it: the deltas are read from the log, and the end writes the whole text", () => {
    const store = openStore(':memory:')
    const meta = { meta: { actor: 'model' as const } }
    const row = () =>
      store.asCommitted.reader().prepare("SELECT data, through FROM parts WHERE id = 'prt_1'").get() as {
        data: string | Buffer
        through: number | null
      }
    const sessionRow = () =>
      store.asCommitted.reader().prepare("SELECT data FROM sessions WHERE id = 'ses_a'").pluck().get()
    store.append('ses_a', [{ type: 'session.created', data: { directory: '/r', agent: 'build', model: null } }], {
      meta: { actor: 'user' },
    })
    const chunk = 'lorem ipsum dolor sit amet é ✓ '.repeat(3)
    store.append(
      'ses_a',
      [
        { type: 'message.created', data: { messageId: 'msg_1', role: 'assistant', agent: 'build', model: null } },
        { type: 'text.started', data: { messageId: 'msg_1', partId: 'prt_1' } },
      ],
      meta,
    )
    const started = row()
    const session = sessionRow()
    expect(started.through).toBe(3)
    for (let i = 0; i < 40; i++)
      store.append('ses_a', [{ type: 'text.delta', data: { partId: 'prt_1', text: chunk } }], meta)
    expect(row()).toEqual(started)
    expect(sessionRow()).toBe(session)
    expect(getParts(store, 'ses_a')[0]).toMatchObject({ type: 'text', text: chunk.repeat(40), ended: false })
    expect(getSession(store, 'ses_a')).toMatchObject({ version: 43, lastSeq: 43 })
    store.append('ses_a', [{ type: 'text.ended', data: { partId: 'prt_1' } }], meta)
    expect(row().through).toBeNull()
    expect(Buffer.isBuffer(row().data)).toBe(true)
    expect(JSON.stringify(getParts(store, 'ses_a')[0])).toBe(
      JSON.stringify({
        id: 'prt_1',
        sessionId: 'ses_a',
        messageId: 'msg_1',
        type: 'text',
        text: chunk.repeat(40),
        ended: true,
      }),
    )
    expect(verify(store).differences).toEqual([])
    store.close()
  })

  it('read a streaming tool input and text whole after a restart in the middle of both', () => {
    const dir = mkdtempSync(join(tmpdir(), 'chronicle-parts-'))
    try {
      const path = join(dir, 'store.db')
      const meta = { meta: { actor: 'model' as const } }
      const first = openStore(path)
      first.append('ses_a', [{ type: 'session.created', data: { directory: '/r', agent: 'build', model: null } }], {
        meta: { actor: 'user' },
      })
      first.append(
        'ses_a',
        [
          { type: 'message.created', data: { messageId: 'msg_1', role: 'assistant', agent: 'build', model: null } },
          { type: 'reasoning.started', data: { messageId: 'msg_1', partId: 'prt_r' } },
          { type: 'tool.input.started', data: { messageId: 'msg_1', partId: 'prt_t', callId: 'c1', tool: 'lookup' } },
          { type: 'reasoning.delta', data: { partId: 'prt_r', text: 'think ' } },
          { type: 'tool.input.delta', data: { partId: 'prt_t', delta: '{"q":' } },
        ],
        meta,
      )
      first.close()
      const store = openStore(path)
      store.append('ses_a', [{ type: 'reasoning.delta', data: { partId: 'prt_r', text: 'harder' } }], meta)
      store.append('ses_a', [{ type: 'tool.input.delta', data: { partId: 'prt_t', delta: '"x"}' } }], meta)
      expect(getParts(store, 'ses_a')).toMatchObject([
        { id: 'prt_r', text: 'think harder', ended: false },
        { id: 'prt_t', rawInput: '{"q":"x"}', state: 'pending' },
      ])
      expect(verify(store).differences).toEqual([])
      // Ending them writes their rows from what the projection holds in memory.
      store.append(
        'ses_a',
        [
          { type: 'reasoning.delta', data: { partId: 'prt_r', text: '!' } },
          { type: 'reasoning.ended', data: { partId: 'prt_r' } },
          {
            type: 'tool.called',
            data: { messageId: 'msg_1', partId: 'prt_t', callId: 'c1', tool: 'lookup', input: { q: 'x' } },
          },
        ],
        meta,
      )
      expect(
        store.asCommitted.reader().prepare('SELECT COUNT(*) FROM parts WHERE through IS NOT NULL').pluck().get(),
      ).toBe(0)
      expect(getParts(store, 'ses_a')).toMatchObject([
        { id: 'prt_r', text: 'think harder!', ended: true },
        { id: 'prt_t', rawInput: '{"q":"x"}', state: 'running' },
      ])
      expect(verify(store).differences).toEqual([])
      store.close()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
