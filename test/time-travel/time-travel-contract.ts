import { afterEach, describe, expect, it } from 'vitest'
import { fork } from '../../src/commands/fork.js'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import type { StoredEvent } from '../../src/events/envelope.js'
import { createIdSource } from '../../src/events/ids.js'
import type { EventLog } from '../../src/events/log.js'
import { type EventReader, foldSession } from '../../src/projections/fold/fold.js'
import type { ReadModels } from '../../src/projections/read-models.js'
import type { TimeTravel } from '../../src/projections/time-travel/port.js'
import { asState, json } from './helpers.js'

/**
 * Time travel's contract (src/projections/time-travel/port.ts), one suite
 * for both engines: test/time-travel/time-travel.sqlite.test.ts on SQLite
 * files, time-travel.postgres.test.ts on a real PostgreSQL server. Histories
 * are appended through the log port, with snapshot rows every few events so
 * states are answered from chains and folds both; every answer is compared
 * with a plain fold of the very events appended, held in memory.
 */
export interface TimeTravelEngine {
  /** a new, empty store whose time travel records a snapshot row every `snapshotEvery` events */
  open(snapshotEvery: number): Promise<{
    log: EventLog
    travel: TimeTravel
    models: ReadModels
    close(): Promise<void>
  }>
}

const meta = { actor: 'runtime' as const }
const created: ChronicleEvent = { type: 'session.created', data: { directory: '/w', agent: 'build', model: null } }
const forked = (sessionId: string, seq: number): ChronicleEvent => ({
  type: 'session.forked',
  data: { from: { sessionId, seq } },
})

/** A turn whose answer streams in `deltas` deltas, and a tool call; left open (mid-stream) when `open`. */
function turn(t: number, deltas: number, open = false): ChronicleEvent[] {
  const [question, answer, text, tool] = [`msg_${t}q`, `msg_${t}a`, `prt_${t}t`, `prt_${t}c`]
  const events: ChronicleEvent[] = [
    {
      type: 'input.accepted',
      data: {
        inputId: `in_${t}`,
        parts: [{ type: 'text', text: `q${t}` }],
        delivery: 'queue',
        noReply: false,
        digest: `d${t}`,
      },
    },
    { type: 'input.delivered', data: { inputId: `in_${t}`, messageId: question, partIds: [`prt_${t}q`] } },
    {
      type: 'message.created',
      data: { messageId: answer, role: 'assistant', parentId: question, agent: 'build', model: null },
    },
    { type: 'text.started', data: { messageId: answer, partId: text } },
  ]
  for (let d = 0; d < deltas; d++) events.push({ type: 'text.delta', data: { partId: text, text: `w${t}.${d} ` } })
  if (open) return events
  events.push(
    { type: 'text.ended', data: { partId: text } },
    {
      type: 'tool.called',
      data: { messageId: answer, partId: tool, callId: `call_${t}`, tool: 'read', input: { path: `f${t}` } },
    },
    { type: 'tool.completed', data: { partId: tool, output: `contents ${t}`, title: `f${t}` } },
    { type: 'message.completed', data: { messageId: answer, finish: 'stop' } },
  )
  return events
}

/** Every event appended, in memory: the oracle's log. */
class Appended implements EventReader {
  readonly all: StoredEvent[] = []
  constructor(private readonly log: EventLog) {}

  async append(sessionId: string, events: ChronicleEvent[]): Promise<StoredEvent[]> {
    const stored = await this.log.append(sessionId, events, { meta })
    this.all.push(...stored)
    return stored
  }

  *iterateSession(sessionId: string, opts: { after?: number; upTo?: number } = {}): Iterable<StoredEvent> {
    const [after, upTo] = [opts.after ?? 0, opts.upTo ?? Number.MAX_SAFE_INTEGER]
    for (const e of this.all) if (e.sessionId === sessionId && e.seq > after && e.seq <= upTo) yield e
  }

  readSession(sessionId: string, opts: { after?: number; upTo?: number; limit?: number } = {}): StoredEvent[] {
    return [...this.iterateSession(sessionId, opts)].slice(0, opts.limit)
  }

  /** The seqs of a session's history: what it inherits up to its fork point, then its own. */
  historyOf(sessionId: string): number[] {
    const own = this.readSession(sessionId)
    const first = own[0] as StoredEvent
    const inherited =
      first.type === 'session.forked'
        ? this.historyOf(first.data.from.sessionId).filter((s) => s <= first.data.from.seq)
        : []
    return [...inherited, ...own.map((e) => e.seq)]
  }
}

export function describeTimeTravelContract(name: string, engine: TimeTravelEngine): void {
  describe(`the time-travel contract: ${name}`, () => {
    const opened: { close(): Promise<void> }[] = []
    afterEach(async () => {
      for (const s of opened.splice(0)) await s.close()
    })
    const open = async (snapshotEvery = 4) => {
      const store = await engine.open(snapshotEvery)
      opened.push(store)
      return store
    }

    /** ses_a streams turns; ses_b forks it mid-stream; ses_c forks ses_b at a seq ses_b inherited; all interleaved. */
    async function histories(log: EventLog) {
      const log_ = new Appended(log)
      await log_.append('ses_a', [created])
      for (let t = 0; t < 3; t++) await log_.append('ses_a', turn(t, 5))
      const midStream = (await log_.append('ses_a', turn(3, 4, true))).at(-2)?.seq as number
      await log_.append('ses_b', [forked('ses_a', midStream)])
      await log_.append('ses_b', turn(10, 3))
      await log_.append('ses_a', [{ type: 'text.delta', data: { partId: 'prt_3t', text: 'more' } }])
      const inheritedByB = log_.historyOf('ses_b')[8] as number
      await log_.append('ses_c', [forked('ses_b', inheritedByB)])
      await log_.append('ses_c', turn(20, 9))
      await log_.append('ses_b', turn(11, 2))
      return log_
    }

    it('answers the state at every event of every history as a plain fold of the log does, cold and then from its snapshots', async () => {
      const { log, travel } = await open()
      const appended = await histories(log)
      for (const pass of ['cold', 'warm']) {
        for (const id of ['ses_a', 'ses_b', 'ses_c']) {
          for (const seq of appended.historyOf(id)) {
            const expected = asState(foldSession(appended, id, seq), seq)
            expect(json(await travel.stateAt(id, seq)), `${pass} ${id} at ${seq}`).toEqual(expected)
          }
          const latest = appended.historyOf(id).at(-1) as number
          expect(json(await travel.stateAt(id)), `${pass} ${id} now`).toEqual(
            asState(foldSession(appended, id), latest),
          )
        }
      }
    })

    it('reads its own writes: the state right after an append includes it', async () => {
      const { log, travel } = await open()
      await log.append('ses_a', [created], { meta })
      const [renamed] = await log.append('ses_a', [{ type: 'session.renamed', data: { title: 'now' } }], { meta })
      const state = await travel.stateAt('ses_a')
      expect(state.seq).toBe(renamed?.seq)
      expect(state.session.title).toBe('now')
    })

    it('refuses a seq outside the session’s history with SEQ_OUT_OF_RANGE, and an unknown session with SESSION_NOT_FOUND', async () => {
      const { log, travel } = await open()
      const appended = await histories(log)
      const afterTheFork = appended.readSession('ses_a').at(-1)?.seq as number // ses_a's, after ses_b forked it
      const ofC = appended.readSession('ses_c')[1]?.seq as number
      for (const seq of [afterTheFork, ofC, 0, -1, 1.5, 10 ** 9])
        await expect(travel.stateAt('ses_b', seq), `seq ${seq}`).rejects.toMatchObject({ code: 'SEQ_OUT_OF_RANGE' })
      await expect(travel.stateAt('ses_nope')).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' })
      await expect(travel.history('ses_nope')).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' })
    })

    it('pages a fork’s history forward and backward by seq, its inherited events marked', async () => {
      const { log, travel } = await open()
      const appended = await histories(log)
      const seqs = appended.historyOf('ses_c')
      const own = new Set(appended.readSession('ses_c').map((e) => e.seq))
      const forward: number[] = []
      for (let after: number | undefined = 0; after !== undefined; ) {
        const page = await travel.history('ses_c', { after, limit: 7 })
        for (const e of page.events) {
          forward.push(e.seq)
          expect(e.inherited === true, `seq ${e.seq}`).toBe(!own.has(e.seq))
        }
        after = page.next
      }
      expect(forward).toEqual(seqs)
      const backward: number[] = []
      for (let before: number | undefined = Number.MAX_SAFE_INTEGER; before !== undefined; ) {
        const page = await travel.history('ses_c', { before, limit: 5 })
        backward.unshift(...page.events.map((e) => e.seq))
        before = page.next
      }
      expect(backward).toEqual(seqs)
      const between = await travel.history('ses_c', { after: seqs[3], before: seqs[9] })
      expect(between.events.map((e) => e.seq)).toEqual(seqs.slice(4, 9))
      await expect(travel.history('ses_c', { limit: 0 })).rejects.toMatchObject({ code: 'BAD_REQUEST' })
    })

    it('forks at any event: the child starts as its parent was there, what was streaming settled, one stream more in the log', async () => {
      const { log, travel, models } = await open()
      const appended = await histories(log)
      const ids = createIdSource()
      const midStream = appended.readSession('ses_a').find((e) => e.type === 'text.delta' && e.data.partId === 'prt_3t')
        ?.seq as number
      const before = await log.head()
      const child = await fork({ log, readModels: models, timeTravel: travel }, ids, 'ses_a', midStream, {
        title: 'another way',
      })
      const added = await log.readAll(before)
      expect(added.every((e) => e.sessionId === child.id)).toBe(true)
      expect(added[0]).toMatchObject({ type: 'session.forked', data: { from: { sessionId: 'ses_a', seq: midStream } } })
      expect(child).toMatchObject({ title: 'another way', status: 'idle' })
      const parentThere = await travel.stateAt('ses_a', midStream)
      const childNow = await travel.stateAt(child.id)
      expect(childNow.messages.map((m) => m.id)).toEqual(parentThere.messages.map((m) => m.id))
      const text = (state: typeof childNow) => state.parts.find((p) => p.id === 'prt_3t') as { text: string }
      expect(text(childNow).text).toBe(text(parentThere).text)
      expect(childNow.messages.every((m) => m.sessionId === child.id)).toBe(true)
      await expect(fork({ log, readModels: models, timeTravel: travel }, ids, 'ses_a', 10 ** 9)).rejects.toMatchObject({
        code: 'SEQ_OUT_OF_RANGE',
      })
      expect(await log.head()).toBe(added.at(-1)?.seq)
    })
  })
}
