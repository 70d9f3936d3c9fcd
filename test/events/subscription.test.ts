import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import type { StoredEvent } from '../../src/events/envelope.js'
import { EventStore } from '../../src/events/store.js'
import type { Subscription, SubscriptionFilter } from '../../src/events/subscription.js'
import { created, delta, renamed, userMeta } from './fixtures/store.js'

/**
 * Catch-up subscriptions: subscribe(filter, after = k) yields exactly the
 * matching events k+1..head, in seq order, each once — across the switch
 * from the log to live events, overflows of a slow consumer and any mix of
 * sync appends and batched enqueues.
 */

const SESSIONS = ['ses_a', 'ses_b', 'ses_c'] as const

const filterArb: fc.Arbitrary<SubscriptionFilter> = fc.record(
  {
    sessions: fc.oneof(fc.constant('*' as const), fc.subarray([...SESSIONS], { minLength: 1 })),
    types: fc.subarray(['session.renamed', 'text.delta', 'session.archived']),
  },
  { requiredKeys: ['sessions'] },
)

type Op =
  | { op: 'append' | 'enqueue'; session: number; n: number; kind: number }
  | { op: 'subscribe'; filter: SubscriptionFilter; after: number; maxBuffer: number; pageSize: number }
  | { op: 'read'; sub: number; n: number }
  | { op: 'tick' }

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    op: fc.constantFrom('append' as const, 'enqueue' as const),
    session: fc.nat(2),
    n: fc.integer({ min: 1, max: 12 }),
    kind: fc.nat(2),
  }),
  fc.record({
    op: fc.constant('subscribe' as const),
    filter: filterArb,
    after: fc.nat(),
    maxBuffer: fc.integer({ min: 1, max: 30 }),
    pageSize: fc.integer({ min: 1, max: 40 }),
  }),
  fc.record({ op: fc.constant('read' as const), sub: fc.nat(), n: fc.integer({ min: 1, max: 25 }) }),
  fc.record({ op: fc.constant('tick' as const) }),
)

const event = (kind: number, i: number): ChronicleEvent =>
  kind === 0 ? renamed(`t${i}`) : kind === 1 ? delta('prt_x', `d${i}`) : { type: 'session.archived', data: {} }

interface Subscriber {
  readonly sub: Subscription
  readonly filter: SubscriptionFilter
  readonly after: number
  readonly maxBuffer: number
  readonly received: StoredEvent[]
  /** a next() already called with nothing to hand over: the consumer waits live */
  waiting?: Promise<IteratorResult<StoredEvent>>
}

function matches(filter: SubscriptionFilter, e: StoredEvent): boolean {
  return (
    (filter.sessions === '*' || filter.sessions.includes(e.sessionId)) &&
    (!filter.types || filter.types.includes(e.type))
  )
}

/** What the subscriber must have received once it has read everything committed so far. */
function expected(store: EventStore, s: Subscriber): number[] {
  return store
    .readAll(s.after, 1_000_000)
    .filter((e) => matches(s.filter, e))
    .map((e) => e.seq)
}

async function take(s: Subscriber, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const r = await within(
      s.waiting ?? s.sub.next(),
      `event ${s.received.length + 1} of a subscription after ${s.after}`,
    )
    s.waiting = undefined
    if (r.done) throw new Error('subscription ended')
    s.received.push(r.value)
  }
}

/** Fails fast instead of hanging when an event that exists is never handed over. */
function within<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error(`${what} never arrived`)), 10_000)),
  )
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer))
}

/** True when next() has nothing to hand over right now. */
async function idle(sub: Subscription, waiting?: Promise<unknown>): Promise<boolean> {
  const next = (waiting ?? sub.next()).then(() => 'event' as const)
  const tick = new Promise<'idle'>((resolve) => setImmediate(() => resolve('idle')))
  const first = await Promise.race([next, tick])
  return first === 'idle'
}

function openWithSessions(): EventStore {
  const store = EventStore.open(':memory:')
  for (const id of SESSIONS) store.append(id, [created()], { meta: userMeta })
  return store
}

describe('subscribe(filter, after)', () => {
  it('delivers exactly the matching events after k, in order, once, whatever the interleaving', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 60 }), async (ops) => {
        const store = openWithSessions()
        const subs: Subscriber[] = []
        const pending: Promise<unknown>[] = []
        let i = 0
        for (const op of ops) {
          if (op.op === 'append' || op.op === 'enqueue') {
            const events = Array.from({ length: op.n }, () => event(op.kind, i++))
            const session = SESSIONS[op.session] as string
            if (op.op === 'append') store.append(session, events, { meta: userMeta })
            else pending.push(store.enqueue(session, events, { meta: userMeta }))
          } else if (op.op === 'subscribe') {
            const after = op.after % (store.head() + 2) // sometimes past the head
            const sub = store.subscribe(op.filter, after, { maxBuffer: op.maxBuffer, pageSize: op.pageSize })
            subs.push({ sub, filter: op.filter, after, maxBuffer: op.maxBuffer, received: [] })
          } else if (op.op === 'read' && subs.length > 0) {
            const s = subs[op.sub % subs.length] as Subscriber
            const available = expected(store, s).length - s.received.length
            await take(s, Math.min(op.n, available))
            // Sometimes read past what exists: the consumer goes live and waits.
            if (op.n > available && op.n % 2 === 1) s.waiting ??= s.sub.next()
          } else if (op.op === 'tick') {
            await Promise.all(pending.splice(0))
          }
          for (const s of subs) expect(s.sub.buffered).toBeLessThanOrEqual(s.maxBuffer)
        }
        await Promise.all(pending)
        for (const s of subs) {
          const want = expected(store, s)
          await take(s, want.length - s.received.length)
          expect(s.received.map((e) => e.seq)).toEqual(want)
          expect(await idle(s.sub, s.waiting)).toBe(true)
          s.sub.close()
        }
        store.close()
      }),
      { numRuns: 300, endOnFailure: true },
    )
  })

  it('hands over live events as they commit, and its onCaughtUp reports the head once', async () => {
    const store = openWithSessions()
    const caughtUp: number[] = []
    const sub = store.subscribe({ sessions: ['ses_b'] }, 0, { onCaughtUp: (head) => caughtUp.push(head) })
    expect((await sub.next()).value).toMatchObject({ seq: 2, type: 'session.created' })
    const waiting = sub.next()
    expect(caughtUp).toEqual([3])
    expect(sub.isLive).toBe(true)
    store.append('ses_a', [renamed('not mine')], { meta: userMeta })
    const [mine] = store.append('ses_b', [renamed('mine')], { meta: userMeta })
    expect((await waiting).value).toEqual(mine)
    sub.close()
    expect(await sub.next()).toEqual({ done: true, value: undefined })
    store.close()
  })

  it('a consumer that stops reading holds at most maxBuffer events, then still gets everything once', async () => {
    const store = openWithSessions()
    const sub = store.subscribe({ sessions: '*' }, 0, { maxBuffer: 50, pageSize: 20 })
    const received: number[] = []
    for (let i = 0; i < 3; i++) received.push(((await sub.next()).value as StoredEvent).seq)
    const first = sub.next() // catches up to the head and waits live
    expect(sub.isLive).toBe(true)
    let peak = 0
    store.onCommit(() => (peak = Math.max(peak, sub.buffered)))
    for (let batch = 0; batch < 100; batch++) {
      const session = SESSIONS[batch % 3] as string
      if (batch % 2)
        store.append(
          session,
          Array.from({ length: 30 }, (_, j) => renamed(`r${batch}.${j}`)),
          { meta: userMeta },
        )
      else
        await Promise.all(
          Array.from({ length: 30 }, (_, j) =>
            store.enqueue(session, [delta('prt_x', `d${batch}.${j}`)], { meta: userMeta }),
          ),
        )
      peak = Math.max(peak, sub.buffered)
    }
    expect(store.head()).toBe(3003)
    expect(peak).toBeLessThanOrEqual(50)
    received.push(((await first).value as StoredEvent).seq)
    for (let seq = 5; seq <= 3003; seq++) received.push(((await sub.next()).value as StoredEvent).seq)
    expect(received).toEqual(Array.from({ length: 3003 }, (_, i) => i + 1))
    expect(await idle(sub)).toBe(true)
    sub.close()
    store.close()
  })
})
