import { describe, expect, it } from 'vitest'
import { messageFromRow, messageRow } from '../../src/projections/rows/message-rows.js'
import type { Message } from '../../src/projections/fold/model.js'
import { openStore } from '../../src/projections/open.js'
import { getMessages } from '../../src/projections/queries/read-model.js'

/**
 * How a message row is stored: without the id and sessionId its columns hold;
 * what getMessages reads is the message as the projection made it.
 */

const user = {
  id: 'msg_1',
  sessionId: 'ses_a',
  role: 'user',
  agent: 'build',
  model: 'scripted:x',
  createdAt: '2026-01-01T00:00:00.000Z',
} as unknown as Message

describe('message rows', () => {
  it('leave out id and sessionId only when they lead and equal the columns', () => {
    expect(messageRow('ses_a', 'msg_1', user)).toBe(
      '{"role":"user","agent":"build","model":"scripted:x","createdAt":"2026-01-01T00:00:00.000Z"}',
    )
    expect(messageRow('ses_b', 'msg_1', user)).toBe(JSON.stringify(user))
    expect(messageRow('ses_a', 'msg_2', user)).toBe(JSON.stringify(user))
    const reordered = { role: 'user', id: 'msg_1', sessionId: 'ses_a' } as unknown as Message
    expect(messageRow('ses_a', 'msg_1', reordered)).toBe(JSON.stringify(reordered))
    expect(JSON.stringify(messageFromRow('ses_a', 'msg_1', messageRow('ses_a', 'msg_1', reordered)))).toBe(
      JSON.stringify(reordered),
    )
  })

  it('read back equal, key order included, whether compact or whole JSON from older code', () => {
    const store = openStore(':memory:')
    const insert = store.asCommitted.reader().prepare('INSERT INTO messages (session_id, id, data) VALUES (?, ?, ?)')
    const old = { ...user, id: 'msg_2' } as Message
    insert.run('ses_a', 'msg_1', messageRow('ses_a', 'msg_1', user))
    insert.run('ses_a', 'msg_2', JSON.stringify(old))
    const messages = getMessages(store, 'ses_a')
    expect(messages.map((m) => JSON.stringify(m))).toEqual([user, old].map((m) => JSON.stringify(m)))
    store.close()
  })
})
