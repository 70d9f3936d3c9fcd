import { afterEach, describe, expect, it } from 'vitest'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import type { StoredEvent } from '../../src/events/envelope.js'
import { ChronicleError } from '../../src/events/errors.js'
import { LogSubscription } from '../../src/events/log-subscription.js'
import { PostgresEventLog } from '../../src/events/postgres/log.js'
import { usePostgres } from '../support/use-postgres.js'
import { created, delta, modelMeta, renamed, userMeta } from './fixtures/store.js'

/**
 * docs/EVENTS.md "Deltas", on PostgreSQL (`npm run test:postgres`): what queues behind a transaction in
 * flight commits in the next one, so while one is in flight and the queue holds many sessions' appends (a
 * loaded stream), a lone streamed delta joins its part's queued delta, by the rule SQLite's queue keeps
 * (src/events/delta-merge.ts). The transaction is held open here by the log's own projection hook, which
 * runs inside it, until the spec lets it go.
 */
const server = usePostgres()

/** Sessions queued besides ses_a: the load (src/events/delta-merge.ts LOADED_SESSIONS). */
const OTHERS = 8

const logs: PostgresEventLog[] = []
afterEach(async () => {
  for (const log of logs.splice(0)) await log.close()
})

/**
 * A log with ses_a (streaming part prt_a), ses_h and OTHERS more sessions. `hold()` commits a rename of ses_h
 * whose transaction stays open until `release()`; `failOn` makes any transaction holding a delta with that
 * text fail.
 */
async function heldLog(failOn?: string) {
  let entered: () => void = () => {}
  let gate: Promise<void> = Promise.resolve()
  let release: () => void = () => {}
  const log = await PostgresEventLog.open(await server().database(), {
    project: async (_pipe, events) => {
      if (events.some((e) => e.type === 'session.renamed' && e.data.title === 'held')) {
        entered()
        await gate
      }
      if (failOn && events.some((e) => e.type === 'text.delta' && e.data.text.includes(failOn)))
        throw new ChronicleError('INTERNAL', `refused: ${failOn}`)
    },
  })
  logs.push(log)
  await log.append(
    'ses_a',
    [created(), { type: 'text.started', data: { messageId: 'msg_a', partId: 'prt_a' } }] as ChronicleEvent[],
    { meta: modelMeta },
  )
  for (const id of ['ses_h', ...others()]) await log.append(id, [created()], { meta: userMeta })
  /**
   * Once the held transaction is in flight: `committed`, which resolves once it has (in an object: an async
   * function's promise would wait for it).
   */
  const hold = async () => {
    gate = new Promise((r) => {
      release = r
    })
    const inFlight = new Promise<void>((r) => {
      entered = r
    })
    const committed = log.enqueue('ses_h', [renamed('held')], { meta: userMeta })
    await inFlight
    return { committed }
  }
  return { log, hold, release: () => release() }
}

const others = () => Array.from({ length: OTHERS }, (_, i) => `ses_${i}`)

/** Queued as a run's recorder queues a delta: through `submit`, which nobody awaits. */
function streamed(
  log: PostgresEventLog,
  sessionId: string,
  event: ChronicleEvent,
  meta = modelMeta,
): Promise<StoredEvent[]> {
  return new Promise((resolve, reject) => {
    log.submit(sessionId, [event], { meta }, { resolve, reject })
  })
}

/** The other sessions' appends, queued as a loaded stream's are. */
const load = (log: PostgresEventLog) => others().map((id) => streamed(log, id, renamed(`load ${id}`), userMeta))

const deltasOf = async (log: PostgresEventLog) =>
  (await log.readSession('ses_a')).flatMap((e) => (e.type === 'text.delta' ? [e.data.text] : []))

describe('deltas behind a PostgreSQL transaction in flight', () => {
  it('consecutive deltas of one part become one event, every call resolves with it, and a subscriber sees it once, in order', async () => {
    const { log, hold, release } = await heldLog()
    const sub = new LogSubscription(log, { sessions: ['ses_a'] }, await log.head())
    const received: StoredEvent[] = []
    const reading = (async () => {
      for await (const e of sub) {
        received.push(e)
        if (e.type === 'text.ended') break
      }
    })()
    const { committed: held } = await hold()
    const loaded = load(log)
    const calls = ['Hel', 'lo', ', world'].map((t) => streamed(log, 'ses_a', delta('prt_a', t)))
    const ended = streamed(log, 'ses_a', { type: 'text.ended', data: { partId: 'prt_a' } })
    release()
    await held
    const results = await Promise.all(calls)
    await Promise.all([...loaded, ended])
    await reading

    expect(await deltasOf(log)).toEqual(['Hello, world'])
    const merged = (await log.readSession('ses_a')).find((e) => e.type === 'text.delta')
    for (const r of results) expect(r).toEqual([merged])
    expect(received.map((e) => [e.type, (e.data as { text?: string }).text])).toEqual([
      ['text.delta', 'Hello, world'],
      ['text.ended', undefined],
    ])
    expect(received[0]).toEqual(merged)
  })

  it('a server keeping up stores each delta as it came: no transaction in flight, or one session’s burst alone', async () => {
    const { log, hold, release } = await heldLog()
    const loaded = load(log) // queued in the same turn, but nothing is in flight: they commit together next turn
    await Promise.all([...loaded, ...['a', 'b', 'c'].map((t) => streamed(log, 'ses_a', delta('prt_a', t)))])
    const { committed: held } = await hold()
    const burst = ['d', 'e', 'f'].map((t) => streamed(log, 'ses_a', delta('prt_a', t)))
    release()
    await Promise.all([held, ...burst])
    expect(await deltasOf(log)).toEqual(['a', 'b', 'c', 'd', 'e', 'f'])
  })

  it('never merges an awaited append, a version check, a durable or timed one, another part or actor, or across another event', async () => {
    const { log, hold, release } = await heldLog()
    const version = await log.version('ses_a') // read before the hold: a read waits for what is committing
    const { committed: held } = await hold()
    const loaded = load(log)
    const plain = { meta: modelMeta }
    const queued = [
      streamed(log, 'ses_a', delta('prt_a', '1')),
      log.enqueue('ses_a', [delta('prt_a', '2')], plain), // awaited
      streamed(log, 'ses_a', delta('prt_a', '3')),
      new Promise((resolve, reject) =>
        log.submit(
          'ses_a',
          [delta('prt_a', '4')],
          { meta: modelMeta, expectedVersion: version + 3 },
          { resolve, reject },
        ),
      ),
      new Promise((resolve, reject) =>
        log.submit('ses_a', [delta('prt_a', '5')], { meta: modelMeta, durability: 'full' }, { resolve, reject }),
      ),
      new Promise((resolve, reject) =>
        log.submit('ses_a', [delta('prt_a', '6')], { meta: modelMeta, at: Date.now() }, { resolve, reject }),
      ),
      streamed(log, 'ses_a', delta('prt_a', '7')),
      streamed(log, 'ses_a', delta('prt_a', '8'), { actor: 'runtime' }),
      streamed(log, 'ses_a', renamed('between'), userMeta),
      streamed(log, 'ses_a', delta('prt_a', '9')),
      streamed(log, 'ses_a', delta('prt_b', '10')),
      streamed(log, 'ses_a', { type: 'reasoning.delta', data: { partId: 'prt_b', text: '11' } }),
      streamed(log, 'ses_a', delta('prt_a', '12')),
      streamed(log, 'ses_a', delta('prt_a', '13')), // joins 12: the one merge here
    ]
    release()
    await Promise.all([held, ...loaded, ...queued])
    expect(await deltasOf(log)).toEqual(['1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '1213'])
  })

  it('nothing queued after an appendTogether joins an append queued before it', async () => {
    // the later delta would otherwise commit ahead of the appendTogether's events
    const { log, hold, release } = await heldLog()
    const { committed: held } = await hold()
    const loaded = load(log)
    const before = streamed(log, 'ses_a', delta('prt_a', 'before'))
    const together = log.appendTogether(() => [
      { sessionId: 'ses_a', events: [renamed('together')], options: { meta: userMeta } },
    ])
    const after = streamed(log, 'ses_a', delta('prt_a', 'after'))
    release()
    await Promise.all([held, ...loaded, before, together, after])
    const tail = (await log.readSession('ses_a')).slice(-3)
    expect(
      tail.map((e) => [
        e.type,
        (e.data as { text?: string; title?: string }).text ?? (e.data as { title?: string }).title,
      ]),
    ).toEqual([
      ['text.delta', 'before'],
      ['session.renamed', 'together'],
      ['text.delta', 'after'],
    ])
  })

  it('when the append a delta joined fails, every caller merged into it hears the same failure; the others commit', async () => {
    const { log, hold, release } = await heldLog('boom')
    const { committed: held } = await hold()
    const loaded = load(log)
    const calls = ['Hel', 'boom'].map((t) => streamed(log, 'ses_a', delta('prt_a', t)))
    release()
    await held
    const outcomes = await Promise.allSettled(calls)
    expect(outcomes.map((o) => (o.status === 'rejected' ? (o.reason as Error).message : 'resolved'))).toEqual([
      'refused: boom',
      'refused: boom',
    ])
    const [first, second] = outcomes
    expect(first?.status === 'rejected' && second?.status === 'rejected' && first.reason === second.reason).toBe(true)
    expect((await Promise.all(loaded)).map((stored) => stored.length)).toEqual(others().map(() => 1))
    expect(await deltasOf(log)).toEqual([])
  })
})
