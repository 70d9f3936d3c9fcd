import { afterEach, describe, expect, it, vi } from 'vitest'
import { created, renamed, streamed, userMeta } from '../events/fixtures/store.js'
import { startServer, type TestServer } from './helpers.js'

/**
 * docs/EVENTS.md "Deltas": under load the sessions streaming share commits.
 * A client reading one session needs that session's queued events, and only
 * those: taking every session's with it would cut each one's sharing short.
 */
describe('reading a session while the store is loaded', () => {
  let server: TestServer
  afterEach(async () => {
    vi.useRealTimers()
    await server.close()
  })

  it('commits that session’s queued appends and leaves the others to the loaded interval', async () => {
    server = await startServer({ CHRONICLE_LOG_LEVEL: 'warn' }, { listen: false })
    const { store, app } = server.chronicle
    const ids = Array.from({ length: 64 }, (_, i) => `ses_load${i}`)
    for (const id of ids) store.append(id, [created()], { meta: userMeta })
    const renameAll = (title: string) =>
      ids.map((id) => streamed(store, id, [renamed(`${title} ${id}`)], { meta: userMeta }))
    await Promise.all(renameAll('first')) // an interval of 64 sessions' appends: loaded
    expect(store.loaded()).toBe(true)

    vi.useFakeTimers({ toFake: ['setTimeout'] }) // the loaded interval waits on a timer: held still here
    const queued = renameAll('second')
    const res = await app.inject({
      method: 'GET',
      url: `/sessions/${ids[3]}`,
      headers: { authorization: `Bearer ${server.token}` },
    })
    expect(res.statusCode).toBe(200)
    expect(res.json().session.title).toBe(`second ${ids[3]}`) // its own queued rename, committed for the read
    // another session, as committed (by seq: reading it would commit its own queue): its rename still waits
    expect(store.readFiltered([ids[5] as string], 0, 10).map((e) => e.type)).toEqual([
      'session.created',
      'session.renamed',
    ])

    vi.runOnlyPendingTimers() // the interval ends: the others commit
    vi.useRealTimers()
    await Promise.all(queued)
    expect(store.readFiltered([ids[5] as string], 0, 10)).toHaveLength(3)
  })
})
