import { describe, expect, it } from 'vitest'
import type { StoredEvent } from '../../src/events/envelope.js'
import type { Session } from '../../src/projections/fold/model.js'
import { SubscriptionReach } from '../../src/http/reach.js'

/**
 * A limited token's subscription filter (src/http/reach.ts): a session's
 * answer is read once through the read models, and a session born in the
 * stream — a fork or a sub-agent's child — learns it from its first event,
 * with no read. Nothing of an unreached session is ever let through.
 */

const principal = { id: 'tok_1', name: 'watcher', role: 'audit' as const, sessions: ['ses_mine'] }

/** Read models holding these sessions' ancestry, counting each read. */
function readModels(ancestry: Record<string, { forkedFrom?: string; parent?: string }>) {
  const reads: string[] = []
  return {
    reads,
    session: async (id: string) => {
      reads.push(id)
      const a = ancestry[id]
      if (!a) return undefined
      return {
        id,
        ...(a.forkedFrom && { forkedFrom: { sessionId: a.forkedFrom, seq: 1 } }),
        ...(a.parent && { parent: { sessionId: a.parent, callId: 'call_1' } }),
      } as unknown as Session
    },
  }
}

let seq = 0
function event(sessionId: string, version: number, type: string, data: unknown): StoredEvent {
  return {
    seq: ++seq,
    sessionId,
    version,
    type,
    data,
    schemaVersion: 1,
    meta: { actor: 'user' },
    at: '',
  } as StoredEvent
}
const forked = (id: string, from: string) => event(id, 1, 'session.forked', { from: { sessionId: from, seq: 1 } })
const child = (id: string, parent: string) =>
  event(id, 1, 'session.created', {
    directory: '/',
    agent: 'general',
    model: null,
    parent: { sessionId: parent, callId: 'c' },
  })
const plain = (id: string) => event(id, 1, 'session.created', { directory: '/', agent: 'build', model: null })
const renamed = (id: string, version: number) => event(id, version, 'session.renamed', { title: 't' })

describe('SubscriptionReach', () => {
  it('reads an older session once, up its ancestry, and keeps the answer', async () => {
    const models = readModels({ ses_old: { forkedFrom: 'ses_mine' }, ses_other: {} })
    const reach = new SubscriptionReach(models, principal)
    expect(reach.of(renamed('ses_old', 5))).toBeUndefined()
    expect(await reach.resolve('ses_old')).toBe(true)
    expect(await reach.resolve('ses_other')).toBe(false)
    expect([reach.of(renamed('ses_old', 6)), reach.of(renamed('ses_other', 2))]).toEqual([true, false])
    expect(models.reads).toEqual(['ses_old', 'ses_other'])
  })

  it('learns a fork or a child of a reached session from its first event, with no read, down any depth', async () => {
    const models = readModels({})
    const reach = new SubscriptionReach(models, principal)
    expect(reach.of(renamed('ses_mine', 2))).toBeUndefined() // not seen yet: the caller reads it
    expect(await reach.resolve('ses_mine')).toBe(true)
    models.reads.length = 0
    expect(reach.of(forked('ses_fork', 'ses_mine'))).toBe(true)
    expect(reach.of(forked('ses_grand', 'ses_fork'))).toBe(true)
    expect(reach.of(child('ses_child', 'ses_grand'))).toBe(true)
    expect(reach.of(renamed('ses_child', 2))).toBe(true)
    expect(models.reads).toEqual([])
  })

  it('learns that a session of its own, or one descending from an unreached one, is not reached', async () => {
    const models = readModels({ ses_stranger: {} })
    const reach = new SubscriptionReach(models, principal)
    expect(reach.of(plain('ses_new'))).toBe(false)
    expect(await reach.resolve('ses_stranger')).toBe(false)
    expect(reach.of(forked('ses_sfork', 'ses_stranger'))).toBe(false)
    expect(reach.of(child('ses_schild', 'ses_sfork'))).toBe(false)
    expect(reach.of(renamed('ses_schild', 2))).toBe(false)
    expect(models.reads).toEqual(['ses_stranger'])
  })

  it('never takes a session born of one not known yet as unreached: that one is read', async () => {
    const models = readModels({ ses_far: { forkedFrom: 'ses_mine' }, ses_near: { forkedFrom: 'ses_far' } })
    const reach = new SubscriptionReach(models, principal)
    expect(reach.of(forked('ses_near', 'ses_far'))).toBeUndefined()
    expect(await reach.resolve('ses_near')).toBe(true)
    expect(models.reads).toEqual(['ses_near', 'ses_far'])
  })

  it('holds a bounded number of answers; one dropped is read again, the same', async () => {
    const models = readModels({ ses_a: {}, ses_b: {}, ses_c: { parent: 'ses_mine' } })
    const reach = new SubscriptionReach(models, principal, { entries: 2, bytes: 1 << 20, idleMs: 60_000 })
    for (const id of ['ses_a', 'ses_b', 'ses_c']) await reach.resolve(id)
    expect(reach.size).toBe(2)
    expect(reach.of(renamed('ses_a', 2))).toBeUndefined()
    expect(await reach.resolve('ses_a')).toBe(false)
    expect(reach.of(renamed('ses_c', 2))).toBe(true)
  })
})
