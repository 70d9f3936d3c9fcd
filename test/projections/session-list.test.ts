import { describe, expect, it } from 'vitest'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import { openStore } from '../../src/projections/open.js'
import { getSession, listSessions } from '../../src/projections/queries/read-model.js'

/**
 * Listing sessions: most recently active first (by each session's latest
 * event, which a streamed delta moves without writing the session's row), in
 * keyset pages that neither skip nor repeat a session.
 */

const meta = { meta: { actor: 'user' as const } }
const created: ChronicleEvent = { type: 'session.created', data: { directory: '/r', agent: 'build', model: null } }

function streamingStore() {
  const store = openStore(':memory:')
  for (const id of ['ses_a', 'ses_b', 'ses_c', 'ses_d', 'ses_e', 'ses_f', 'ses_g']) store.append(id, [created], meta)
  // ses_c streams last: only deltas, after its part started.
  store.append(
    'ses_c',
    [
      { type: 'message.created', data: { messageId: 'msg_1', role: 'assistant', agent: 'build', model: null } },
      { type: 'text.started', data: { messageId: 'msg_1', partId: 'prt_1' } },
    ],
    meta,
  )
  store.append('ses_a', [{ type: 'session.renamed', data: { title: 'renamed' } }], meta)
  store.append('ses_c', [{ type: 'text.delta', data: { partId: 'prt_1', text: 'still ' } }], meta)
  store.append('ses_c', [{ type: 'text.delta', data: { partId: 'prt_1', text: 'streaming' } }], meta)
  store.append('ses_f', [{ type: 'session.archived', data: {} }], meta)
  return store
}

describe('the session list', () => {
  it('comes most recently active first, a streaming session by its latest delta', () => {
    const store = streamingStore()
    const { sessions, cursor } = listSessions(store, { limit: 10 })
    expect(sessions.map((s) => s.id)).toEqual(['ses_c', 'ses_a', 'ses_g', 'ses_e', 'ses_d', 'ses_b'])
    expect(cursor).toBeUndefined()
    expect(sessions[0]).toEqual(getSession(store, 'ses_c'))
    expect(sessions[0]).toMatchObject({ version: 5, lastSeq: store.head() - 1 })
    expect(listSessions(store, { archived: true }).sessions.map((s) => s.id)).toEqual(['ses_f'])
    store.close()
  })

  it('pages with a cursor, neither skipping nor repeating a session', () => {
    const store = streamingStore()
    const seen: string[] = []
    let cursor: string | undefined
    do {
      const page = listSessions(store, { limit: 2, ...(cursor && { cursor }) })
      expect(page.sessions.length).toBeLessThanOrEqual(2)
      seen.push(...page.sessions.map((s) => s.id))
      cursor = page.cursor
    } while (cursor)
    expect(seen).toEqual(['ses_c', 'ses_a', 'ses_g', 'ses_e', 'ses_d', 'ses_b'])
    store.close()
  })

  it('refuses a cursor it did not make with BAD_REQUEST', () => {
    const store = streamingStore()
    for (const cursor of ['nonsense', Buffer.from('["2026-01-01","ses_a"]').toString('base64url')]) {
      expect(() => listSessions(store, { cursor })).toThrow(expect.objectContaining({ code: 'BAD_REQUEST' }))
    }
    store.close()
  })
})
