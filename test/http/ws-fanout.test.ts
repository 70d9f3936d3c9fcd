import { describe, expect, it } from 'vitest'
import type { StoredEvent } from '../../src/events/envelope.js'
import { EventStore } from '../../src/events/store.js'
import type { LogSubscription } from '../../src/events/log-subscription.js'
import { sqliteLog } from '../../src/events/log.js'
import { SessionFanout } from '../../src/http/ws/fanout.js'

/**
 * The WebSocket fan-out hands each single-session subscription only its own
 * session's live events; subscriptions to several sessions or to all see the
 * whole commit. Either way: stored then live, in seq order, exactly once.
 */

const meta = { actor: 'user' as const }
const created = { type: 'session.created' as const, data: { directory: '/tmp', agent: 'build', model: null } }
const rename = (title: string) => ({ type: 'session.renamed' as const, data: { title } })

async function take(sub: LogSubscription, n: number): Promise<StoredEvent[]> {
  const out: StoredEvent[] = []
  while (out.length < n) {
    const next = await sub.next()
    if (next.done) break
    out.push(next.value)
  }
  return out
}

describe('SessionFanout', () => {
  it('routes interleaved commits per session, in seq order, exactly once', async () => {
    const store = EventStore.open(':memory:')
    const fanout = await SessionFanout.open(sqliteLog(store))
    store.append('ses_a', [created, rename('a1')], { meta })
    store.append('ses_b', [created], { meta })
    const a = fanout.subscribe({ sessions: ['ses_a'] }, 1)
    const b = fanout.subscribe({ sessions: ['ses_b'] }, 0)
    const both = fanout.subscribe({ sessions: ['ses_a', 'ses_b'] }, 2)
    const all = fanout.subscribe({ sessions: '*' }, 0)
    const renamedOnly = fanout.subscribe({ sessions: ['ses_a'], types: ['session.renamed'] }, 0)
    // Catch up first, so what follows is live.
    expect((await take(a, 1)).map((e) => e.seq)).toEqual([2])
    expect((await take(b, 1)).map((e) => e.seq)).toEqual([3])
    expect((await take(both, 1)).map((e) => e.seq)).toEqual([3])
    expect((await take(all, 3)).map((e) => e.seq)).toEqual([1, 2, 3])
    expect((await take(renamedOnly, 1)).map((e) => e.seq)).toEqual([2])

    // One batch (one commit) mixing both sessions, then a commit of one session.
    void store.enqueue('ses_a', [rename('a2')], { meta })
    void store.enqueue('ses_b', [rename('b1'), rename('b2')], { meta })
    void store.enqueue('ses_a', [rename('a3')], { meta })
    store.reader() // what is queued commits now, before the append below
    store.append('ses_b', [rename('b3')], { meta })

    expect((await take(a, 2)).map((e) => [e.seq, e.sessionId])).toEqual([
      [4, 'ses_a'],
      [7, 'ses_a'],
    ])
    expect((await take(b, 3)).map((e) => e.seq)).toEqual([5, 6, 8])
    expect((await take(both, 5)).map((e) => e.seq)).toEqual([4, 5, 6, 7, 8])
    expect((await take(all, 5)).map((e) => e.seq)).toEqual([4, 5, 6, 7, 8])
    expect((await take(renamedOnly, 2)).map((e) => e.seq)).toEqual([4, 7])
    // nothing more: each reads the log once more, finds nothing, and is live with nothing held
    for (const s of [a, b, both, all, renamedOnly]) {
      expect(s.take()).toBeUndefined()
      await s.ready()
      expect([s.take(), s.isLive, s.buffered]).toEqual([undefined, true, 0])
      s.close()
    }
    store.close()
  })

  it('a subscription that falls behind its buffer re-reads from the log without a gap', async () => {
    const store = EventStore.open(':memory:')
    const fanout = await SessionFanout.open(sqliteLog(store))
    store.append('ses_a', [created], { meta })
    store.append('ses_b', [created], { meta })
    const a = fanout.subscribe({ sessions: ['ses_a'] }, 0, { maxBuffer: 3 })
    expect((await take(a, 1)).map((e) => e.seq)).toEqual([1])
    for (let i = 0; i < 10; i++) store.append(i % 2 ? 'ses_a' : 'ses_b', [rename(`t${i}`)], { meta })
    expect((await take(a, 5)).map((e) => e.seq)).toEqual([4, 6, 8, 10, 12])
    a.close()
    store.close()
  })

  it('a closed subscription is released; a new one on the same session hears from its own cursor', async () => {
    const store = EventStore.open(':memory:')
    const fanout = await SessionFanout.open(sqliteLog(store))
    store.append('ses_a', [created], { meta })
    const first = fanout.subscribe({ sessions: ['ses_a'] }, 0)
    await take(first, 1)
    first.close()
    store.append('ses_a', [rename('x')], { meta })
    const second = fanout.subscribe({ sessions: ['ses_a'] }, 1)
    expect((await take(second, 1)).map((e) => e.seq)).toEqual([2])
    store.append('ses_a', [rename('y')], { meta })
    expect((await take(second, 1)).map((e) => e.seq)).toEqual([3])
    second.close()
    store.close()
  })

  it('keeps the head as heard: read at open, then the last seq of each commit', async () => {
    const store = EventStore.open(':memory:')
    store.append('ses_a', [created, rename('a')], { meta })
    const fanout = await SessionFanout.open(sqliteLog(store))
    expect(fanout.head).toBe(2)
    store.append('ses_b', [created], { meta })
    expect(fanout.head).toBe(3)
    fanout.close()
    store.append('ses_b', [rename('b')], { meta })
    expect(fanout.head).toBe(3)
    store.close()
  })
})
