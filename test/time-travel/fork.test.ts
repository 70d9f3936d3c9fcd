import { afterEach, describe, expect, it } from 'vitest'
import { fork } from '../../src/commands/fork.js'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import { isChronicleError } from '../../src/events/errors.js'
import { sequentialIds } from '../../src/events/ids.js'
import type { EventStore } from '../../src/events/store.js'
import type { Message, Part, Session } from '../../src/projections/fold/model.js'
import { openStore } from '../../src/projections/open.js'
import { history } from '../../src/projections/queries/history.js'
import { loadView } from '../../src/projections/queries/read-model.js'
import { stateAt } from '../../src/projections/time-travel/time-travel.js'
import { verify } from '../../src/projections/upkeep/verify.js'
import { asState, json, plainStateAt } from './helpers.js'
import { recordSession } from './recorded.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

const stores: EventStore[] = []
function open(): EventStore {
  const store = openStore(':memory:', { snapshotEvery: 5 })
  stores.push(store)
  return store
}
afterEach(() => {
  for (const s of stores.splice(0)) s.close()
})

const ABORTED = { kind: 'aborted', message: 'forked while running' }

/** What settlement must do to an entity, written out independently of src/commands/settle.ts. */
function settledPart(p: Part, sessionId: string, at: string): Part {
  const q = { ...p, sessionId }
  if ((q.type === 'text' || q.type === 'reasoning') && !q.ended) return { ...q, ended: true }
  if (q.type === 'tool' && (q.state === 'pending' || q.state === 'running'))
    return { ...q, state: 'error', error: { kind: 'aborted', message: 'forked while running' }, endedAt: at }
  if (q.type === 'subtask' && q.outcome === undefined) return { ...q, outcome: 'cancelled' }
  return q
}
function settledMessage(m: Message, sessionId: string, at: string): Message {
  const q = { ...m, sessionId }
  return q.role === 'assistant' && q.completedAt === undefined ? { ...q, completedAt: at, error: ABORTED } : q
}
function ownEvents(store: EventStore, sessionId: string): ChronicleEvent[] {
  return store.readSession(sessionId).map((e) => ({ type: e.type, data: e.data }) as ChronicleEvent)
}

describe('fork', () => {
  it('at every event of a recorded session: the child is the parent’s state there, settled, idle; the parent is untouched', async () => {
    const store = open()
    const seqs = recordSession(store)
    const parentBefore = asState(loadView(store, 'ses_rec'), 0)
    const ids = sequentialIds()
    for (const seq of seqs) {
      const parent = stateAt(store, 'ses_rec', seq)
      const child = await fork(sqlitePorts(store), ids, 'ses_rec', seq)
      const at = child.createdAt
      const state = stateAt(store, child.id)
      // the stored read model is what time travel says, and both are the plain fold
      expect(asState(loadView(store, child.id), state.seq)).toEqual(json(state))
      expect(json(state)).toEqual(plainStateAt(store, child.id, state.seq))
      expect(JSON.parse(JSON.stringify({ ...state, session: null }))).toEqual(
        JSON.parse(
          JSON.stringify({
            session: null,
            messages: parent.messages.map((m) => settledMessage(m, child.id, at)),
            parts: parent.parts.map((p) => settledPart(p, child.id, at)),
            seq: state.seq,
          }),
        ),
      )
      const p = parent.session
      const expected: Session = {
        ...p,
        id: child.id,
        title: `${p.title} (fork)`,
        forkedFrom: { sessionId: 'ses_rec', seq },
        status: 'idle',
        run: null,
        retry: null,
        lastRun: p.run ? { runId: p.run.runId, outcome: 'cancelled', error: ABORTED } : p.lastRun,
        pendingPermissions: [],
        compaction:
          p.compaction && ['requested', 'running'].includes(p.compaction.status)
            ? { ...p.compaction, status: 'failed' }
            : p.compaction,
        createdAt: at,
        updatedAt: at,
        lastSeq: state.seq,
        version: state.session.version,
      }
      expect(JSON.parse(JSON.stringify(state.session))).toEqual(JSON.parse(JSON.stringify(expected)))
      expect(state.session.inbox).toEqual(p.inbox) // queued inputs stay queued
      expect(ownEvents(store, child.id)[0]).toEqual({
        type: 'session.forked',
        data: { from: { sessionId: 'ses_rec', seq } },
      })
    }
    expect(asState(loadView(store, 'ses_rec'), 0)).toEqual(parentBefore)
    expect(verify(store).differences).toEqual([])
  })

  it('settles a fork taken while a tool waits for permission with exactly these events', async () => {
    const store = open()
    const seqs = recordSession(store)
    const seq = seqs.find((s) => store.get(s)?.type === 'permission.requested') as number
    const child = await fork(sqlitePorts(store), sequentialIds(), 'ses_rec', seq, { title: 'what if' })
    expect(ownEvents(store, child.id)).toEqual([
      { type: 'session.forked', data: { from: { sessionId: 'ses_rec', seq }, title: 'what if' } },
      { type: 'tool.failed', data: { partId: 'prt_c2', error: ABORTED } },
      {
        type: 'permission.replied',
        data: {
          requestId: 'per_1',
          reply: 'reject',
          message: 'forked while running: the request was closed unanswered',
        },
      },
      { type: 'message.completed', data: { messageId: 'msg_a1', error: ABORTED } },
      { type: 'run.finished', data: { runId: 'run_1', outcome: 'cancelled', error: ABORTED } },
    ])
    expect(child).toMatchObject({ title: 'what if', status: 'idle', run: null, pendingPermissions: [] })
  })

  it('settles a fork taken mid-stream (open text, a tool still streaming its input)', async () => {
    const store = open()
    const seqs = recordSession(store)
    const child = await fork(sqlitePorts(store), sequentialIds(), 'ses_rec', seqs[seqs.length - 1] as number)
    expect(ownEvents(store, child.id).slice(1)).toEqual([
      { type: 'tool.failed', data: { partId: 'prt_c5', error: ABORTED } },
      { type: 'text.ended', data: { partId: 'prt_t4' } },
      { type: 'message.completed', data: { messageId: 'msg_a4', error: ABORTED } },
      { type: 'run.finished', data: { runId: 'run_3', outcome: 'cancelled', error: ABORTED } },
    ])
  })

  it('parent and child then diverge independently; a fork of the fork works at inherited and own seqs', async () => {
    const store = open()
    const seqs = recordSession(store)
    const ids = sequentialIds()
    const cut = seqs[seqs.length - 3] as number // text 'Editing' streaming
    const child = await fork(sqlitePorts(store), ids, 'ses_rec', cut)
    store.append(
      'ses_rec',
      [
        { type: 'tool.input.delta', data: { partId: 'prt_c5', delta: '.md"}' } },
        { type: 'text.delta', data: { partId: 'prt_t4', text: ' more' } },
      ],
      { meta: { actor: 'model' } },
    )
    const input: ChronicleEvent = {
      type: 'input.accepted',
      data: {
        inputId: 'in_c',
        parts: [{ type: 'text', text: 'try again' }],
        delivery: 'queue',
        noReply: false,
        digest: 'dc',
      },
    }
    store.append(
      child.id,
      [
        input,
        { type: 'run.started', data: { runId: 'run_c', reason: 'input' } },
        { type: 'input.delivered', data: { inputId: 'in_c', messageId: 'msg_c', partIds: ['prt_c'] } },
      ],
      { meta: { actor: 'runtime' } },
    )

    const parentNow = stateAt(store, 'ses_rec')
    const childNow = stateAt(store, child.id)
    expect(parentNow.parts.find((p) => p.id === 'prt_t4')).toMatchObject({ text: 'Editing more', ended: false })
    expect(childNow.parts.find((p) => p.id === 'prt_t4')).toMatchObject({ text: 'Editing', ended: true })
    expect(parentNow.messages.map((m) => m.id)).not.toContain('msg_c')
    expect(childNow.messages.map((m) => m.id)).toContain('msg_c')
    expect(childNow.session.status).toBe('busy')

    const grandOwn = await fork(sqlitePorts(store), ids, child.id, childNow.seq)
    const grandInherited = await fork(sqlitePorts(store), ids, child.id, seqs[10] as number)
    expect(json(stateAt(store, grandOwn.id))).toEqual(plainStateAt(store, grandOwn.id, stateAt(store, grandOwn.id).seq))
    expect(stateAt(store, grandInherited.id).messages.map((m) => m.id)).toEqual(
      stateAt(store, 'ses_rec', seqs[10]).messages.map((m) => m.id),
    )
    // the inherited prefix of the grandchild is the parent's events up to seqs[10], then its own
    const page = history(store, grandInherited.id, { limit: 100 })
    expect(page.events.map((e) => [e.seq, e.inherited ?? false])).toEqual([
      ...seqs.slice(0, 11).map((s) => [s, true]),
      ...store.readSession(grandInherited.id).map((e) => [e.seq, false]),
    ])
    expect(verify(store).differences).toEqual([])
  })

  it('refuses an unknown session or a seq outside the history, appending nothing', async () => {
    const store = open()
    recordSession(store)
    const head = store.head()
    for (const [id, seq, code] of [
      ['ses_nope', 1, 'SESSION_NOT_FOUND'],
      ['ses_rec', head + 5, 'SEQ_OUT_OF_RANGE'],
    ] as const) {
      let caught: unknown
      try {
        await fork(sqlitePorts(store), sequentialIds(), id, seq)
      } catch (err) {
        caught = err
      }
      expect(isChronicleError(caught) && caught.code).toBe(code)
    }
    expect(store.head()).toBe(head)
  })
})
