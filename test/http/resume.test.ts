import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DEFAULT_LIMITS } from '../../src/config.js'
import type { EventStore } from '../../src/events/store.js'
import { Client, startServer, type TestServer } from './helpers.js'

/**
 * Gap-free resume (docs/API.md "Subscriptions"): a client that drops at any
 * seq while events keep being appended, and reconnects with after = the last
 * seq it processed, receives exactly the events it missed.
 */

let server: TestServer
beforeAll(async () => {
  server = await startServer({ CHRONICLE_LOG_LEVEL: 'warn' })
})
afterAll(async () => {
  await server.close()
})

function createSessions(store: EventStore, n: number, tag: string): string[] {
  return Array.from({ length: n }, (_, i) => {
    const id = `ses_${tag}_${i}`
    store.append(id, [{ type: 'session.created', data: { directory: server.dir, agent: 'build', model: null } }], {
      meta: { actor: 'user' },
    })
    return id
  })
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)

describe('reconnect', () => {
  it('drop at a random seq while events are appended; reconnect with after = k; receive exactly k+1..head', async () => {
    let run = 0
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 70 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 4 }),
        async (dropAt, nSessions, batch) => {
          const { store } = server.chronicle
          const sessions = createSessions(store, nSessions, `r${run++}`)
          const base = store.head()
          const total = 80
          const first = await Client.connect(server.wsUrl, server.token)
          await first.call('subscribe', { sessions, after: base })
          let k = base
          let processed = 0
          const dropped = new Promise<void>((resolve) => {
            first.ws.on('message', (raw) => {
              const f = JSON.parse(String(raw)) as { type?: string; seq?: number }
              if (f.type !== 'event' || processed >= dropAt) return
              k = f.seq as number
              if (++processed === dropAt) {
                first.close()
                resolve()
              }
            })
          })
          // The writer keeps appending, in batches across ticks, while the client drops and reconnects.
          const writer = (async () => {
            for (let i = 0; i < total; i += batch) {
              const appends = range(i, Math.min(total, i + batch) - 1).map((j) =>
                store.enqueue(
                  sessions[j % nSessions] as string,
                  [{ type: 'session.renamed', data: { title: `t${j}` } }],
                  { meta: { actor: 'user' } },
                ),
              )
              await Promise.all(appends)
              await new Promise((r) => setImmediate(r))
            }
          })()
          await dropped
          const second = await Client.connect(server.wsUrl, server.token)
          await second.call('subscribe', { sessions, after: k })
          await writer
          const head = store.head()
          await second.wait((f) => f.type === 'event' && f.seq === head)
          second.close()
          const got = second.events().map((e) => e.seq)
          expect(got).toEqual(range(k + 1, head))
          // per session, versions are contiguous
          for (const id of sessions) {
            const versions = second
              .events()
              .filter((e) => e.session === id)
              .map((e) => e.version)
            if (versions.length > 0)
              expect(versions).toEqual(range(versions[0] as number, (versions[0] as number) + versions.length - 1))
          }
        },
      ),
      { numRuns: 12 },
    )
  })
})

describe('slow consumers', () => {
  const bigTodo = (i: number) => ({
    type: 'todo.updated' as const,
    data: { items: [{ content: `${i}:${'x'.repeat(4000)}`, status: 'pending' as const, priority: 'low' as const }] },
  })

  async function slowServer(slowConsumerMs: number): Promise<TestServer> {
    return startServer(
      { CHRONICLE_LOG_LEVEL: 'warn' },
      { config: { limits: { ...DEFAULT_LIMITS, socketHighWaterBytes: 64 * 1024, slowConsumerMs } } },
    )
  }

  function serverSockets(s: TestServer) {
    return [...s.chronicle.app.websocketServer.clients]
  }

  /** A caught-up subscriber whose socket stops reading, then 3,000 large events appended behind it. */
  async function pausedBehind(s: TestServer, title: string) {
    const [session] = createSessions(s.chronicle.store, 1, title)
    const c = await Client.connect(s.wsUrl, s.token)
    await c.call('subscribe', { sessions: [session], after: 0 })
    await c.wait((f) => f.type === 'caught-up')
    const raw = (c.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket
    raw.pause()
    for (let i = 0; i < 3000; i += 100) {
      s.chronicle.store.append(session as string, range(i, i + 99).map(bigTodo), { meta: { actor: 'tool' } })
    }
    return { session, c, raw }
  }

  it('a client that pauses is served from the log and catches up, exactly once, with bounded socket buffers', async () => {
    const s = await slowServer(60_000)
    try {
      const { c, raw } = await pausedBehind(s, 'pause')
      let maxBuffered = 0
      for (let i = 0; i < 40; i++) {
        for (const ws of serverSockets(s)) maxBuffered = Math.max(maxBuffered, ws.bufferedAmount)
        await new Promise((r) => setTimeout(r, 10))
      }
      raw.resume()
      const head = s.chronicle.store.head()
      await c.wait((f) => f.type === 'event' && f.seq === head, 20_000)
      expect(c.events().map((e) => e.seq)).toEqual(range(1, head))
      // one frame (~4 KiB) past the high-water mark at most: the rest waited in the log
      expect(maxBuffered).toBeLessThanOrEqual(64 * 1024 + 8 * 1024)
      c.close()
    } finally {
      await s.close()
    }
  })

  it('a client that does not drain at all is sent `closing` with its cursor and closed with 4008; resuming from it loses nothing', async () => {
    const s = await slowServer(300)
    try {
      const { session, c, raw } = await pausedBehind(s, 'stall')
      // wait until the server gives up on this socket (its side turns CLOSING), then read what was sent
      for (let i = 0; i < 500 && serverSockets(s).some((ws) => ws.readyState === ws.OPEN); i++)
        await new Promise((r) => setTimeout(r, 10))
      raw.resume()
      expect(await c.whenClosed).toBe(4008)
      const closing = c.frames.at(-1) as { type: string; reason: string; resume: { after: number } }
      expect(closing).toMatchObject({ type: 'closing', reason: 'slow-consumer' })
      const after = closing.resume.after
      expect(c.events().map((e) => e.seq)).toEqual(range(1, after))
      const head = s.chronicle.store.head()
      expect(after).toBeLessThan(head)

      const again = await Client.connect(s.wsUrl, s.token)
      await again.call('subscribe', { sessions: [session], after })
      await again.wait((f) => f.type === 'caught-up', 20_000)
      expect(again.events().map((e) => e.seq)).toEqual(range(after + 1, head))
      again.close()
    } finally {
      await s.close()
    }
  })
})
