import { afterEach, describe, expect, it } from 'vitest'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import type { EventMeta } from '../../src/events/envelope.js'
import type { EventLog } from '../../src/events/log.js'
import type { ReadModels } from '../../src/projections/read-models.js'

/**
 * The read models' contract (src/projections/read-models.ts), one suite for
 * both engines: test/projections/read-models.sqlite.test.ts on SQLite files,
 * test/projections/read-models-port.postgres.test.ts on a real PostgreSQL
 * server. Histories are appended through the log port; every query the
 * code makes is then read through the read-model port.
 */
export interface ReadModelEngine {
  /** a new, empty store: its log, its read models, and how to close it */
  open(): Promise<{ log: EventLog; models: ReadModels; close(): Promise<void> }>
}

const user: EventMeta = { actor: 'user' }
const runtime: EventMeta = { actor: 'runtime' }
const created = (directory = '/w', parent?: { sessionId: string; callId: string }): ChronicleEvent => ({
  type: 'session.created',
  data: { directory, agent: 'build', model: null, ...(parent && { parent }) },
})
const renamed = (title: string): ChronicleEvent => ({ type: 'session.renamed', data: { title } })

/** One turn: a question, and an answer streamed in two deltas (ended unless `open`). */
function turn(id: string, t: number, open = false): ChronicleEvent[] {
  const [question, answer, part] = [`msg_${t}q`, `msg_${t}a`, `prt_${t}a`]
  return [
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
    { type: 'text.started', data: { messageId: answer, partId: part } },
    { type: 'text.delta', data: { partId: part, text: `answer ${t}` } },
    { type: 'text.delta', data: { partId: part, text: ` of ${id}` } },
    ...(open
      ? []
      : ([
          { type: 'text.ended', data: { partId: part } },
          { type: 'message.completed', data: { messageId: answer, finish: 'stop' } },
        ] as ChronicleEvent[])),
  ]
}

export function describeReadModelContract(name: string, engine: ReadModelEngine): void {
  describe(`the read-model contract: ${name}`, () => {
    const opened: { close(): Promise<void> }[] = []
    afterEach(async () => {
      for (const o of opened.splice(0)) await o.close()
    })
    const fresh = async () => {
      const o = await engine.open()
      opened.push(o)
      return o
    }

    it('reads a session, its messages and parts — a streaming part with its logged deltas — and one view of all', async () => {
      const { log, models } = await fresh()
      await log.append('ses_a', [created(), renamed('first'), ...turn('ses_a', 0), ...turn('ses_a', 1, true)], {
        meta: user,
      })
      expect(await models.session('ses_a')).toMatchObject({ id: 'ses_a', title: 'first', version: 16 })
      expect((await models.messages('ses_a')).map((m) => m.id)).toEqual(['msg_0a', 'msg_0q', 'msg_1a', 'msg_1q'])
      expect(await models.message('ses_a', 'msg_0a')).toMatchObject({ role: 'assistant', finish: 'stop' })
      const parts = await models.parts('ses_a', 'msg_1a')
      expect(parts).toEqual([expect.objectContaining({ id: 'prt_1a', text: 'answer 1 of ses_a', ended: false })])
      const view = await models.view('ses_a')
      expect([view.session?.id, view.messages.size, view.parts.size]).toEqual(['ses_a', 4, 4])
      expect(view.parts.get('prt_0a')).toMatchObject({ text: 'answer 0 of ses_a', ended: true })
      expect(await models.session('ses_none')).toBeUndefined()
      expect(await models.message('ses_a', 'msg_none')).toBeUndefined()
      expect((await models.view('ses_none')).session).toBeNull()
    })

    it('reads its own writes: what was appended to a session, still queued, is in what the session reads', async () => {
      const { log, models } = await fresh()
      await log.append('ses_a', [created()], { meta: user })
      const queued = log.enqueue('ses_a', [renamed('queued'), ...turn('ses_a', 0)], { meta: user }) // not awaited
      expect((await models.session('ses_a'))?.title).toBe('queued')
      expect(await models.parts('ses_a', 'msg_0a')).toEqual([expect.objectContaining({ text: 'answer 0 of ses_a' })])
      const listed = log.enqueue('ses_b', [created('/other')], { meta: user })
      expect(await models.sessionIds()).toEqual(['ses_a', 'ses_b'])
      await Promise.all([queued, listed])
    })

    it('a fork reads its parent as of the fork point, whatever the parent does after', async () => {
      const { log, models } = await fresh()
      await log.append('ses_p', [created(), ...turn('ses_p', 0)], { meta: user })
      const point = (await log.readSession('ses_p')).at(-1)?.seq as number
      await log.append('ses_f', [{ type: 'session.forked', data: { from: { sessionId: 'ses_p', seq: point } } }], {
        meta: user,
      })
      await log.append('ses_p', [...turn('ses_p', 1), renamed('moved on')], { meta: user })
      expect((await models.messages('ses_f')).map((m) => [m.id, m.sessionId])).toEqual([
        ['msg_0a', 'ses_f'],
        ['msg_0q', 'ses_f'],
      ])
      expect((await models.parts('ses_f')).map((p) => p.id)).toEqual(['prt_0a', 'prt_0q'])
      expect((await models.messages('ses_p')).length).toBe(4)
      expect((await models.session('ses_f'))?.forkedFrom).toEqual({ sessionId: 'ses_p', seq: point })
    })

    it('lists sessions most recently active first, in pages, archived apart', async () => {
      const { log, models } = await fresh()
      for (const id of ['ses_1', 'ses_2', 'ses_3', 'ses_4']) await log.append(id, [created()], { meta: user })
      await log.append('ses_2', [renamed('active')], { meta: user })
      await log.append('ses_4', [{ type: 'session.archived', data: {} }], { meta: user })
      const first = await models.list({ limit: 2 })
      expect(first.sessions.map((s) => s.id)).toEqual(['ses_2', 'ses_3'])
      const second = await models.list({ limit: 2, cursor: first.cursor as string })
      expect(second.sessions.map((s) => s.id)).toEqual(['ses_1'])
      expect(second.cursor).toBeUndefined()
      expect((await models.list({ archived: true })).sessions.map((s) => s.id)).toEqual(['ses_4'])
      await expect(models.list({ cursor: 'not a cursor' })).rejects.toMatchObject({ code: 'BAD_REQUEST' })
      // what a metrics scrape reads: sessions by status, the archived apart
      expect(await models.statusCounts()).toEqual([
        { status: 'idle', archived: false, count: 3 },
        { status: 'idle', archived: true, count: 1 },
      ])
    })

    it('finds the sessions recovery and the workspace look at, and the directories sessions can run in', async () => {
      const { log, models } = await fresh()
      await log.append('ses_idle', [created('/b'), ...turn('ses_idle', 0)], { meta: user })
      await log.append(
        'ses_running',
        [created('/a'), { type: 'run.started', data: { runId: 'run_1', reason: 'input' } }],
        {
          meta: runtime,
        },
      )
      const input = turn('ses_waiting', 0)[0] as ChronicleEvent // accepted, not delivered
      await log.append('ses_waiting', [created('/a'), input], { meta: user })
      await log.append('ses_child', [created('/c', { sessionId: 'ses_running', callId: 'call_1' })], { meta: runtime })
      await log.append(
        'ses_restoring',
        [
          created('/d'),
          {
            type: 'workspace.restore.started',
            data: {
              restoreId: 'rst_1',
              kind: 'revert',
              to: 1,
              from: 'a'.repeat(40),
              tree: 'b'.repeat(40),
              messages: [],
            },
          },
        ],
        { meta: user },
      )
      await log.append('ses_gone', [created('/z'), { type: 'session.archived', data: {} }], { meta: user })
      expect(await models.sessionsWithOpenWork()).toEqual(['ses_running', 'ses_waiting'])
      expect(await models.sessionsWithWorkspaceTask()).toEqual(['ses_restoring'])
      expect(await models.childSessionIds()).toEqual(['ses_child'])
      expect(await models.sessionIds()).toEqual([
        'ses_child',
        'ses_gone',
        'ses_idle',
        'ses_restoring',
        'ses_running',
        'ses_waiting',
      ])
      expect(await models.liveSessionDirectories()).toEqual(['/a', '/b', '/c', '/d'])
    })

    it('answers for sessions whose text JSON cannot carry in every engine: a NUL, a lone surrogate', async () => {
      const { log, models } = await fresh()
      const odd = 'a\u0000b \ud800 c \udfff \ud83d\ude00 \\u0000'
      await log.append('ses_odd', [created('/odd'), renamed(odd)], { meta: user })
      const waiting = turn('ses_odd', 0)[0] as ChronicleEvent & { type: 'input.accepted' }
      waiting.data.parts = [{ type: 'text', text: odd }]
      await log.append('ses_odd', [waiting], { meta: user })
      await log.append('ses_plain', [created('/plain')], { meta: user })
      expect((await models.session('ses_odd'))?.title).toBe(odd)
      expect(await models.sessionsWithOpenWork()).toEqual(['ses_odd'])
      expect(await models.sessionsWithWorkspaceTask()).toEqual([])
      expect(await models.liveSessionDirectories()).toEqual(['/odd', '/plain'])
      expect(await models.statusCounts()).toEqual([{ status: 'idle', archived: false, count: 2 }])
    })
  })
}
