import { describe, expect, it } from 'vitest'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import type { StoredEvent } from '../../src/events/envelope.js'
import { EventStore } from '../../src/events/store.js'
import { openStore } from '../../src/projections/open.js'
import { getParts } from '../../src/projections/queries/read-model.js'
import { sqliteLog } from '../../src/events/log.js'
import { Recorder } from '../../src/runtime/loop/recorder.js'
import { created, delta, modelMeta, renamed, streamed, userMeta } from './fixtures/store.js'

/**
 * docs/EVENTS.md "Deltas": a store keeping up stores every delta as sent; one
 * whose queue holds 64 appends waiting for a commit, or one loaded, stores
 * what it holds of a streaming part as one event. The load here is appended
 * as a run's recorder appends its deltas (`streamed`: nobody awaits each);
 * an append someone awaits ends the loaded interval early.
 */

const LOADED = 64

/** A store with ses_a (streaming part prt_a) and `others` sessions to load the queue with. */
function storeWith(others: number, store = EventStore.open(':memory:')) {
  const messageId = 'msg_a'
  store.append(
    'ses_a',
    [
      created(),
      { type: 'run.started', data: { runId: 'run_1', reason: 'input' } },
      { type: 'message.created', data: { messageId, role: 'assistant', agent: 'build', model: 'scripted:test' } },
      { type: 'text.started', data: { messageId, partId: 'prt_a' } },
    ] as ChronicleEvent[],
    { meta: modelMeta },
  )
  for (let i = 0; i < others; i++) store.append(`ses_${i}`, [created()], { meta: userMeta })
  const load = () =>
    Array.from({ length: others }, (_, i) => streamed(store, `ses_${i}`, [renamed(`t${i}`)], { meta: userMeta }))
  return { store, load }
}

/**
 * ms from just before a loaded commit of `sessions` sessions (the interval runs from its start, which is
 * after this; its end is not: a slow commit ends late) to the next commit
 */
async function waitAfterLoadedCommit(sessions: number): Promise<number> {
  const { store, load } = storeWith(sessions)
  let committed = 0
  store.onCommit((events) => {
    if (events.some((e) => e.sessionId === 'ses_a')) committed = performance.now()
  })
  const before = performance.now()
  await Promise.all(load())
  await streamed(store, 'ses_a', [delta('prt_a', 'x')], { meta: modelMeta })
  store.asCommitted.reader().close()
  return committed - before
}

const deltasOf = (store: EventStore) =>
  store.readSession('ses_a').flatMap((e) => (e.type === 'text.delta' ? [e.data.text] : []))

/** The sessions each commit from now on touched, in commit order. */
function sessionsCommitted(store: EventStore): string[][] {
  const commits: string[][] = []
  store.onCommit((events) => commits.push([...new Set(events.map((e) => e.sessionId))]))
  return commits
}

/** A run's recorder emits one event to the session and settles it, as a run does at its start, steps and end. */
function settleOne(store: EventStore, sessionId: string): Promise<void> {
  const recorder = new Recorder(sqliteLog(store), sessionId)
  recorder.emit(renamed(`settled ${sessionId}`), userMeta)
  return recorder.settle()
}

describe('deltas under load', () => {
  it('a store keeping up stores each delta as it came', async () => {
    const { store } = storeWith(0)
    await Promise.all(['a', 'b', 'c'].map((t) => store.enqueue('ses_a', [delta('prt_a', t)], { meta: modelMeta })))
    expect(deltasOf(store)).toEqual(['a', 'b', 'c'])
  })

  it('behind a loaded queue, consecutive deltas of one part become one event, and every call resolves with it', async () => {
    const { store, load } = storeWith(LOADED)
    const others = load()
    const calls = ['Hel', 'lo', ', world'].map((t) =>
      streamed(store, 'ses_a', [delta('prt_a', t)], { meta: modelMeta }),
    )
    const published: StoredEvent[] = []
    store.onCommit((events) => published.push(...events.filter((e) => e.sessionId === 'ses_a')))
    const results = await Promise.all(calls)
    await Promise.all(others)
    expect(deltasOf(store)).toEqual(['Hello, world'])
    const [merged] = published
    expect(published).toHaveLength(1)
    for (const r of results) expect(r).toEqual([merged])
  })

  it('never merges across parts, actors, a full-durability append or another event in between', async () => {
    const { store, load } = storeWith(LOADED)
    const others = load()
    const runtimeMeta = { actor: 'runtime' as const }
    await Promise.all([
      ...others,
      store.enqueue('ses_a', [delta('prt_a', '1')], { meta: modelMeta }),
      store.enqueue('ses_a', [delta('prt_a', '2')], { meta: runtimeMeta }),
      store.enqueue('ses_a', [delta('prt_a', '3')], { meta: modelMeta, durability: 'full' }),
      store.enqueue('ses_a', [delta('prt_a', '4')], { meta: modelMeta }),
      store.enqueue('ses_a', [renamed('between')], { meta: userMeta }),
      store.enqueue('ses_a', [delta('prt_a', '5')], { meta: modelMeta }),
      store.enqueue('ses_a', [delta('prt_b', '6')], { meta: modelMeta }),
      store.enqueue('ses_a', [{ type: 'reasoning.delta', data: { partId: 'prt_b', text: '7' } }], { meta: modelMeta }),
    ])
    expect(deltasOf(store)).toEqual(['1', '2', '3', '4', '5', '6'])
  })

  it('after a loaded commit the next waits 40 ms, so the sessions streaming share commits', async () => {
    expect(await waitAfterLoadedCommit(LOADED)).toBeGreaterThanOrEqual(36) // 40, less the clocks' millisecond rounding
  })

  it('the more sessions a loaded interval touches, the longer the next wait: 0.5 ms a session, up to 100 ms', async () => {
    // each session touched costs every subscriber of it a frame and a socket write per commit
    for (const [sessions, wait] of [
      [160, 80],
      [400, 100],
    ] as const)
      expect(await waitAfterLoadedCommit(sessions)).toBeGreaterThanOrEqual(wait - 4) // less the clocks' millisecond rounding
  })

  it('a loaded round commits what was queued in transactions of at most 128 appends, one a turn, in queue order', async () => {
    // an event's commit → receipt latency is its transaction's time and its frames': one transaction of every
    // streaming session held each frame behind the last insert
    const { store, load } = storeWith(400)
    await Promise.all(load()) // loads the store
    const commits: string[][] = []
    const turns: number[] = [] // how many commits there were when the turn after each commit came
    let late: Promise<StoredEvent[]> | undefined
    store.onCommit((events) => {
      commits.push(events.map((e) => e.sessionId))
      setImmediate(() => turns.push(commits.length))
      late ??= streamed(store, 'ses_a', [delta('prt_a', 'during')], { meta: modelMeta })
    })
    await Promise.all(load())
    expect(commits.map((c) => c.length)).toEqual([128, 128, 128, 16])
    expect(commits.flat()).toEqual(Array.from({ length: 400 }, (_, i) => `ses_${i}`))
    await late // queued during the round: the next round's
    expect(commits).toHaveLength(5)
    expect(commits[4]).toEqual(['ses_a'])
    expect(turns.slice(0, 4)).toEqual([1, 2, 3, 4])
  })

  it('while the store is loaded, a part’s deltas merge however short the queue', async () => {
    const { store, load } = storeWith(LOADED)
    await Promise.all(load())
    // the queue now holds only these: a server keeping up would store three events
    await Promise.all(['a', 'b', 'c'].map((t) => streamed(store, 'ses_a', [delta('prt_a', t)], { meta: modelMeta })))
    expect(deltasOf(store)).toEqual(['abc'])
  })

  it('while the store is loaded, an append that must commit now takes only its own session’s queued appends', async () => {
    // an input arriving must not cost a commit and frames for every session streaming
    const { store, load } = storeWith(LOADED)
    await Promise.all(load())
    const commits: StoredEvent[][] = []
    store.onCommit((events) => commits.push([...events]))
    const others = load() // queued behind the loaded interval
    const own = streamed(store, 'ses_a', [delta('prt_a', 'queued')], { meta: modelMeta })
    store.append('ses_a', [renamed('now')], { meta: userMeta, durability: 'full', alone: true })
    expect(commits).toHaveLength(1)
    expect(commits[0]?.map((e) => [e.sessionId, e.type])).toEqual([
      ['ses_a', 'text.delta'],
      ['ses_a', 'session.renamed'],
    ])
    await Promise.all([own, ...others])
    expect(commits).toHaveLength(2) // the others, at the interval
    expect(new Set(commits[1]?.map((e) => e.sessionId)).size).toBe(LOADED)
  })

  it('while the store is loaded, any other append still commits everything queued before it', async () => {
    // what it appends may name another session's queued events (a sub-agent's call): those go first
    const { store, load } = storeWith(LOADED)
    await Promise.all(load())
    const others = load()
    store.append('ses_a', [renamed('now')], { meta: userMeta })
    expect(store.readSession('ses_0')).toHaveLength(3)
    await Promise.all(others)
  })

  it('while the store is loaded, a run settling its own appends commits them now, its session’s only', async () => {
    // a run waits on its own events at its start and at each step: it must not wait out the interval each time
    const { store, load } = storeWith(LOADED)
    await Promise.all(load())
    const others = load()
    const recorder = new Recorder(sqliteLog(store), 'ses_a')
    recorder.emit({ type: 'text.ended', data: { partId: 'prt_a' } }, modelMeta)
    await recorder.settle()
    expect(store.readSession('ses_a').at(-1)?.type).toBe('text.ended')
    // as committed (by seq: a read of ses_0 itself would commit what it queued): its second rename still waits
    expect(store.readFiltered(['ses_0'], 0, 10)).toHaveLength(2)
    await Promise.all(others)
  })

  it('while the store is loaded, a run’s end commits now, its session’s only: whoever waits on the turn does not wait out the interval', async () => {
    const { store, load } = storeWith(LOADED)
    await Promise.all(load())
    const commits: StoredEvent[][] = []
    store.onCommit((events) => commits.push([...events]))
    const others = load()
    const recorder = new Recorder(sqliteLog(store), 'ses_a')
    recorder.emit({ type: 'run.finished', data: { runId: 'run_1', outcome: 'idle' } }, modelMeta, 'full')
    await recorder.settle()
    // had it waited out the interval, the others would have committed before it or with it
    expect(commits.map((c) => c.map((e) => e.sessionId))).toEqual([['ses_a']])
    await Promise.all(others)
    expect(commits).toHaveLength(2) // the others, at the interval
  })

  it('an append someone awaits is stored as it came, behind a loaded queue too', async () => {
    const { store, load } = storeWith(LOADED)
    const others = load()
    await Promise.all(['a', 'b', 'c'].map((t) => store.enqueue('ses_a', [delta('prt_a', t)], { meta: modelMeta })))
    await Promise.all(others)
    expect(deltasOf(store)).toEqual(['a', 'b', 'c'])
  })

  it('a streamed delta never joins an append someone awaits: that caller gets back what it appended', async () => {
    const { store, load } = storeWith(LOADED)
    const others = load()
    const awaited = store.enqueue('ses_a', [delta('prt_a', 'a')], { meta: modelMeta })
    const joined = ['b', 'c'].map((t) => streamed(store, 'ses_a', [delta('prt_a', t)], { meta: modelMeta }))
    await Promise.all([...others, ...joined])
    expect((await awaited).map((e) => e.data)).toEqual([{ partId: 'prt_a', text: 'a' }])
    expect(deltasOf(store)).toEqual(['a', 'bc'])
  })

  it('while the store is loaded, an append someone awaits commits on the next turn, its session’s only', async () => {
    const { store, load } = storeWith(LOADED)
    await Promise.all(load())
    const commits: StoredEvent[][] = []
    store.onCommit((events) => commits.push([...events]))
    const others = load() // waiting for the interval
    await store.enqueue('ses_a', [renamed('awaited')], { meta: userMeta })
    // had it waited out the interval, the others would have committed before it or with it
    expect(commits.map((c) => c.map((e) => e.sessionId))).toEqual([['ses_a']])
    await Promise.all(others)
    expect(commits).toHaveLength(2) // the others, at the interval
  })

  it('while the store is loaded, runs settling one after another share hurried commits: one per 10 ms at most', async () => {
    // each run settles three or four times a turn; a commit of one session's few appends each time cost more
    // than the loaded rounds that carry every delta
    const { store, load } = storeWith(LOADED)
    await Promise.all(load())
    const commits = sessionsCommitted(store)
    const committedAt: number[] = []
    store.onCommit(() => committedAt.push(performance.now()))
    const others = load()
    await settleOne(store, 'ses_a') // the first commits on the next turn
    const settling = [settleOne(store, 'ses_0'), settleOne(store, 'ses_1')]
    await new Promise((r) => setImmediate(r))
    expect(commits).toHaveLength(1) // not on the next turn: within 10 ms of the last
    await Promise.all(settling)
    expect(commits).toEqual([['ses_a'], ['ses_0', 'ses_1']])
    expect((committedAt[1] as number) - (committedAt[0] as number)).toBeGreaterThanOrEqual(8) // 10, less the clocks' rounding
    await Promise.all(others)
  })

  it('while the store is loaded, one run settling after another with nothing else queued commits on the next turn', async () => {
    // sessions served one after another (test/runtime/memory.test.ts): there is no other run to share a commit with
    const { store, load } = storeWith(LOADED)
    await Promise.all(load())
    const commits = sessionsCommitted(store)
    for (const sessionId of ['ses_0', 'ses_1', 'ses_2']) {
      const settled = settleOne(store, sessionId)
      await new Promise((r) => setImmediate(r))
      expect(commits.at(-1)).toEqual([sessionId]) // not 10 ms after the last
      await settled
    }
    expect(store.loaded()).toBe(true)
  })

  it('while the store is loaded, eight sessions hurried at once commit on the next turn, however recent the last', async () => {
    const { store, load } = storeWith(LOADED)
    await Promise.all(load())
    const commits = sessionsCommitted(store)
    const others = load()
    await store.enqueue('ses_a', [renamed('first')], { meta: userMeta })
    const eight = Array.from({ length: 8 }, (_, i) => store.enqueue(`ses_${i}`, [renamed('now')], { meta: userMeta }))
    await new Promise((r) => setImmediate(r))
    expect(commits).toEqual([['ses_a'], Array.from({ length: 8 }, (_, i) => `ses_${i}`)])
    await Promise.all([...eight, ...others])
  })

  it('producers that await each append commit once a turn, not once an interval, while the store stays loaded', async () => {
    // bench store's producers: 50 sessions, each awaiting its append; loaded, each would wait 40 ms a round
    const { store } = storeWith(LOADED)
    const started = performance.now()
    let rounds = 0
    for (; rounds < 25; rounds++)
      await Promise.all(
        Array.from({ length: LOADED }, (_, i) =>
          store.enqueue(`ses_${i}`, [renamed(`r${rounds}`)], { meta: userMeta }),
        ),
      )
    expect(store.loaded()).toBe(true)
    expect(performance.now() - started).toBeLessThan(500) // 25 intervals would be a second at least
  })

  it('a run settling waits for what it emitted before, not for the deltas it keeps streaming meanwhile', async () => {
    const { store, load } = storeWith(LOADED)
    await Promise.all(load())
    const recorder = new Recorder(sqliteLog(store), 'ses_a')
    recorder.emit(delta('prt_a', 'before'), modelMeta)
    const settled = recorder.settle().then(() => store.readSession('ses_a').map((e) => e.type))
    // a stream going on: a delta every 5 ms for longer than a loaded interval
    for (let i = 0; i < 30; i++) {
      recorder.emit(delta('prt_a', `${i}`), modelMeta)
      await new Promise((r) => setTimeout(r, 5))
    }
    expect((await settled).at(-1)).toBe('text.delta')
    await recorder.settle()
    expect(deltasOf(store).join('')).toBe(`before${Array.from({ length: 30 }, (_, i) => i).join('')}`)
  })

  it('a failed append reaches the run at its next settle; one that never queued does not make it wait less', async () => {
    const store = EventStore.open(':memory:')
    store.append('ses_a', [created()], { meta: userMeta })
    const recorder = new Recorder(sqliteLog(store), 'ses_a')
    recorder.emit(renamed('queued'), userMeta)
    const settling = recorder.settle()
    recorder.emit({ type: 'no.such.event', data: {} } as unknown as ChronicleEvent, userMeta) // invalid: never queued
    await expect(settling).rejects.toMatchObject({ code: 'INVALID_EVENT' })
    expect(store.readSession('ses_a').at(-1)?.type).toBe('session.renamed') // what it emitted before had committed
  })

  it('many small commits in one interval load the store as one large commit does', async () => {
    // A store committing every turn never holds 64 appends in one commit, however many sessions stream.
    const { store } = storeWith(LOADED)
    const commits: number[] = []
    store.onCommit(() => commits.push(performance.now()))
    let lastTurn = 0
    for (let turn = 0; turn < 4; turn++) {
      lastTurn = performance.now()
      await Promise.all(
        Array.from({ length: LOADED / 4 }, (_, i) =>
          streamed(store, `ses_${turn * 16 + i}`, [renamed(`t${turn}`)], { meta: userMeta }),
        ),
      )
    }
    expect(commits).toHaveLength(4) // each turn committed at once: the store was not loaded yet
    await streamed(store, 'ses_a', [delta('prt_a', 'x')], { meta: modelMeta })
    // 40 ms from the last small commit's start, which came after `lastTurn`
    expect((commits[4] as number) - lastTurn).toBeGreaterThanOrEqual(36) // 40, less the clocks' millisecond rounding
  })

  it('one session’s own burst does not load the store: a user waiting on a turn never waits on commits', async () => {
    const { store } = storeWith(0)
    // a turn: some hundred events of one session within milliseconds, over several commits
    for (let turn = 0; turn < 10; turn++)
      await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          store.enqueue('ses_a', [delta('prt_a', `${turn}.${i}`)], { meta: modelMeta }),
        ),
      )
    // then the run's own appends, each awaited: loaded, each would wait 40 ms (a second for 25)
    const started = performance.now()
    for (let i = 0; i < 25; i++) await store.enqueue('ses_a', [delta('prt_a', 'x')], { meta: modelMeta })
    expect(performance.now() - started).toBeLessThan(500)
  })

  it('the read model holds the same text as if nothing had merged', async () => {
    const { store, load } = storeWith(LOADED, openStore(':memory:'))
    const others = load()
    const texts = Array.from({ length: 20 }, (_, i) => `w${i} `)
    await Promise.all([
      ...others,
      ...texts.map((t) => streamed(store, 'ses_a', [delta('prt_a', t)], { meta: modelMeta })),
    ])
    expect(deltasOf(store)).toHaveLength(1)
    expect(getParts(store, 'ses_a').map((p) => (p.type === 'text' ? p.text : ''))).toEqual([texts.join('')])
  })
})
