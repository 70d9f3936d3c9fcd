import { describe, expect, it } from 'vitest'
import type { StoredEvent } from '../../src/events/envelope.js'
import { openStore } from '../../src/projections/open.js'
import { getSession, listSessions } from '../../src/projections/queries/read-model.js'
import { created, renamed, userMeta } from './fixtures/store.js'

/**
 * docs/ARCHITECTURE.md "The store port", read-your-writes: a read of a
 * session sees every append made to it before the read, queued or not;
 * reads by seq see what is committed. Nobody outside the store commits.
 */
describe('read-your-writes', () => {
  function storeWithTwoSessions() {
    const store = openStore(':memory:')
    store.append('ses_a', [created()], { meta: userMeta })
    store.append('ses_b', [created()], { meta: userMeta })
    const commits: StoredEvent[][] = []
    store.onCommit((events) => commits.push([...events]))
    return { store, commits }
  }

  it('a read of a session sees what was appended to it and is still queued: its events, version and read model', () => {
    const { store } = storeWithTwoSessions()
    void store.enqueue('ses_a', [renamed('queued')], { meta: userMeta })
    expect(getSession(store, 'ses_a')?.title).toBe('queued')

    void store.enqueue('ses_a', [renamed('again')], { meta: userMeta })
    expect(store.version('ses_a')).toBe(3)
    void store.enqueue('ses_a', [renamed('and again')], { meta: userMeta })
    expect(store.readSession('ses_a').map((e) => e.version)).toEqual([1, 2, 3, 4])
  })

  it('a list of sessions sees every session’s queued appends', () => {
    const { store } = storeWithTwoSessions()
    void store.enqueue('ses_b', [renamed('listed')], { meta: userMeta })
    expect(listSessions(store).sessions.map((s) => s.title)).toContain('listed')
  })

  it('reads by seq, and reads as committed, commit nothing: what is queued has no seq yet', async () => {
    const { store, commits } = storeWithTwoSessions()
    const queued = store.enqueue('ses_a', [renamed('queued')], { meta: userMeta })
    expect(store.readAll(0).map((e) => e.seq)).toEqual([1, 2])
    expect(store.readFiltered(['ses_a'], 0, 10)).toHaveLength(1)
    expect(store.get(3)).toBeUndefined()
    expect(store.head()).toBe(2)
    expect(getSession(store.asCommitted, 'ses_a')?.title).not.toBe('queued')
    expect(commits).toEqual([])
    expect((await queued).map((e) => e.seq)).toEqual([3])
    expect(commits).toHaveLength(1)
  })

  it('a commit listener reading a session sees what is committed: no commit starts inside another', async () => {
    const { store, commits } = storeWithTwoSessions()
    const seen: (string | undefined)[] = []
    let b: Promise<StoredEvent[]> | undefined
    store.onCommit((events) => {
      if (!events.some((e) => e.sessionId === 'ses_a')) return
      b = store.enqueue('ses_b', [renamed('b')], { meta: userMeta })
      seen.push(getSession(store, 'ses_b')?.title)
      seen.push(String(store.version('ses_b')))
    })
    await store.enqueue('ses_a', [renamed('a')], { meta: userMeta })
    expect(seen).toEqual(['New session', '1'])
    await b
    expect(commits.map((c) => c.map((e) => e.sessionId))).toEqual([['ses_a'], ['ses_b']])
    expect(getSession(store, 'ses_b')?.title).toBe('b')
  })
})
