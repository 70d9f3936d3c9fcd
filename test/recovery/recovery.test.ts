import { afterEach, describe, expect, it } from 'vitest'
import { execute } from '../../src/commands/execute.js'
import { decidePermission } from '../../src/commands/permission.js'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import { getSession } from '../../src/projections/queries/read-model.js'
import { verify } from '../../src/projections/upkeep/verify.js'
import { PARKED_APPROVED } from '../../src/runtime/recovery/resume.js'
import { continueRecovered, INTERRUPTED_MESSAGE, recoverSessions } from '../../src/runtime/recovery/recovery.js'
import { createScriptedModel, type ScriptedModel } from '../../src/runtime/model/scripted-model.js'
import { collapse, harness, type Harness } from '../runtime/helpers.js'
import { pairingProblem } from '../crash/checks.js'
import { accepted } from '../commands/history.js'
import { executeNow } from '../support/execute-now.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/**
 * Recovery on start (docs/RECOVERY.md): a log left by a crash — written here event by
 * event, exactly as the runtime writes it — is settled and its run continued
 * by a fresh runtime over the same store, as `start()` does.
 */

const INTERRUPTED = { kind: 'interrupted', message: INTERRUPTED_MESSAGE }

let h: Harness | undefined
afterEach(async () => {
  await h?.close()
  h = undefined
})

function setup(): { h: Harness; model: ScriptedModel } {
  const model = createScriptedModel({
    uniqueCallIds: true,
    steps: [
      { when: { afterToolResult: true }, text: 'Seen the result.' },
      { when: {}, text: 'Answered.' },
    ],
  })
  h = harness({ model })
  return { h, model }
}

/** Appends what a runtime had written before the process died. */
function crashed(x: Harness, sessionId: string, events: ChronicleEvent[]): void {
  x.store.append(sessionId, events, { meta: { actor: 'runtime', run: 'run_A' } })
}

/**
 * A run mid-way: input delivered, an assistant message that made a call (its state given by `tool`).
 * Ids sort before the runtime's sequential ones, as the time-ordered ids of earlier events would.
 */
function midRun(tool: 'running' | 'pending'): ChronicleEvent[] {
  const callEvents: ChronicleEvent[] = [
    {
      type: 'tool.input.started',
      data: { messageId: 'msg_000000A', partId: 'prt_000000b', callId: 'call_1', tool: 'slow' },
    },
    { type: 'tool.input.delta', data: { partId: 'prt_000000b', delta: '{"ms":5000}' } },
  ]
  const finished: ChronicleEvent[] = [
    {
      type: 'step.finished',
      data: { messageId: 'msg_000000A', partId: 'prt_000000t', finishReason: 'tool-calls', usage: {} },
    },
    { type: 'message.completed', data: { messageId: 'msg_000000A', finish: 'tool-calls', usage: {} } },
    {
      type: 'tool.called',
      data: { messageId: 'msg_000000A', partId: 'prt_000000b', callId: 'call_1', tool: 'slow', input: { ms: 5000 } },
    },
  ]
  return [
    accepted('in_1', 'go', 'queue'),
    { type: 'run.started', data: { runId: 'run_A', reason: 'input' } },
    { type: 'input.delivered', data: { inputId: 'in_1', messageId: 'msg_000000U', partIds: ['prt_000000i'] } },
    {
      type: 'message.created',
      data: {
        messageId: 'msg_000000A',
        role: 'assistant',
        parentId: 'msg_000000U',
        agent: 'build',
        model: 'mock:model',
      },
    },
    { type: 'step.started', data: { messageId: 'msg_000000A', partId: 'prt_000000s', step: 1, contextDigest: 'x' } },
    { type: 'text.started', data: { messageId: 'msg_000000A', partId: 'prt_000000a' } },
    { type: 'text.delta', data: { partId: 'prt_000000a', text: 'Let me' } },
    ...(tool === 'running'
      ? [{ type: 'text.ended', data: { partId: 'prt_000000a' } } as ChronicleEvent, ...callEvents, ...finished]
      : callEvents),
  ]
}

const after = (x: Harness, sessionId: string, seq: number) =>
  collapse(
    x
      .events(sessionId)
      .filter((e) => e.seq > seq)
      .map((e) => e.type),
  )

describe('recovery on start', () => {
  it('decides again when a command appended after its read (a cluster node recovers what it claims while serving)', async () => {
    const { h } = setup()
    const s = h.session()
    const other = h.session()
    crashed(h, s, midRun('running'))
    crashed(h, other, midRun('running'))
    const head = h.store.head()
    const ports = sqlitePorts(h.store)
    let raced = false
    const racing = Object.assign({}, ports, {
      log: Object.assign({}, ports.log, {
        append: ((sessionId, events, options) => {
          if (!raced) {
            raced = true // a client's command lands between recovery's read of the session and its append
            h?.store.append(sessionId, [{ type: 'session.renamed', data: { title: 'meanwhile' } }], {
              meta: { actor: 'user' },
            })
          }
          return ports.log.append(sessionId, events, options)
        }) as typeof ports.log.append,
      }),
    })

    const report = await recoverSessions(racing, { among: new Set([s]) })
    expect(raced).toBe(true)
    expect(report.resumed).toEqual([{ sessionId: s, runId: 'run_A', attempt: 1 }])
    expect(
      h
        .events(s)
        .filter((e) => e.seq > head)
        .map((e) => e.type),
    ).toEqual(['session.renamed', 'tool.failed', 'run.resumed'])
    // a session not among those claimed is left as it was
    expect(h.events(other).filter((e) => e.seq > head)).toEqual([])
  })

  it('mid-tool: the running call fails interrupted, the run resumes, the model sees the call paired with that result', async () => {
    const { h, model } = setup()
    const s = h.session()
    crashed(h, s, midRun('running'))
    const head = h.store.head()

    const report = await recoverSessions(sqlitePorts(h.store))
    expect(report.resumed).toEqual([{ sessionId: s, runId: 'run_A', attempt: 1 }])
    const settled = h.events(s).filter((e) => e.seq > head)
    expect(settled.map((e) => [e.type, e.data, e.meta.actor])).toEqual([
      ['tool.failed', { partId: 'prt_000000b', error: INTERRUPTED }, 'recovery'],
      ['run.resumed', { runId: 'run_A', attempt: 1 }, 'recovery'],
    ])

    await h.runtime.resume(s, 'run_A')
    await h.runtime.idle(s)
    expect(after(h, s, settled.at(-1)!.seq)).toEqual([
      'message.created',
      'step.started',
      'text.started',
      'text.delta',
      'text.ended',
      'step.finished',
      'message.completed',
      'run.finished',
    ])
    const finished = h.events(s).at(-1)!
    expect(finished.data).toEqual({ runId: 'run_A', outcome: 'idle' }) // the same run, continued
    expect(h.events(s).filter((e) => e.type === 'run.started')).toHaveLength(1)

    // What the model received next: the call and exactly one result, the synthetic interrupted one.
    expect(model.calls).toHaveLength(1)
    const prompt = model.calls[0]!.prompt
    expect(pairingProblem(prompt as never)).toBeUndefined()
    const tool = prompt.find((m) => m.role === 'tool')
    expect(JSON.stringify(tool)).toContain(
      'interrupted by a server restart; it may have partially executed; its outcome is unknown',
    )
    expect(verify(h.store).differences).toEqual([])
  })

  it('mid-stream: open text ended, the half-streamed call failed, the message closed with the error; the loop answers again', async () => {
    const { h, model } = setup()
    const s = h.session()
    crashed(h, s, midRun('pending'))
    const head = h.store.head()
    await recoverSessions(sqlitePorts(h.store))
    expect(
      h
        .events(s)
        .filter((e) => e.seq > head)
        .map((e) => [e.type, e.data]),
    ).toEqual([
      ['text.ended', { partId: 'prt_000000a' }],
      ['tool.failed', { partId: 'prt_000000b', error: INTERRUPTED }],
      ['message.completed', { messageId: 'msg_000000A', error: INTERRUPTED }],
      ['run.resumed', { runId: 'run_A', attempt: 1 }],
    ])
    await h.runtime.resume(s, 'run_A')
    await h.runtime.idle(s)
    // A message cut off by the restart does not answer the user: the resumed loop takes a step.
    expect(getSession(h.store, s)?.lastRun).toEqual({ runId: 'run_A', outcome: 'idle' })
    expect(model.calls).toHaveLength(1)
    expect(pairingProblem(model.calls[0]!.prompt as never)).toBeUndefined()
  })

  it('delivers input accepted before the crash but not yet delivered', async () => {
    const { h } = setup()
    const s = h.session()
    crashed(h, s, [...midRun('running'), accepted('in_2', 'and then', 'steer')])
    const quiet = h.session()
    crashed(h, quiet, [accepted('in_3', 'never started', 'queue')])
    const report = await recoverSessions(sqlitePorts(h.store))
    expect(report.deliver).toEqual([quiet])
    await h.runtime.resume(s, 'run_A')
    for (const id of report.deliver) h.runtime.wake(id)
    await h.runtime.idle(s)
    await h.runtime.idle(quiet)
    expect(h.events(s).some((e) => e.type === 'input.delivered' && e.data.inputId === 'in_2')).toBe(true)
    expect(h.events(quiet).map((e) => e.type)).toContain('input.delivered')
    expect(getSession(h.store, s)?.inbox).toEqual([])
    expect(getSession(h.store, quiet)?.lastRun?.outcome).toBe('idle')
  })

  it('a resumed run is held once continueRecovered returns: input that comes first joins it, no second run starts over it', async () => {
    const { h } = setup()
    const s = h.session()
    crashed(h, s, [...midRun('running'), accepted('in_2', 'and then', 'queue')])
    const report = await recoverSessions(sqlitePorts(h.store))
    const continued = continueRecovered(report, h.runtime) // start() calls it before the server listens
    h.runtime.wake(s) // the server's first command: input for the session (a submit ends in this wake)
    await continued
    await h.runtime.idle(s)
    expect(
      h
        .events(s)
        .flatMap((e) =>
          e.type === 'run.started' || e.type === 'run.resumed' || e.type === 'run.finished' ? [[e.type, e.data]] : [],
        ),
    ).toEqual([
      ['run.started', { runId: 'run_A', reason: 'input' }],
      ['run.resumed', { runId: 'run_A', attempt: 1 }],
      ['run.finished', { runId: 'run_A', outcome: 'idle' }], // the resumed run delivered in_2 and answered it
    ])
    expect(h.events(s).some((e) => e.type === 'input.delivered' && e.data.inputId === 'in_2')).toBe(true)
    expect(getSession(h.store, s)).toMatchObject({ run: null, inbox: [] })
  })

  it('a run the user cancelled ends cancelled and is never resumed', async () => {
    const { h } = setup()
    const s = h.session()
    crashed(h, s, [...midRun('running'), { type: 'run.cancel.requested', data: { runId: 'run_A' } }])
    const head = h.store.head()
    const report = await recoverSessions(sqlitePorts(h.store))
    expect(report).toMatchObject({ resumed: [], cancelled: [s], deliver: [] })
    expect(
      h
        .events(s)
        .filter((e) => e.seq > head)
        .map((e) => [e.type, e.data]),
    ).toEqual([
      ['tool.failed', { partId: 'prt_000000b', error: INTERRUPTED }],
      [
        'run.finished',
        {
          runId: 'run_A',
          outcome: 'cancelled',
          error: { kind: 'interrupted', message: `cancelled by the user; ${INTERRUPTED_MESSAGE}` },
        },
      ],
    ])
    expect(h.runtime.isRunning(s)).toBe(false)
  })

  it('past the resume budget the run ends failed, its permission requests closed', async () => {
    const { h } = setup()
    const s = h.session()
    crashed(h, s, [
      ...midRun('running'),
      {
        type: 'permission.requested',
        data: { requestId: 'per_1', partId: 'prt_000000b', callId: 'call_1', permission: 'slow', patterns: ['*'] },
      },
      { type: 'run.resumed', data: { runId: 'run_A', attempt: 1 } },
      { type: 'run.resumed', data: { runId: 'run_A', attempt: 2 } },
    ])
    const head = h.store.head()
    const report = await recoverSessions(sqlitePorts(h.store), { budget: 2 })
    expect(report.failed).toEqual([s])
    expect(
      h
        .events(s)
        .filter((e) => e.seq > head)
        .map((e) => [e.type, e.data]),
    ).toEqual([
      ['tool.failed', { partId: 'prt_000000b', error: INTERRUPTED }],
      [
        'permission.replied',
        { requestId: 'per_1', reply: 'reject', message: `${INTERRUPTED_MESSAGE}: the request was closed unanswered` },
      ],
      [
        'run.finished',
        {
          runId: 'run_A',
          outcome: 'failed',
          error: {
            kind: 'RESUME_BUDGET_EXHAUSTED',
            message: 'interrupted by 3 server restarts; not resumed again (resume budget 2)',
          },
        },
      ],
    ])
    expect(getSession(h.store, s)).toMatchObject({ status: 'idle', run: null, pendingPermissions: [] })
  })

  it('a running compaction fails; one only requested stays requested for the resumed run to perform', async () => {
    const { h } = setup()
    const running = h.session()
    crashed(h, running, [
      ...midRun('running'),
      { type: 'tool.completed', data: { partId: 'prt_000000b', output: 'ok' } },
      { type: 'compaction.requested', data: { compactionId: 'cmp_1', reason: 'auto' } },
      { type: 'compaction.started', data: { compactionId: 'cmp_1' } },
    ])
    const requested = h.session()
    crashed(h, requested, [
      ...midRun('running'),
      { type: 'compaction.requested', data: { compactionId: 'cmp_2', reason: 'manual' } },
    ])
    const head = h.store.head()
    await recoverSessions(sqlitePorts(h.store))
    expect(
      h
        .events(running)
        .filter((e) => e.seq > head)
        .map((e) => [e.type, e.data]),
    ).toEqual([
      ['compaction.failed', { compactionId: 'cmp_1', error: INTERRUPTED_MESSAGE }],
      ['run.resumed', { runId: 'run_A', attempt: 1 }],
    ])
    expect(
      h
        .events(requested)
        .filter((e) => e.seq > head)
        .map((e) => e.type),
    ).toEqual(['tool.failed', 'run.resumed'])
    expect(getSession(h.store, requested)?.compaction?.status).toBe('requested')
  })

  it('finds unfinished runs from the sessions read model: finished and idle sessions are untouched', async () => {
    const { h } = setup()
    const idle = h.session()
    const done = h.session()
    crashed(h, done, [
      ...midRun('running'),
      { type: 'tool.completed', data: { partId: 'prt_000000b', output: 'ok' } },
      { type: 'run.finished', data: { runId: 'run_A', outcome: 'idle' } },
    ])
    const head = h.store.head()
    expect(await recoverSessions(sqlitePorts(h.store))).toMatchObject({
      resumed: [],
      cancelled: [],
      failed: [],
      deliver: [],
    })
    expect(h.store.head()).toBe(head)
    expect(getSession(h.store, idle)?.status).toBe('idle')
  })
})

describe('a call parked on a permission request when the server died', () => {
  function parked(): { h: Harness; model: ScriptedModel; s: string } {
    const { h, model } = setup()
    const s = h.session()
    crashed(h, s, [
      ...midRun('running'),
      {
        type: 'permission.requested',
        data: { requestId: 'per_1', partId: 'prt_000000b', callId: 'call_1', permission: 'slow', patterns: ['5000'] },
      },
    ])
    return { h, model, s }
  }
  const reply = async (x: Harness, s: string, r: 'once' | 'always' | 'reject', message?: string) =>
    execute(
      sqlitePorts(x.store),
      s,
      (v) =>
        decidePermission({ type: 'reply', requestId: 'per_1', reply: r, ...(message && { message }) }, v, s, x.ids),
      {
        meta: { actor: 'user' },
        durability: 'full',
      },
    )

  it('stays parked: the request is re-offered (still pending, session waiting) and the call is not failed', async () => {
    const { h, model, s } = parked()
    const head = h.store.head()
    await recoverSessions(sqlitePorts(h.store))
    expect(
      h
        .events(s)
        .filter((e) => e.seq > head)
        .map((e) => e.type),
    ).toEqual(['run.resumed'])
    await h.runtime.resume(s, 'run_A')
    await new Promise((r) => setTimeout(r, 30))
    expect(getSession(h.store, s)).toMatchObject({
      status: 'waiting',
      pendingPermissions: [{ requestId: 'per_1', partId: 'prt_000000b' }],
    })
    expect(model.calls).toHaveLength(0) // the model is not asked while the user has not answered
  })

  it('answered once after the restart: the call is settled as not run, the model sees that and the run goes on', async () => {
    const { h, model, s } = parked()
    await recoverSessions(sqlitePorts(h.store))
    await h.runtime.resume(s, 'run_A')
    await new Promise((r) => setTimeout(r, 20))
    const head = h.store.head()
    await reply(h, s, 'once')
    await h.runtime.idle(s)
    const events = h.events(s).filter((e) => e.seq > head)
    expect(events.slice(0, 2).map((e) => [e.type, e.data])).toEqual([
      ['permission.replied', { requestId: 'per_1', reply: 'once' }],
      ['tool.failed', { partId: 'prt_000000b', error: { kind: 'interrupted', message: PARKED_APPROVED('once') } }],
    ])
    expect(events.at(-1)?.data).toEqual({ runId: 'run_A', outcome: 'idle' })
    expect(model.calls).toHaveLength(1)
    expect(pairingProblem(model.calls[0]!.prompt as never)).toBeUndefined()
    expect(JSON.stringify(model.calls[0]!.prompt)).toContain('permission was granted (once) after the restart')
  })

  it('rejected after the restart: the call fails denied with the user message, as without a crash', async () => {
    const { h, model, s } = parked()
    await recoverSessions(sqlitePorts(h.store))
    await h.runtime.resume(s, 'run_A')
    await new Promise((r) => setTimeout(r, 20))
    await reply(h, s, 'reject', 'not that one')
    await h.runtime.idle(s)
    const failed = h.events(s).find((e) => e.type === 'tool.failed')
    expect(failed?.data).toEqual({ partId: 'prt_000000b', error: { kind: 'denied', message: 'not that one' } })
    expect(JSON.stringify(model.calls[0]!.prompt)).toContain('not that one')
  })

  it('answered between recovery and the resumed run starting: the reply is read from the log', async () => {
    const { h, s } = parked()
    await recoverSessions(sqlitePorts(h.store))
    await reply(h, s, 'always')
    await h.runtime.resume(s, 'run_A')
    await h.runtime.idle(s)
    const failed = h.events(s).find((e) => e.type === 'tool.failed')
    expect(failed?.data).toEqual({
      partId: 'prt_000000b',
      error: { kind: 'interrupted', message: PARKED_APPROVED('always') },
    })
    expect(verify(h.store).differences).toEqual([])
  })

  it('cancelled while waiting: the request is closed, the call aborted, the run ends cancelled', async () => {
    const { h, model, s } = parked()
    await recoverSessions(sqlitePorts(h.store))
    await h.runtime.resume(s, 'run_A')
    await new Promise((r) => setTimeout(r, 20))
    const head = h.store.head()
    await h.runtime.cancel(s)
    await h.runtime.idle(s)
    expect(
      h
        .events(s)
        .filter((e) => e.seq > head)
        .map((e) => e.type),
    ).toEqual(['run.cancel.requested', 'permission.replied', 'tool.failed', 'run.finished'])
    expect(getSession(h.store, s)).toMatchObject({ status: 'idle', run: null, lastRun: { outcome: 'cancelled' } })
    expect(model.calls).toHaveLength(0)
  })

  it('cancelled as the user answers: recovery settles on what it read, reads again, and closes the request once', async () => {
    const { h, s } = parked()
    await recoverSessions(sqlitePorts(h.store))
    await h.runtime.resume(s, 'run_A')
    await new Promise((r) => setTimeout(r, 20))
    // The user's answer commits between recovery reading the session and appending its settlement.
    const enqueue = h.store.enqueue.bind(h.store)
    let raced = false
    h.store.enqueue = ((id, events, options) => {
      if (!raced && options.meta.actor === 'runtime' && events.some((e) => e.type === 'permission.replied')) {
        raced = true
        // the user's reply commits in the middle of the runtime's own (synchronously, as a race does)
        executeNow(
          h.store,
          s,
          (v) => decidePermission({ type: 'reply', requestId: 'per_1', reply: 'once' }, v, s, h.ids),
          { meta: { actor: 'user' }, durability: 'full' },
        )
      }
      return enqueue(id, events, options)
    }) as typeof h.store.enqueue
    await h.runtime.cancel(s)
    await h.runtime.idle(s)
    expect(raced).toBe(true)
    const replies = h.events(s).filter((e) => e.type === 'permission.replied')
    expect(replies.map((e) => [e.data, e.meta.actor])).toEqual([[{ requestId: 'per_1', reply: 'once' }, 'user']])
    expect(h.events(s).find((e) => e.type === 'tool.failed')?.data).toMatchObject({ error: { kind: 'aborted' } })
    expect(getSession(h.store, s)).toMatchObject({ status: 'idle', lastRun: { outcome: 'cancelled' } })
    expect(verify(h.store).differences).toEqual([])
  })
})
