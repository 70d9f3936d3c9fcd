import { createHash } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import { CURRENT_SCHEMA_VERSION, type ChronicleEvent } from '../../src/events/catalogue.js'
import { eventHash } from '../../src/events/chain.js'
import type { StoredEvent } from '../../src/events/envelope.js'
import type { EventLog } from '../../src/events/log.js'
import { LogSubscription } from '../../src/events/log-subscription.js'

/**
 * The event log's contract (src/events/log.ts), one suite for every engine:
 * test/events/log.sqlite.test.ts runs it on SQLite files, and
 * test/events/log.postgres.test.ts (`npm run test:postgres`) on a real
 * PostgreSQL server. A database can be opened more than once: two logs on
 * one database are two servers sharing it.
 */
export interface Engine {
  /** a new, empty database */
  database(): Promise<Database>
}

export interface Database {
  open(options?: { now?: () => number }): Promise<EventLog>
  cleanup(): Promise<void>
}

const meta = { actor: 'user' as const }
const created: ChronicleEvent = {
  type: 'session.created',
  data: { directory: '/w', agent: 'build', model: null },
}
const renamed = (title: string): ChronicleEvent => ({ type: 'session.renamed', data: { title } })
const seqs = (events: readonly StoredEvent[]) => events.map((e) => e.seq)
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)

export function describeLogContract(name: string, engine: Engine): void {
  describe(`the event log contract: ${name}`, () => {
    const open: EventLog[] = []
    const databases: Database[] = []
    afterEach(async () => {
      for (const log of open.splice(0)) await log.close()
      for (const db of databases.splice(0)) await db.cleanup()
    })
    const fresh = async (options?: { now?: () => number }) => {
      const db = await engine.database()
      databases.push(db)
      const log = await db.open(options)
      open.push(log)
      return { db, log }
    }
    const another = async (db: Database) => {
      const log = await db.open()
      open.push(log)
      return log
    }

    it('settles a session: once settled resolves, every append made to it before has committed, and is heard', async () => {
      const { log } = await fresh()
      const heard: number[] = []
      log.onCommit((events) => heard.push(...seqs(events)))
      const done: string[] = []
      void log.enqueue('ses_a', [created], { meta }).then(() => done.push('created'))
      void log.enqueue('ses_a', [renamed('one')], { meta }).then(() => done.push('renamed'))
      void log.enqueue('ses_a', [renamed('stale')], { meta, expectedVersion: 0 }).catch(() => done.push('refused'))
      await log.settled('ses_a')
      expect(done).toEqual(['created', 'renamed', 'refused'])
      expect(heard).toEqual([1, 2])
      await log.settled('ses_none') // nothing queued: at once
      expect(await log.version('ses_a')).toBe(2)
    })

    it('numbers events: seq through the log, version through each session, both from 1 without a gap', async () => {
      const { log } = await fresh()
      const a = await log.append('ses_a', [created, renamed('one')], { meta, expectedVersion: 0 })
      const b = await log.append('ses_b', [created], { meta })
      const c = await log.append('ses_a', [renamed('two')], { meta, expectedVersion: 2 })
      expect([...a, ...b, ...c].map((e) => [e.sessionId, e.seq, e.version])).toEqual([
        ['ses_a', 1, 1],
        ['ses_a', 2, 2],
        ['ses_b', 3, 1],
        ['ses_a', 4, 3],
      ])
      expect(c[0]).toMatchObject({ type: 'session.renamed', data: { title: 'two' }, meta, schemaVersion: 1 })
      expect(await log.head()).toBe(4)
      expect(await log.version('ses_a')).toBe(3)
      expect(await log.version('ses_none')).toBe(0)
      expect(await log.readSession('ses_a')).toEqual([...a, ...c])
      expect(await log.readAll(0)).toEqual([a[0], a[1], b[0], c[0]])
      expect(await log.get(3)).toEqual(b[0])
      expect(await log.get(99)).toBeUndefined()
    })

    it('reads a session after a seq, up to a seq, a page at a time; several sessions; everything after a seq', async () => {
      const { log } = await fresh()
      for (const id of ['ses_a', 'ses_b', 'ses_c']) await log.append(id, [created], { meta })
      for (let i = 0; i < 3; i++)
        for (const id of ['ses_a', 'ses_b', 'ses_c']) await log.append(id, [renamed(`${id} ${i}`)], { meta })
      expect(seqs(await log.readSession('ses_b'))).toEqual([2, 5, 8, 11])
      expect(seqs(await log.readSession('ses_b', { after: 5 }))).toEqual([8, 11])
      expect(seqs(await log.readSession('ses_b', { after: 2, upTo: 8 }))).toEqual([5, 8])
      expect(seqs(await log.readSession('ses_b', { limit: 2 }))).toEqual([2, 5])
      expect(seqs(await log.readFiltered(['ses_a', 'ses_c'], 3, 3))).toEqual([4, 6, 7])
      expect(seqs(await log.readFiltered('*', 10, 100))).toEqual([11, 12])
      expect(seqs(await log.readAll(0, 5))).toEqual([1, 2, 3, 4, 5])
      // a session's own event by its version (what a recorded step names its history by)
      expect(await log.seqOfVersion('ses_b', 3)).toBe(8)
      expect(await log.seqOfVersion('ses_b', 5)).toBeUndefined()
      expect(await log.seqOfVersion('ses_none', 1)).toBeUndefined()
    })

    it('reads its own writes: a session read sees what was appended to it and is still queued; a read by seq, what committed', async () => {
      const { log } = await fresh()
      await log.append('ses_a', [created], { meta })
      const queued = log.enqueue('ses_a', [renamed('queued')], { meta }) // not awaited
      expect(await log.version('ses_a')).toBe(2)
      const more = log.enqueue('ses_a', [renamed('more')], { meta })
      expect((await log.readSession('ses_a')).map((e) => e.version)).toEqual([1, 2, 3])
      expect(seqs(await Promise.all([queued, more]).then((r) => r.flat()))).toEqual([2, 3])
      expect(await log.head()).toBe(3)
    })

    it('appends together to several sessions in one transaction: after what was queued before, numbered from the seq build was given', async () => {
      const { log } = await fresh()
      const heard: number[][] = []
      log.onCommit((events) => heard.push(seqs(events)))
      await log.append('ses_a', [created], { meta })
      const queued = log.enqueue('ses_a', [renamed('queued first')], { meta }) // not awaited: it commits first
      const firsts: number[] = []
      const together = await log.appendTogether((first) => {
        firsts.push(first)
        return [
          { sessionId: 'ses_b', events: [created, renamed('b')], options: { meta, expectedVersion: 0 } },
          // an event may name a seq of the batch itself: b's rename, numbered first + 1
          {
            sessionId: 'ses_c',
            events: [created, renamed(`after ${first + 1}`)],
            options: { meta, expectedVersion: 0 },
          },
          { sessionId: 'ses_b', events: [renamed('b again')], options: { meta, expectedVersion: 2 } },
        ]
      })
      expect(seqs(await queued)).toEqual([2])
      expect(firsts.at(-1)).toBe(3)
      expect(together.map((e) => [e.sessionId, e.seq, e.version])).toEqual([
        ['ses_b', 3, 1],
        ['ses_b', 4, 2],
        ['ses_c', 5, 1],
        ['ses_c', 6, 2],
        ['ses_b', 7, 3],
      ])
      expect(together[3]?.data).toEqual({ title: 'after 4' })
      expect(await log.readAll(2)).toEqual(together)
      expect(heard.flat()).toEqual([1, 2, 3, 4, 5, 6, 7]) // each once, in seq order
    })

    it('appends together all or nothing: one stale expected version or invalid event, and no session gets anything', async () => {
      const { log } = await fresh()
      await log.append('ses_a', [created], { meta })
      await expect(
        log.appendTogether(() => [
          { sessionId: 'ses_b', events: [created], options: { meta, expectedVersion: 0 } },
          { sessionId: 'ses_a', events: [renamed('stale')], options: { meta, expectedVersion: 0 } },
        ]),
      ).rejects.toMatchObject({ code: 'VERSION_CONFLICT' })
      await expect(
        log.appendTogether(() => [
          { sessionId: 'ses_b', events: [created], options: { meta, expectedVersion: 0 } },
          { sessionId: 'ses_c', events: [{ type: 'session.renamed', data: {} } as never], options: { meta } },
        ]),
      ).rejects.toMatchObject({ code: 'INVALID_EVENT' })
      expect([await log.head(), await log.version('ses_b'), await log.version('ses_c')]).toEqual([1, 0, 0])
      // and the log goes on from there
      expect(seqs(await log.append('ses_b', [created], { meta }))).toEqual([2])
    })

    it('refuses a stale expected version with VERSION_CONFLICT, and appends nothing', async () => {
      const { log } = await fresh()
      await log.append('ses_a', [created], { meta })
      await expect(log.append('ses_a', [renamed('late')], { meta, expectedVersion: 0 })).rejects.toMatchObject({
        code: 'VERSION_CONFLICT',
        details: { sessionId: 'ses_a', actual: 1, expected: 0 },
      })
      await expect(log.append('ses_b', [created], { meta, expectedVersion: 3 })).rejects.toMatchObject({
        code: 'VERSION_CONFLICT',
      })
      expect(await log.head()).toBe(1)
      expect(await log.version('ses_b')).toBe(0)
    })

    it('puts each event where it belongs: a session starts once, by its first event; a system stream holds its own', async () => {
      const { log } = await fresh()
      await expect(log.append('ses_new', [renamed('x')], { meta })).rejects.toMatchObject({
        code: 'SESSION_NOT_FOUND',
      })
      await log.append('ses_a', [created], { meta })
      await expect(log.append('ses_a', [created], { meta })).rejects.toMatchObject({ code: 'INVALID_EVENT' })
      const token: ChronicleEvent = { type: 'token.revoked', data: { tokenId: 'tok_1' } }
      await expect(log.append('ses_a', [token], { meta })).rejects.toMatchObject({ code: 'INVALID_EVENT' })
      await expect(log.append('sys_tokens', [created], { meta })).rejects.toMatchObject({ code: 'INVALID_EVENT' })
      expect(seqs(await log.append('sys_tokens', [token], { meta }))).toEqual([2])
    })

    it('validates every event before anything is written: an invalid one is INVALID_EVENT, and nothing is appended', async () => {
      const { log } = await fresh()
      await log.append('ses_a', [created], { meta })
      const bad = { type: 'session.renamed', data: { title: 42 } } as unknown as ChronicleEvent
      await expect(log.append('ses_a', [renamed('fine'), bad], { meta })).rejects.toMatchObject({
        code: 'INVALID_EVENT',
      })
      const unknown = { type: 'no.such.event', data: {} } as unknown as ChronicleEvent
      await expect(log.enqueue('ses_a', [unknown], { meta })).rejects.toMatchObject({ code: 'INVALID_EVENT' })
      expect(await log.head()).toBe(1)
    })

    it('commits what is queued in one turn together; a failing append sinks only itself', async () => {
      const { log } = await fresh()
      const commits: number[][] = []
      const took: number[] = []
      log.onCommit((events) => {
        commits.push(seqs(events))
        took.push(log.commitMs) // what a commit listener reads of the commit it hears
      })
      await log.append('ses_a', [created], { meta })
      const results = await Promise.allSettled([
        log.enqueue('ses_a', [renamed('1')], { meta }),
        log.enqueue('ses_a', [renamed('stale')], { meta, expectedVersion: 0 }),
        log.enqueue('ses_a', [renamed('2')], { meta }),
      ])
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled'])
      expect((await log.readSession('ses_a')).map((e) => (e.data as { title?: string }).title)).toEqual([
        undefined,
        '1',
        '2',
      ])
      expect(commits.flat()).toEqual([1, 2, 3])
      expect(took).toHaveLength(commits.length)
      expect(took.every((ms) => Number.isFinite(ms) && ms >= 0)).toBe(true)
    })

    it('under concurrent writers on two connections, seq has no gap, commit order is seq order, and each listener hears each commit once', async () => {
      const { db, log } = await fresh()
      const other = await another(db)
      const heard: number[][] = [[], []]
      log.onCommit((events) => heard[0]?.push(...seqs(events)))
      other.onCommit((events) => heard[1]?.push(...seqs(events)))
      const sessions = Array.from({ length: 8 }, (_, i) => `ses_${i}`)
      await Promise.all(sessions.map((id, i) => (i % 2 ? other : log).append(id, [created], { meta })))
      // A reader polling meanwhile must never see a seq before every seq below it is visible.
      let seen = 0
      let gaps = 0
      let writing = true
      const reader = (async () => {
        while (writing) {
          const page = await log.readAll(seen, 10_000)
          if (page.length > 0 && seqs(page).some((s, i) => s !== seen + i + 1)) gaps++
          seen = page.at(-1)?.seq ?? seen
          await new Promise((r) => setImmediate(r))
        }
      })()
      await Promise.all(
        sessions.map(async (id, i) => {
          const writer = i % 2 ? other : log
          for (let k = 0; k < 25; k++) await writer.append(id, [renamed(`${k}`), renamed(`${k}'`)], { meta })
        }),
      )
      writing = false
      await reader
      const total = 8 + 8 * 25 * 2
      expect(gaps).toBe(0)
      expect(seqs(await log.readAll(0, 10_000))).toEqual(range(1, total))
      for (const id of sessions) expect((await log.readSession(id)).map((e) => e.version)).toEqual(range(1, 51))
      // each heard its own commits, in seq order, once
      for (const own of heard) expect(own).toEqual([...own].sort((a, b) => a - b))
      expect([...(heard[0] ?? []), ...(heard[1] ?? [])].sort((a, b) => a - b)).toEqual(range(1, total))
    })

    it('two writers racing on one session with the version they read: one wins each version, no update is lost', async () => {
      const { db, log } = await fresh()
      const other = await another(db)
      await log.append('ses_a', [created], { meta })
      let conflicts = 0
      const race = async (writer: EventLog, name: string) => {
        for (let done = 0; done < 20; ) {
          const version = await writer.version('ses_a')
          try {
            await writer.append('ses_a', [renamed(`${name} ${done}`)], { meta, expectedVersion: version })
            done++
          } catch (err) {
            if ((err as { code?: string }).code !== 'VERSION_CONFLICT') throw err
            conflicts++
          }
        }
      }
      await Promise.all([race(log, 'a'), race(other, 'b')])
      const events = await log.readSession('ses_a')
      expect(events.map((e) => e.version)).toEqual(range(1, 41))
      const titles = events.slice(1).map((e) => (e.data as { title: string }).title)
      expect(titles.filter((t) => t.startsWith('a '))).toHaveLength(20)
      expect(titles.filter((t) => t.startsWith('b '))).toHaveLength(20)
      expect(conflicts).toBeGreaterThanOrEqual(0)
    })

    it('chains each event to its stream’s last by the same hash on every engine, and keeps the log’s head', async () => {
      const at = Date.UTC(2026, 11, 3, 12)
      const { log } = await fresh({ now: () => at })
      const appended = [
        ...(await log.append('ses_a', [created, renamed('one')], { meta })),
        ...(await log.append('ses_b', [created], { meta: { actor: 'runtime' } })),
        ...(await log.append('ses_a', [renamed('two')], { meta })),
      ]
      // the chain computed here, from the events alone (src/events/chain.ts)
      const previous = new Map<string, Buffer | null>()
      let last: Buffer | null = null
      for (const e of appended) {
        last = eventHash(previous.get(e.sessionId) ?? null, {
          seq: e.seq,
          sessionId: e.sessionId,
          version: e.version,
          type: e.type,
          schemaVersion: CURRENT_SCHEMA_VERSION,
          at,
          meta: JSON.stringify(e.meta),
          data: JSON.stringify(e.data),
        })
        previous.set(e.sessionId, last)
      }
      const head = await log.chainHead()
      expect(head.seq).toBe(4)
      expect(head.hash?.toString('hex')).toBe(last?.toString('hex'))
      expect(appended.every((e) => e.at === new Date(at).toISOString())).toBe(true)
    })

    it('a subscription hands over the stored events after k, then live ones, each once and in order, while writers commit', async () => {
      const { log } = await fresh()
      for (const id of ['ses_a', 'ses_b']) await log.append(id, [created], { meta })
      const writing = (async () => {
        for (let i = 0; i < 60; i++) {
          await Promise.all([
            log.enqueue('ses_a', [renamed(`a${i}`)], { meta }),
            log.append('ses_b', [renamed(`b${i}`)], { meta }),
          ])
          if (i % 7 === 0) await new Promise((r) => setTimeout(r, 1))
        }
      })()
      await new Promise((r) => setTimeout(r, 5))
      const after = 3
      const sub = new LogSubscription(log, { sessions: ['ses_a'] }, after, { pageSize: 5, maxBuffer: 20 })
      const received: StoredEvent[] = []
      const reading = (async () => {
        for await (const e of sub) {
          received.push(e)
          if ((e.data as { title?: string }).title === 'a59') break
        }
      })()
      await writing
      await reading
      const expected = (await log.readSession('ses_a')).filter((e) => e.seq > after)
      expect(seqs(received)).toEqual(seqs(expected))
      expect(sub.isLive).toBe(true)
    })

    it('what commits while a subscription reads its last page comes live after it, without a gap', async () => {
      const { log } = await fresh()
      await log.append('ses_a', [created], { meta })
      let appendDuringRead = 3
      // A log whose read is overtaken by commits: the (empty) page comes back after three more events committed.
      const racing: EventLog = Object.assign(Object.create(log) as EventLog, {
        readFiltered: async (sessions: readonly string[] | '*', after: number, limit: number) => {
          const page = await log.readFiltered(sessions, after, limit)
          for (; appendDuringRead > 0; appendDuringRead--)
            await log.append('ses_a', [renamed(`during ${appendDuringRead}`)], { meta })
          return page
        },
        onCommit: log.onCommit.bind(log),
      })
      const sub = new LogSubscription(racing, { sessions: ['ses_a'] }, 1)
      const next = () =>
        Promise.race([
          sub.next().then((r) => (r.value as StoredEvent).seq),
          new Promise<string>((r) => setTimeout(() => r('nothing within 2 s'), 2000)),
        ])
      expect([await next(), await next(), await next()]).toEqual([2, 3, 4])
      expect(sub.isLive).toBe(true)
      sub.close()
    })

    it('a subscriber that stops reading holds at most maxBuffer events, then still gets every one once', async () => {
      const { log } = await fresh()
      await log.append('ses_a', [created], { meta })
      const sub = new LogSubscription(log, { sessions: '*' }, 0, { maxBuffer: 10, pageSize: 4 })
      expect((await sub.next()).value?.seq).toBe(1) // live, at the head
      let peak = 0
      log.onCommit(() => {
        peak = Math.max(peak, sub.buffered)
      })
      for (let i = 0; i < 50; i++) await log.append('ses_a', [renamed(`${i}`)], { meta })
      expect(peak).toBeLessThanOrEqual(10 + 1)
      const rest: number[] = []
      while (rest.length < 50) rest.push(((await sub.next()).value as StoredEvent).seq)
      expect(rest).toEqual(range(2, 51))
      sub.close()
      expect(await sub.next()).toEqual({ done: true, value: undefined })
    })

    it('stores blobs once, by the sha256 of their text, and gives them back', async () => {
      const { log } = await fresh()
      const system = 'You are Chronicle. ✓ unicode, and a long prompt '.repeat(200)
      const hash = await log.blobs.put(system)
      expect(hash).toBe(createHash('sha256').update(system).digest('hex'))
      expect(await log.blobs.put(system)).toBe(hash)
      expect(await log.blobs.get(hash)).toBe(system)
      expect(await log.blobs.get('0'.repeat(64))).toBeUndefined()
    })

    it('keeps what it committed: another server opening the database reads it, and goes on from its head', async () => {
      const { db, log } = await fresh()
      await log.append('ses_a', [created, renamed('kept')], { meta, durability: 'full' })
      const head = await log.chainHead()
      const reopened = await another(db)
      expect(await reopened.readSession('ses_a')).toEqual(await log.readSession('ses_a'))
      expect(await reopened.chainHead()).toEqual(head)
      expect(seqs(await reopened.append('ses_a', [renamed('next')], { meta, expectedVersion: 2 }))).toEqual([3])
    })
  })
}
