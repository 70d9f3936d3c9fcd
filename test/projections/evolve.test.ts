import { describe, expect, it } from 'vitest'
import { EVENT_TYPES, type ChronicleEvent, type EventType } from '../../src/events/catalogue.js'
import type { EventMeta } from '../../src/events/envelope.js'
import type { EventStore } from '../../src/events/store.js'
import { foldSession } from '../../src/projections/fold/fold.js'
import type { Message, Part, Session } from '../../src/projections/fold/model.js'
import { openStore } from '../../src/projections/open.js'
import { getMessages, getParts, getSession } from '../../src/projections/queries/read-model.js'
import { verify } from '../../src/projections/upkeep/verify.js'

/**
 * One given/when/then spec per event type: given a session's history, when
 * one more event is appended through the real store, then the stored read
 * model (queried like every other reader does) changes exactly as stated —
 * and still equals the fold of the log.
 */

const T0 = Date.UTC(2026, 10, 30, 12, 0, 0)
const AT = new Date(T0).toISOString()
const covered = new Set<EventType>()
const meta: EventMeta = { actor: 'runtime' }

interface ReadModel {
  session: Session
  messages: Message[]
  parts: Part[]
}

function readModel(store: EventStore, sessionId: string): ReadModel {
  return {
    session: getSession(store, sessionId) as Session,
    messages: getMessages(store, sessionId),
    parts: getParts(store, sessionId),
  }
}

/** given(events…).when(event…) → { before, after } read models of session `ses_1` (or the session the last event went to). */
function given(...history: (ChronicleEvent | [string, ChronicleEvent])[]) {
  const store = openStore(':memory:', { now: () => T0 })
  const append = (item: ChronicleEvent | [string, ChronicleEvent]) => {
    const [sessionId, event] = Array.isArray(item) ? item : ['ses_1', item]
    store.append(sessionId, [event], { meta })
    return sessionId
  }
  for (const e of history) append(e)
  return {
    when(...events: (ChronicleEvent | [string, ChronicleEvent])[]) {
      const sessionId = Array.isArray(events[events.length - 1])
        ? (events[events.length - 1] as [string, ChronicleEvent])[0]
        : 'ses_1'
      const before = getSession(store, sessionId) ? readModel(store, sessionId) : undefined
      for (const e of events) {
        covered.add((Array.isArray(e) ? e[1] : e).type)
        append(e)
      }
      const after = readModel(store, sessionId)
      // The stored read model is the fold of the log, always.
      expect(JSON.parse(JSON.stringify(after))).toEqual(
        JSON.parse(
          JSON.stringify({
            session: foldSession(store, sessionId).session,
            messages: after.messages,
            parts: after.parts,
          }),
        ),
      )
      expect(verify(store).differences).toEqual([])
      return { before: before as ReadModel, after, store }
    },
  }
}

const created: ChronicleEvent = {
  type: 'session.created',
  data: { directory: '/repo', agent: 'build', model: 'openai:gpt-5' },
}
const accepted = (
  inputId = 'in_1',
  over: Partial<Extract<ChronicleEvent, { type: 'input.accepted' }>['data']> = {},
): ChronicleEvent => ({
  type: 'input.accepted',
  data: {
    inputId,
    parts: [{ type: 'text', text: 'fix the bug' }],
    delivery: 'queue',
    noReply: false,
    digest: `sha256:${inputId}`,
    ...over,
  },
})
const delivered: ChronicleEvent = {
  type: 'input.delivered',
  data: { inputId: 'in_1', messageId: 'msg_1', partIds: ['prt_u1'] },
}
const runStarted: ChronicleEvent = { type: 'run.started', data: { runId: 'run_1', reason: 'input' } }
const assistant: ChronicleEvent = {
  type: 'message.created',
  data: { messageId: 'msg_2', role: 'assistant', parentId: 'msg_1', agent: 'build', model: 'openai:gpt-5' },
}
const running = [created, accepted(), delivered, runStarted, assistant]
const toolInput: ChronicleEvent = {
  type: 'tool.input.started',
  data: { messageId: 'msg_2', partId: 'prt_tool', callId: 'call_1', tool: 'read' },
}
const toolCalled: ChronicleEvent = {
  type: 'tool.called',
  data: { messageId: 'msg_2', partId: 'prt_tool', callId: 'call_1', tool: 'read', input: { filePath: 'a.ts' } },
}
const usage = { inputTokens: 100, outputTokens: 20, reasoningTokens: 5, cachedInputTokens: 40 }

const tool = (over: Partial<Extract<Part, { type: 'tool' }>>): Part =>
  ({
    id: 'prt_tool',
    sessionId: 'ses_1',
    messageId: 'msg_2',
    type: 'tool',
    callId: 'call_1',
    tool: 'read',
    rawInput: '{"filePath":"a.ts"}',
    state: 'running',
    input: { filePath: 'a.ts' },
    startedAt: AT,
    ...over,
  }) as Part

describe('session events', () => {
  it('session.created: a new idle session with its settings', () => {
    const { after } = given().when([
      'ses_1',
      {
        type: 'session.created',
        data: {
          directory: '/repo',
          agent: 'plan',
          model: null,
          title: 'Audit',
          parent: { sessionId: 'ses_0', callId: 'call_9' },
          rules: [{ permission: 'bash', pattern: '*', action: 'deny' }],
        },
      },
    ])
    expect(after).toEqual({
      session: {
        id: 'ses_1',
        title: 'Audit',
        directory: '/repo',
        agent: 'plan',
        model: null,
        parent: { sessionId: 'ses_0', callId: 'call_9' },
        forkedFrom: null,
        status: 'idle',
        run: null,
        lastRun: null,
        retry: null,
        totals: { inputTokens: 0, outputTokens: 0, reasoningTokens: 0, cachedInputTokens: 0, cost: 0 },
        rules: [{ permission: 'bash', pattern: '*', action: 'deny' }],
        approvals: [],
        inbox: [],
        pendingPermissions: [],
        todos: [],
        compaction: null,
        archived: false,
        createdAt: AT,
        updatedAt: AT,
        lastSeq: 1,
        version: 1,
      },
      messages: [],
      parts: [],
    })
  })

  it("session.forked: the parent's state at the fork point, under the child's id; later parent events stay out", () => {
    const { after } = given(
      created,
      accepted(),
      delivered,
      { type: 'session.renamed', data: { title: 'Parent' } },
      { type: 'session.renamed', data: { title: 'Parent later' } },
    ).when(['ses_2', { type: 'session.forked', data: { from: { sessionId: 'ses_1', seq: 4 } } }])
    expect(after.session).toMatchObject({
      id: 'ses_2',
      title: 'Parent (fork)',
      forkedFrom: { sessionId: 'ses_1', seq: 4 },
      parent: null,
      lastSeq: 6,
      version: 1,
      createdAt: AT,
    })
    expect(after.messages).toEqual([
      {
        id: 'msg_1',
        sessionId: 'ses_2',
        role: 'user',
        agent: 'build',
        model: 'openai:gpt-5',
        inputId: 'in_1',
        createdAt: AT,
      },
    ])
    expect(after.parts).toEqual([
      { id: 'prt_u1', sessionId: 'ses_2', messageId: 'msg_1', type: 'text', text: 'fix the bug', ended: true },
    ])
  })

  it('session.renamed: the title', () => {
    const { before, after } = given(created).when({ type: 'session.renamed', data: { title: 'Fix login' } })
    expect(after.session).toEqual({ ...before.session, title: 'Fix login', lastSeq: 2, version: 2 })
  })

  it.each([
    { type: 'title.started' as const, data: { titleId: 'ttl_1', model: 'mock:model' } },
    { type: 'title.failed' as const, data: { titleId: 'ttl_1', error: 'the model proposed no title' } },
  ])('$type: the title task is in the log; only the session head moves', (event) => {
    const { before, after } = given(created).when(event)
    expect(after.session).toEqual({ ...before.session, lastSeq: 2, version: 2 })
  })

  it('session.archived: archived, the log stays', () => {
    const { before, after, store } = given(created).when({ type: 'session.archived', data: {} })
    expect(after.session).toEqual({ ...before.session, archived: true, lastSeq: 2, version: 2 })
    expect(store.readSession('ses_1').map((e) => e.type)).toEqual(['session.created', 'session.archived'])
  })

  it('session.unarchived: listed again, the archive stays in the log', () => {
    const archived = { type: 'session.archived', data: {} } as ChronicleEvent
    const { before, after } = given(created, archived).when({ type: 'session.unarchived', data: {} })
    expect(before.session?.archived).toBe(true)
    expect(after.session).toEqual({ ...before.session, archived: false, lastSeq: 3, version: 3 })
  })

  it('session.rules.changed: replaces the configured rules', () => {
    const rules = [{ permission: 'edit', pattern: 'src/**', action: 'allow' as const }]
    const { before, after } = given({
      ...created,
      data: { ...created.data, rules: [{ permission: 'bash', pattern: '*', action: 'ask' }] },
    } as ChronicleEvent).when({ type: 'session.rules.changed', data: { rules } })
    expect(after.session).toEqual({ ...before.session, rules, lastSeq: 2, version: 2 })
  })

  const imported: ChronicleEvent = {
    type: 'session.imported',
    data: { originalId: 'ses_orig', importId: 'imp_1', events: 3, digest: 'sha256:file' },
  }
  const allowAll = [{ permission: '*', pattern: '*', action: 'allow' as const }]
  const approval: ChronicleEvent = {
    type: 'permission.rule.added',
    data: { ruleId: 'rul_1', rule: { permission: 'bash', pattern: '*', action: 'allow' } },
  }

  it('session.imported: marks the session imported; nothing else changes', () => {
    const { before, after } = given(created, accepted(), runStarted).when(imported)
    expect(after.session).toEqual({
      ...before.session,
      imported: { originalId: 'ses_orig', importId: 'imp_1', events: 3, digest: 'sha256:file' },
      lastSeq: 4,
      version: 4,
    })
  })

  const stranded: ChronicleEvent = { type: 'session.stranded', data: { node: 'node-a-x1', host: 'machine-1' } }

  it('session.stranded: marks the session stranded on the machine, until its run resumes there', () => {
    const { before, after } = given(created, accepted(), runStarted).when(stranded)
    expect(after.session).toEqual({
      ...before.session,
      stranded: { node: 'node-a-x1', host: 'machine-1', at: expect.any(String) },
      lastSeq: 4,
      version: 4,
    })
    const resumed = given(created, accepted(), runStarted, stranded).when({
      type: 'run.resumed',
      data: { runId: 'run_1', attempt: 1 },
    })
    expect(resumed.after.session.stranded).toBeUndefined()
    expect(resumed.after.session.run).toMatchObject({ runId: 'run_1', attempt: 1 })
  })

  it.each([
    [
      'run.started',
      { type: 'run.started', data: { runId: 'run_2', reason: 'input' } },
      [created, accepted(), stranded],
    ],
    [
      'run.finished',
      { type: 'run.finished', data: { runId: 'run_1', outcome: 'idle' } },
      [created, runStarted, stranded],
    ],
  ] as [string, ChronicleEvent, ChronicleEvent[]][])(
    '%s clears the stranded mark: the work goes on somewhere',
    (_, event, history) => {
      const { before, after } = given(...history).when(event)
      expect(before.session?.stranded).toMatchObject({ host: 'machine-1' })
      expect(after.session.stranded).toBeUndefined()
    },
  )

  it('session.forked: a fork of a stranded session is not stranded', () => {
    const { after } = given(created, runStarted, stranded).when([
      'ses_2',
      { type: 'session.forked', data: { from: { sessionId: 'ses_1', seq: 3 } } },
    ])
    expect(after.session.stranded).toBeUndefined()
  })

  it('session.forked with a directory: the child works there and keeps the rest of the state', () => {
    const { after } = given(
      { ...created, data: { ...created.data, rules: allowAll } } as ChronicleEvent,
      approval,
    ).when([
      'ses_2',
      { type: 'session.forked', data: { from: { sessionId: 'ses_1', seq: 2 }, directory: '/work/elsewhere' } },
    ])
    expect(after.session).toMatchObject({
      id: 'ses_2',
      directory: '/work/elsewhere',
      rules: allowAll,
      approvals: [{ ruleId: 'rul_1', permission: 'bash', pattern: '*', action: 'allow' }],
    })
  })

  it('session.forked fromImport: a new directory, and no rules, approvals, queued input or imported mark of the history', () => {
    const { after } = given(
      { ...created, data: { ...created.data, directory: '/', rules: allowAll } } as ChronicleEvent,
      approval,
      accepted('in_9'),
      imported,
    ).when([
      'ses_2',
      {
        type: 'session.forked',
        data: { from: { sessionId: 'ses_1', seq: 4 }, directory: '/work/mine', fromImport: true },
      },
    ])
    expect(after.session).toMatchObject({
      id: 'ses_2',
      directory: '/work/mine',
      rules: [],
      approvals: [],
      inbox: [],
      forkedFrom: { sessionId: 'ses_1', seq: 4 },
    })
    expect(after.session.imported).toBeUndefined()
  })
})

describe('input events', () => {
  it('input.accepted: joins the inbox (noReply: a user message at once; logged before `message` existed: recorded only)', () => {
    const { after } = given(created).when(
      accepted('in_1', { agent: 'plan', delivery: 'steer' }),
      accepted('in_2', { noReply: true }),
      accepted('in_3', { noReply: true, message: { messageId: 'msg_9', partIds: ['prt_9'] } }),
    )
    expect(after.session.inbox).toEqual([
      { inputId: 'in_1', seq: 2, parts: [{ type: 'text', text: 'fix the bug' }], delivery: 'steer', agent: 'plan' },
    ])
    expect(after.session.version).toBe(4)
    expect(after.messages).toEqual([
      expect.objectContaining({ id: 'msg_9', role: 'user', inputId: 'in_3', agent: 'build' }),
    ])
    expect(after.parts).toEqual([
      expect.objectContaining({ id: 'prt_9', messageId: 'msg_9', type: 'text', text: 'fix the bug', ended: true }),
    ])
  })

  it('input.delivered: the user message and its parts; the input leaves the inbox', () => {
    const parts = [
      { type: 'text' as const, text: 'look at this' },
      { type: 'file' as const, path: 'shot.png', mediaType: 'image/png' },
    ]
    const { after } = given(created, accepted('in_1', { parts, model: 'openai:o3' }), accepted('in_2')).when({
      type: 'input.delivered',
      data: { inputId: 'in_1', messageId: 'msg_1', partIds: ['prt_a', 'prt_b'], steered: true },
    })
    expect(after.session.inbox.map((i) => i.inputId)).toEqual(['in_2'])
    expect(after.messages).toEqual([
      {
        id: 'msg_1',
        sessionId: 'ses_1',
        role: 'user',
        agent: 'build',
        model: 'openai:o3',
        inputId: 'in_1',
        createdAt: AT,
        steered: true,
      },
    ])
    expect(after.parts).toEqual([
      { id: 'prt_a', sessionId: 'ses_1', messageId: 'msg_1', type: 'text', text: 'look at this', ended: true },
      { id: 'prt_b', sessionId: 'ses_1', messageId: 'msg_1', type: 'file', path: 'shot.png', mediaType: 'image/png' },
    ])
  })
})

describe('run events', () => {
  it('run.started: busy with the run', () => {
    const { after } = given(created).when(runStarted)
    expect(after.session).toMatchObject({
      status: 'busy',
      run: { runId: 'run_1', attempt: 0, cancelRequested: false },
      retry: null,
    })
  })

  it('run.resumed: busy again, counting the attempt', () => {
    const { after } = given(created, runStarted, { type: 'run.cancel.requested', data: { runId: 'run_1' } }).when({
      type: 'run.resumed',
      data: { runId: 'run_1', attempt: 2 },
    })
    expect(after.session).toMatchObject({ status: 'busy', run: { runId: 'run_1', attempt: 2, cancelRequested: true } })
  })

  it('run.cancel.requested: marks the run', () => {
    const { after } = given(created, runStarted).when({ type: 'run.cancel.requested', data: { runId: 'run_1' } })
    expect(after.session).toMatchObject({ status: 'busy', run: { runId: 'run_1', attempt: 0, cancelRequested: true } })
  })

  it('run.finished: idle, with the outcome kept as lastRun', () => {
    const { after } = given(created, runStarted, {
      type: 'step.retried',
      data: { messageId: 'msg_2', attempt: 1, delayMs: 10, error: 'x' },
    }).when({
      type: 'run.finished',
      data: { runId: 'run_1', outcome: 'error', error: { kind: 'provider', message: '500' } },
    })
    expect(after.session).toMatchObject({
      status: 'idle',
      run: null,
      retry: null,
      lastRun: { runId: 'run_1', outcome: 'error', error: { kind: 'provider', message: '500' } },
    })
  })
})

describe('message and step events', () => {
  it('message.created: an assistant message answering the user message', () => {
    const { after } = given(created, accepted(), delivered).when(assistant)
    expect(after.messages[1]).toEqual({
      id: 'msg_2',
      sessionId: 'ses_1',
      role: 'assistant',
      parentId: 'msg_1',
      agent: 'build',
      model: 'openai:gpt-5',
      createdAt: AT,
    })
  })

  it('message.completed: finish, usage, cost and error on the message; usage and cost added to the session totals', () => {
    const { after } = given(
      ...running,
      {
        type: 'message.completed',
        data: { messageId: 'msg_2', usage: { inputTokens: 1, outputTokens: 1 }, cost: 0.5 },
      },
      { ...assistant, data: { ...assistant.data, messageId: 'msg_3' } } as ChronicleEvent,
    ).when({
      type: 'message.completed',
      data: {
        messageId: 'msg_3',
        finish: 'length',
        usage,
        cost: 0.25,
        error: { kind: 'output_limit', message: 'cut off' },
      },
    })
    expect(after.messages.find((m) => m.id === 'msg_3')).toMatchObject({
      completedAt: AT,
      finish: 'length',
      usage,
      cost: 0.25,
      error: { kind: 'output_limit', message: 'cut off' },
    })
    expect(after.session.totals).toEqual({
      inputTokens: 101,
      outputTokens: 21,
      reasoningTokens: 5,
      cachedInputTokens: 40,
      cost: 0.75,
    })
  })

  it('step.started: a step-start part with the context digest; a retrying session is busy again', () => {
    const { after } = given(...running, {
      type: 'step.retried',
      data: { messageId: 'msg_2', attempt: 1, delayMs: 500, error: 'rate limited' },
    }).when({
      type: 'step.started',
      data: { messageId: 'msg_2', partId: 'prt_s1', step: 1, contextDigest: 'sha256:abc' },
    })
    expect(after.parts.find((p) => p.id === 'prt_s1')).toEqual({
      id: 'prt_s1',
      sessionId: 'ses_1',
      messageId: 'msg_2',
      type: 'step-start',
      step: 1,
      contextDigest: 'sha256:abc',
    })
    expect(after.session).toMatchObject({ status: 'busy', retry: null })
  })

  it('step.finished: a step-finish part with the finish reason and usage', () => {
    const { after } = given(...running).when({
      type: 'step.finished',
      data: { messageId: 'msg_2', partId: 'prt_f1', finishReason: 'tool-calls', usage },
    })
    expect(after.parts.find((p) => p.id === 'prt_f1')).toEqual({
      id: 'prt_f1',
      sessionId: 'ses_1',
      messageId: 'msg_2',
      type: 'step-finish',
      finishReason: 'tool-calls',
      usage,
    })
  })

  it('step.retried: retrying, with attempt, delay and error', () => {
    const { after } = given(...running).when({
      type: 'step.retried',
      data: { messageId: 'msg_2', attempt: 2, delayMs: 4000, error: '429 Too Many Requests' },
    })
    expect(after.session).toMatchObject({
      status: 'retrying',
      retry: { attempt: 2, delayMs: 4000, error: '429 Too Many Requests' },
    })
  })
})

describe('text and reasoning events', () => {
  it.each(['text', 'reasoning'] as const)('%s.started: an empty, open part', (kind) => {
    const { after } = given(...running).when({ type: `${kind}.started`, data: { messageId: 'msg_2', partId: 'prt_x' } })
    expect(after.parts.find((p) => p.id === 'prt_x')).toEqual({
      id: 'prt_x',
      sessionId: 'ses_1',
      messageId: 'msg_2',
      type: kind,
      text: '',
      ended: false,
    })
  })

  it.each(['text', 'reasoning'] as const)('%s.delta: appends, delta by delta, however long the part grows', (kind) => {
    const long = 'ü😀'.repeat(700) // crosses slice boundaries, surrogate pairs included
    const { after } = given(
      ...running,
      { type: `${kind}.started`, data: { messageId: 'msg_2', partId: 'prt_x' } },
      { type: `${kind}.delta`, data: { partId: 'prt_x', text: 'Hel' } },
    ).when(
      { type: `${kind}.delta`, data: { partId: 'prt_x', text: 'lo ' } },
      { type: `${kind}.delta`, data: { partId: 'prt_x', text: long } },
      { type: `${kind}.delta`, data: { partId: 'prt_x', text: '\ud83d' } },
    )
    expect(after.parts.find((p) => p.id === 'prt_x')).toMatchObject({
      type: kind,
      text: `Hello ${long}\ud83d`,
      ended: false,
    })
  })

  it.each(['text', 'reasoning'] as const)('%s.ended: the part is complete', (kind) => {
    const { after } = given(
      ...running,
      { type: `${kind}.started`, data: { messageId: 'msg_2', partId: 'prt_x' } },
      { type: `${kind}.delta`, data: { partId: 'prt_x', text: 'done' } },
    ).when({ type: `${kind}.ended`, data: { partId: 'prt_x' } })
    expect(after.parts.find((p) => p.id === 'prt_x')).toEqual({
      id: 'prt_x',
      sessionId: 'ses_1',
      messageId: 'msg_2',
      type: kind,
      text: 'done',
      ended: true,
    })
  })
})

describe('tool events', () => {
  it('tool.input.started: a pending tool part', () => {
    const { after } = given(...running).when(toolInput)
    expect(after.parts.find((p) => p.id === 'prt_tool')).toEqual({
      id: 'prt_tool',
      sessionId: 'ses_1',
      messageId: 'msg_2',
      type: 'tool',
      callId: 'call_1',
      tool: 'read',
      state: 'pending',
      rawInput: '',
    })
  })

  it('tool.input.delta: appends to the raw input', () => {
    const { after } = given(...running, toolInput, {
      type: 'tool.input.delta',
      data: { partId: 'prt_tool', delta: '{"filePath":' },
    }).when({ type: 'tool.input.delta', data: { partId: 'prt_tool', delta: '"a.ts"}' } })
    expect(after.parts.find((p) => p.id === 'prt_tool')).toMatchObject({
      state: 'pending',
      rawInput: '{"filePath":"a.ts"}',
    })
  })

  it('tool.called: running, with the parsed input (the streamed raw input kept; else the input as JSON)', () => {
    const streamed = given(...running, toolInput, {
      type: 'tool.input.delta',
      data: { partId: 'prt_tool', delta: '{"filePath": "a.ts"}' },
    }).when(toolCalled)
    expect(streamed.after.parts.find((p) => p.id === 'prt_tool')).toEqual(tool({ rawInput: '{"filePath": "a.ts"}' }))
    const whole = given(...running).when(toolCalled)
    expect(whole.after.parts.find((p) => p.id === 'prt_tool')).toEqual(tool({}))
  })

  it('tool.progressed: merges live metadata', () => {
    const { after } = given(...running, toolCalled, {
      type: 'tool.progressed',
      data: { partId: 'prt_tool', metadata: { lines: 1, output: 'a' } },
    }).when({ type: 'tool.progressed', data: { partId: 'prt_tool', metadata: { output: 'ab' } } })
    expect(after.parts.find((p) => p.id === 'prt_tool')).toEqual(tool({ metadata: { lines: 1, output: 'ab' } }))
  })

  it('tool.network: each host the call reached or was refused is added to the part, in order', () => {
    const registry = {
      host: 'registry.npmjs.org',
      port: 443,
      allowed: true,
      connections: 3,
      bytesIn: 9000,
      bytesOut: 700,
    }
    const refused = {
      host: 'evil.example',
      port: 443,
      allowed: false,
      connections: 1,
      bytesIn: 0,
      bytesOut: 0,
      reason: 'HOST_NOT_LISTED',
    }
    const { after } = given(...running, toolCalled, {
      type: 'tool.network',
      data: Object.assign({ partId: 'prt_tool' }, registry),
    }).when({ type: 'tool.network', data: Object.assign({ partId: 'prt_tool' }, refused) })
    expect(after.parts.find((p) => p.id === 'prt_tool')).toEqual(tool({ network: [registry, refused] }))
  })

  it('tool.completed: completed, with output, title, metadata and attachments', () => {
    const attachments = [{ type: 'image' as const, mediaType: 'image/png', data: 'iVBOR' }]
    const { after } = given(...running, toolCalled, {
      type: 'tool.progressed',
      data: { partId: 'prt_tool', metadata: { lines: 1 } },
    }).when({
      type: 'tool.completed',
      data: { partId: 'prt_tool', output: 'file contents', title: 'a.ts', metadata: { truncated: false }, attachments },
    })
    expect(after.parts.find((p) => p.id === 'prt_tool')).toEqual(
      tool({
        state: 'completed',
        output: 'file contents',
        title: 'a.ts',
        metadata: { lines: 1, truncated: false },
        attachments,
        endedAt: AT,
      }),
    )
  })

  it.each(['failed', 'invalid', 'denied', 'aborted', 'interrupted'] as const)(
    'tool.failed (%s): error state with its kind',
    (kind) => {
      const { after } = given(...running, toolCalled).when({
        type: 'tool.failed',
        data: { partId: 'prt_tool', error: { kind, message: `it ${kind}` } },
      })
      expect(after.parts.find((p) => p.id === 'prt_tool')).toEqual(
        tool({ state: 'error', error: { kind, message: `it ${kind}` }, endedAt: AT }),
      )
    },
  )

  it('tool.failed on a pending call (input still streaming)', () => {
    const { after } = given(...running, toolInput).when({
      type: 'tool.failed',
      data: { partId: 'prt_tool', error: { kind: 'interrupted', message: 'restart' } },
    })
    expect(after.parts.find((p) => p.id === 'prt_tool')).toMatchObject({
      state: 'error',
      rawInput: '',
      error: { kind: 'interrupted', message: 'restart' },
      endedAt: AT,
    })
  })
})

describe('permission events', () => {
  const requested: ChronicleEvent = {
    type: 'permission.requested',
    data: {
      requestId: 'per_1',
      partId: 'prt_tool',
      callId: 'call_1',
      permission: 'bash',
      patterns: ['git push'],
      metadata: { command: 'git push' },
    },
  }

  it('permission.requested: the session waits; the request is pending', () => {
    const { after } = given(...running, toolCalled).when(requested)
    expect(after.session).toMatchObject({
      status: 'waiting',
      pendingPermissions: [
        {
          requestId: 'per_1',
          seq: 7,
          partId: 'prt_tool',
          callId: 'call_1',
          permission: 'bash',
          patterns: ['git push'],
          metadata: { command: 'git push' },
        },
      ],
    })
  })

  it('permission.replied: closes the request; busy again when none is left (idle without a run)', () => {
    const second: ChronicleEvent = {
      type: 'permission.requested',
      data: { requestId: 'per_2', permission: 'edit', patterns: ['a.ts'] },
    }
    const one = given(...running, toolCalled, requested, second).when({
      type: 'permission.replied',
      data: { requestId: 'per_1', reply: 'once' },
    })
    expect(one.after.session).toMatchObject({ status: 'waiting', pendingPermissions: [{ requestId: 'per_2' }] })
    const all = given(...running, toolCalled, requested).when({
      type: 'permission.replied',
      data: { requestId: 'per_1', reply: 'reject', message: 'not now' },
    })
    expect(all.after.session).toMatchObject({ status: 'busy', pendingPermissions: [] })
    const noRun = given(created, {
      type: 'permission.requested',
      data: { requestId: 'per_1', permission: 'bash', patterns: ['*'] },
    }).when({ type: 'permission.replied', data: { requestId: 'per_1', reply: 'always' } })
    expect(noRun.after.session).toMatchObject({ status: 'idle', pendingPermissions: [] })
  })

  const asked: ChronicleEvent = {
    type: 'elicitation.requested',
    data: {
      elicitationId: 'eli_1',
      server: 'forms',
      message: 'Which name?',
      requestedSchema: { type: 'object', properties: { name: { type: 'string', default: 'Ada' } } },
      partId: 'prt_tool',
      callId: 'call_1',
    },
  }

  it('elicitation.requested: the session waits; the question is pending with its schema', () => {
    const { after } = given(...running, toolCalled).when(asked)
    expect(after.session).toMatchObject({
      status: 'waiting',
      pendingElicitations: [
        {
          elicitationId: 'eli_1',
          seq: 7,
          server: 'forms',
          message: 'Which name?',
          partId: 'prt_tool',
          callId: 'call_1',
          requestedSchema: { type: 'object', properties: { name: { type: 'string', default: 'Ada' } } },
        },
      ],
    })
  })

  it('elicitation.answered: closes the question; still waiting while a permission ask is open', () => {
    const answered: ChronicleEvent = {
      type: 'elicitation.answered',
      data: { elicitationId: 'eli_1', action: 'accept', content: { name: 'Ada' } },
    }
    expect(given(...running, toolCalled, asked).when(answered).after.session).toMatchObject({
      status: 'busy',
      pendingElicitations: [],
    })
    expect(given(...running, toolCalled, asked, requested).when(answered).after.session).toMatchObject({
      status: 'waiting',
      pendingElicitations: [],
      pendingPermissions: [{ requestId: 'per_1' }],
    })
    // and the other way round: a permission reply leaves the session waiting on the open question
    expect(
      given(...running, toolCalled, asked, requested).when({
        type: 'permission.replied',
        data: { requestId: 'per_1', reply: 'once' },
      }).after.session,
    ).toMatchObject({ status: 'waiting', pendingPermissions: [], pendingElicitations: [{ elicitationId: 'eli_1' }] })
  })

  it('permission.rule.added: a revocable session approval', () => {
    const { after } = given(created).when({
      type: 'permission.rule.added',
      data: { ruleId: 'rul_1', rule: { permission: 'bash', pattern: 'git status', action: 'allow' } },
    })
    expect(after.session.approvals).toEqual([
      { ruleId: 'rul_1', permission: 'bash', pattern: 'git status', action: 'allow' },
    ])
  })

  it('permission.rule.removed: the approval is gone', () => {
    const add = (ruleId: string): ChronicleEvent => ({
      type: 'permission.rule.added',
      data: { ruleId, rule: { permission: 'bash', pattern: ruleId, action: 'allow' } },
    })
    const { after } = given(created, add('rul_1'), add('rul_2')).when({
      type: 'permission.rule.removed',
      data: { ruleId: 'rul_1' },
    })
    expect(after.session.approvals).toEqual([
      { ruleId: 'rul_2', permission: 'bash', pattern: 'rul_2', action: 'allow' },
    ])
  })
})

describe('compaction events', () => {
  const requested: ChronicleEvent = {
    type: 'compaction.requested',
    data: { compactionId: 'cmp_1', reason: 'overflow' },
  }
  const completed: ChronicleEvent = {
    type: 'compaction.completed',
    data: {
      compactionId: 'cmp_1',
      summaryMessageId: 'msg_9',
      tailStartMessageId: 'msg_3',
      tokensBefore: 120000,
      tokensAfter: 9000,
    },
  }

  it('compaction.requested: requested, with the reason', () => {
    const { after } = given(created).when(requested)
    expect(after.session.compaction).toEqual({ compactionId: 'cmp_1', reason: 'overflow', status: 'requested' })
  })

  it('compaction.started: running', () => {
    const { after } = given(created, requested).when({ type: 'compaction.started', data: { compactionId: 'cmp_1' } })
    expect(after.session.compaction).toEqual({ compactionId: 'cmp_1', reason: 'overflow', status: 'running' })
  })

  it('compaction.completed: completed; the model context now starts at the summary (applied)', () => {
    const { after } = given(created, requested, { type: 'compaction.started', data: { compactionId: 'cmp_1' } }).when(
      completed,
    )
    expect(after.session.compaction).toEqual({
      compactionId: 'cmp_1',
      reason: 'overflow',
      status: 'completed',
      summaryMessageId: 'msg_9',
      tailStartMessageId: 'msg_3',
      applied: { summaryMessageId: 'msg_9', tailStartMessageId: 'msg_3' },
    })
  })

  it('compaction.failed: failed; the last applied compaction stays applied', () => {
    const { after } = given(created, requested, completed, {
      type: 'compaction.requested',
      data: { compactionId: 'cmp_2', reason: 'auto' },
    }).when({ type: 'compaction.failed', data: { compactionId: 'cmp_2', error: 'summary too long' } })
    expect(after.session.compaction).toEqual({
      compactionId: 'cmp_2',
      reason: 'auto',
      status: 'failed',
      applied: { summaryMessageId: 'msg_9', tailStartMessageId: 'msg_3' },
    })
  })
})

describe('context.pruned', () => {
  const completed: ChronicleEvent = {
    type: 'tool.completed',
    data: { partId: 'prt_tool', output: 'a long file', title: 'a.ts' },
  }

  it('marks the tool parts pruned, keeping their output, and names the newest message the pruning saw', () => {
    const { before, after } = given(...running, toolCalled, completed).when({
      type: 'context.pruned',
      data: { partIds: ['prt_tool'], tokens: 3 },
    })
    expect(after.parts.find((p) => p.id === 'prt_tool')).toEqual(
      Object.assign(
        {},
        before.parts.find((p) => p.id === 'prt_tool'),
        { pruned: true },
      ),
    )
    expect(after.session.pruned).toEqual({ throughMessageId: 'msg_2' })
  })

  it('naming a part that is not a tool call is a corrupt log', () => {
    const store = openStore(':memory:', { now: () => T0 })
    for (const e of [...running, toolCalled]) store.append('ses_1', [e], { meta })
    expect(() =>
      store.append('ses_1', [{ type: 'context.pruned', data: { partIds: ['prt_nothing'], tokens: 1 } }], { meta }),
    ).toThrow(/names unknown tool part prt_nothing/)
  })
})

describe('sub-agent and todo events', () => {
  const started: ChronicleEvent = {
    type: 'subtask.started',
    data: { partId: 'prt_tool', callId: 'call_1', childSessionId: 'ses_child' },
  }

  it('subtask.started: a subtask part beside the task call', () => {
    const { after } = given(...running, toolCalled).when(started)
    expect(after.parts.find((p) => p.type === 'subtask')).toEqual({
      id: 'prt_tool:subtask',
      sessionId: 'ses_1',
      messageId: 'msg_2',
      type: 'subtask',
      callId: 'call_1',
      childSessionId: 'ses_child',
    })
  })

  it("subtask.finished: the child's outcome", () => {
    const { after } = given(...running, toolCalled, started).when({
      type: 'subtask.finished',
      data: { partId: 'prt_tool', callId: 'call_1', childSessionId: 'ses_child', outcome: 'cancelled' },
    })
    expect(after.parts.find((p) => p.type === 'subtask')).toMatchObject({
      id: 'prt_tool:subtask',
      outcome: 'cancelled',
    })
  })

  it('todo.updated: replaces the todo list', () => {
    const items = [
      { content: 'write tests', status: 'in_progress' as const, priority: 'high' as const },
      { content: 'docs', status: 'pending' as const, priority: 'low' as const },
    ]
    const { after } = given(created, {
      type: 'todo.updated',
      data: { items: [{ content: 'old', status: 'completed', priority: 'medium' }] },
    }).when({ type: 'todo.updated', data: { items } })
    expect(after.session.todos).toEqual(items)
  })

  it("workspace.snapshotted: the session's latest tree; a tool's changes summed into its message's patch", () => {
    const tree = (c: string) => c.repeat(40)
    const baseline = {
      type: 'workspace.snapshotted' as const,
      data: { tree: tree('a'), reason: 'step' as const, changed: [] },
    }
    const byTool = (
      t: string,
      changed: { path: string; status: 'added' | 'modified' | 'deleted'; added?: number; removed?: number }[],
    ) => ({
      type: 'workspace.snapshotted' as const,
      data: { tree: tree(t), reason: 'tool' as const, messageId: 'msg_2', partId: 'prt_tool', changed },
    })
    const first = byTool('b', [{ path: 'a.ts', status: 'added', added: 3, removed: 0 }])
    const { after } = given(...running, toolCalled, baseline, first).when(
      byTool('c', [
        { path: 'a.ts', status: 'modified', added: 1, removed: 1 },
        { path: 'b.ts', status: 'deleted', added: 0, removed: 2 },
      ]),
    )
    expect(after.session.workspace).toEqual({ tree: tree('c'), seq: after.session.lastSeq })
    expect(after.parts.find((p) => p.type === 'patch')).toEqual({
      id: 'msg_2:patch',
      sessionId: 'ses_1',
      messageId: 'msg_2',
      type: 'patch',
      files: [
        { path: 'a.ts', status: 'added', added: 4, removed: 1 },
        { path: 'b.ts', status: 'deleted', added: 0, removed: 2 },
      ],
    })
    // changes found at a step's start were made outside the agent: no patch for them
    const outside = given(created, baseline).when({
      type: 'workspace.snapshotted',
      data: { tree: tree('d'), reason: 'step', changed: [{ path: 'x', status: 'added', added: 1, removed: 0 }] },
    })
    expect(outside.after.parts).toEqual([])
  })

  const tree = (c: string) => c.repeat(40)
  const restoreStarted = (kind: 'revert' | 'unrevert', messages: string[], id = 'rst_1') => ({
    type: 'workspace.restore.started' as const,
    data: { restoreId: id, kind, ...(kind === 'revert' && { to: 3 }), from: tree('e'), tree: tree('a'), messages },
  })
  const restoreCompleted = (id = 'rst_1') => ({
    type: 'workspace.restore.completed' as const,
    data: { restoreId: id, changed: [] },
  })

  it('workspace.restore.started: the restore in progress', () => {
    const { after } = given(...running).when(restoreStarted('revert', ['msg_2']))
    expect(after.session.restoring).toEqual(restoreStarted('revert', ['msg_2']).data)
  })

  it('workspace.restore.completed: a revert hides its messages and can be undone; an unrevert shows them again', () => {
    const { after } = given(...running, restoreStarted('revert', ['msg_2'])).when(restoreCompleted())
    expect(after.session.restoring).toBeUndefined()
    expect(after.session.revert).toEqual({
      restoreId: 'rst_1',
      to: 3,
      from: tree('e'),
      tree: tree('a'),
      messages: ['msg_2'],
    })
    expect(after.session.workspace).toEqual({ tree: tree('a'), seq: after.session.lastSeq })
    expect(after.messages.find((m) => m.id === 'msg_2')?.reverted).toBe('rst_1')

    const undone = given(...running, restoreStarted('revert', ['msg_2']), restoreCompleted(), {
      ...restoreStarted('unrevert', ['msg_2'], 'rst_2'),
      data: { ...restoreStarted('unrevert', ['msg_2'], 'rst_2').data, from: tree('a'), tree: tree('e') },
    }).when(restoreCompleted('rst_2'))
    expect(undone.after.session.revert).toBeUndefined()
    expect(undone.after.session.workspace?.tree).toBe(tree('e'))
    expect(undone.after.messages.find((m) => m.id === 'msg_2')?.reverted).toBeUndefined()
  })

  it('workspace.restore.failed: nothing but the end of the restore', () => {
    const { before, after } = given(...running, restoreStarted('revert', ['msg_2'])).when({
      type: 'workspace.restore.failed',
      data: { restoreId: 'rst_1', error: { code: 'WORKSPACE_MISSING', message: 'gone' } },
    })
    expect(after.session.restoring).toBeUndefined()
    expect(after.session.revert).toBeUndefined()
    expect(after.messages).toEqual(before.messages)
  })

  it('session.revert.finalized: the revert can no longer be undone; its messages stay hidden', () => {
    const { after } = given(...running, restoreStarted('revert', ['msg_2']), restoreCompleted()).when({
      type: 'session.revert.finalized',
      data: { restoreId: 'rst_1' },
    })
    expect(after.session.revert).toBeUndefined()
    expect(after.messages.find((m) => m.id === 'msg_2')?.reverted).toBe('rst_1')
  })

  it("workspace.materialize.started / workspace.materialized / .failed: a fork's directory being written", () => {
    const started = { type: 'workspace.materialize.started' as const, data: { tree: tree('a'), directory: '/forks/x' } }
    const writing = given(created).when(started)
    expect(writing.after.session.materializing).toEqual(started.data)
    const done = given(created, started).when({
      type: 'workspace.materialized',
      data: { tree: tree('a'), files: 3, bytes: 10 },
    })
    expect(done.after.session.materializing).toBeUndefined()
    expect(done.after.session.workspace).toEqual({ tree: tree('a'), seq: done.after.session.lastSeq })
    const failed = given(created, started).when({
      type: 'workspace.materialize.failed',
      data: { error: { code: 'INTERNAL', message: 'disk full' } },
    })
    expect(failed.after.session.materializing).toBeUndefined()
    expect(failed.after.session.workspace).toBeUndefined()
  })
})

describe('every event', () => {
  it('bumps the session version and lastSeq and stamps updatedAt', () => {
    const { before, after } = given(...running).when({
      type: 'text.started',
      data: { messageId: 'msg_2', partId: 'prt_v' },
    })
    expect([after.session.version, after.session.lastSeq, after.session.updatedAt]).toEqual([
      before.session.version + 1,
      before.session.lastSeq + 1,
      AT,
    ])
  })

  it('token.created, token.revoked: the system stream sys_tokens holds them; no session does, and no read model folds them', () => {
    const created: ChronicleEvent = {
      type: 'token.created',
      data: { tokenId: 'tok_1', name: 'alice', role: 'audit', salt: 's', hash: 'h' },
    }
    const revoked: ChronicleEvent = { type: 'token.revoked', data: { tokenId: 'tok_1' } }
    const store = openStore(':memory:')
    store.append('ses_1', [{ type: 'session.created', data: { directory: '/w', agent: 'build', model: null } }], {
      meta,
    })
    for (const e of [created, revoked]) {
      covered.add(e.type)
      expect(() => store.append('ses_1', [e], { meta })).toThrow(expect.objectContaining({ code: 'INVALID_EVENT' }))
      store.append('sys_tokens', [e], { meta })
    }
    expect(store.readSession('sys_tokens').map((e) => e.type)).toEqual(['token.created', 'token.revoked'])
    expect(getSession(store, 'sys_tokens')).toBeUndefined()
    expect(() => store.append('sys_tokens', [{ type: 'session.renamed', data: { title: 'x' } }], { meta })).toThrow(
      expect.objectContaining({ code: 'INVALID_EVENT' }),
    )
    store.close()
  })

  it('share.created, share.revoked: the system stream sys_tokens holds them; no session does, and no read model folds them', () => {
    const created: ChronicleEvent = {
      type: 'share.created',
      data: {
        shareId: 'shr_1',
        session: 'ses_1',
        name: 'for bob',
        role: 'audit',
        expiresAt: '2026-12-11T00:00:00.000Z',
        hash: 'a'.repeat(64),
      },
    }
    const revoked: ChronicleEvent = { type: 'share.revoked', data: { shareId: 'shr_1' } }
    const store = openStore(':memory:')
    store.append('ses_1', [{ type: 'session.created', data: { directory: '/w', agent: 'build', model: null } }], {
      meta,
    })
    const before = getSession(store, 'ses_1')
    for (const e of [created, revoked]) {
      covered.add(e.type)
      expect(() => store.append('ses_1', [e], { meta })).toThrow(expect.objectContaining({ code: 'INVALID_EVENT' }))
      store.append('sys_tokens', [e], { meta })
    }
    expect(store.readSession('sys_tokens').map((e) => e.type)).toEqual(['share.created', 'share.revoked'])
    expect(getSession(store, 'sys_tokens')).toBeUndefined()
    expect(getSession(store, 'ses_1')).toEqual(before) // the shared session's read model is untouched
    store.close()
  })

  it('mcp.server.*: the system stream sys_mcp holds them; no session does, and no session read model folds them', () => {
    const digest = 'a'.repeat(64)
    const events: ChronicleEvent[] = [
      { type: 'mcp.server.connecting', data: { server: 'files', attempt: 1 } },
      {
        type: 'mcp.server.ready',
        data: { server: 'files', transport: 'stdio', tools: ['files_read'], toolCount: 1, toolsDigest: digest },
      },
      { type: 'mcp.server.failed', data: { server: 'files', error: 'exited', retryInMs: 1000 } },
      { type: 'mcp.server.auth_required', data: { server: 'files' } },
      { type: 'mcp.server.disconnected', data: { server: 'files' } },
    ]
    const store = openStore(':memory:')
    store.append('ses_1', [{ type: 'session.created', data: { directory: '/w', agent: 'build', model: null } }], {
      meta,
    })
    for (const e of events) {
      covered.add(e.type)
      expect(() => store.append('ses_1', [e], { meta })).toThrow(expect.objectContaining({ code: 'INVALID_EVENT' }))
      store.append('sys_mcp', [e], { meta })
    }
    expect(store.readSession('sys_mcp').map((e) => e.type)).toEqual(events.map((e) => e.type))
    expect(getSession(store, 'sys_mcp')).toBeUndefined()
    store.close()
  })

  it('each type in the catalogue has a spec above (this runs last)', () => {
    expect(EVENT_TYPES.filter((t) => !covered.has(t))).toEqual([])
  })
})
