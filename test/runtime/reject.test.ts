import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { execute } from '../../src/commands/execute.js'
import { decidePermission } from '../../src/commands/permission.js'
import { loadConfig } from '../../src/config.js'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import { getParts, getSession } from '../../src/projections/queries/read-model.js'
import { verify } from '../../src/projections/upkeep/verify.js'
import { NOT_RUN_AFTER_REJECT } from '../../src/runtime/loop/tool-exec.js'
import { createScriptedModel, type ScriptStep } from '../../src/runtime/model/scripted-model.js'
import { DEFAULT_REJECT_MESSAGE } from '../../src/runtime/permissions/gate.js'
import { INTERRUPTED_MESSAGE, recoverSessions } from '../../src/runtime/recovery/recovery.js'
import { createLookupTool } from '../../src/tools/lookup.js'
import { defineTool, type Tool } from '../../src/tools/tool.js'
import { dataOf, subagentHarness, task, until } from '../subagents/helpers.js'
import { autoReply, collapse, harness, text, type Harness } from './helpers.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/**
 * A person's reject stops the run (docs/TOOLS.md "A reject stops the run"): the
 * rejected call fails `denied`, the step's calls not yet started are settled
 * without running, and the run ends `rejected` — no further model step. A reject
 * with a message, a deny rule, or `continueOnReject` keep the run going. The
 * decision is read from the log, so a restart mid-way ends the run too.
 */

/** `guarded`: asks the `guarded` permission for its target, then does nothing else. */
const guarded = defineTool({
  id: 'guarded',
  description: 'Touches a target, after asking.',
  parameters: z.object({ target: z.string() }),
  async execute(args, ctx) {
    await ctx.ask({ permission: 'guarded', patterns: [args.target] })
    return { output: `touched ${args.target}` }
  },
})
/** `pair`: asks for two targets at once, so two requests are pending together. */
const pair = defineTool({
  id: 'pair',
  description: 'Touches two targets, after asking for both.',
  parameters: z.object({ first: z.string(), second: z.string() }),
  async execute(args, ctx) {
    await Promise.all([
      ctx.ask({ permission: 'guarded', patterns: [args.first] }),
      ctx.ask({ permission: 'guarded', patterns: [args.second] }),
    ])
    return { output: 'touched both' }
  },
})
const tools = (): Tool[] => [guarded, pair, createLookupTool({ resolve: (q) => `result for ${q}` })]

/** build asks for `guarded`, and denies it for secret targets outright. */
const agents = [
  {
    name: 'build',
    rules: [
      { permission: 'guarded', pattern: '*', action: 'ask' as const },
      { permission: 'guarded', pattern: 'secret*', action: 'deny' as const },
    ],
  },
]

const STEPS: ScriptStep[] = [
  { when: { afterToolResult: false }, toolCalls: [{ id: 'c1', name: 'guarded', input: { target: 'a' } }] },
  { when: { afterToolResult: true }, text: 'carried on' },
]

let h: Harness
const opened: { close(): Promise<void> }[] = []
afterEach(async () => {
  for (const x of opened.splice(0)) await x.close()
})

function setup(steps: ScriptStep[] = STEPS, opts: { continueOnReject?: boolean } = {}) {
  const model = createScriptedModel({ steps })
  h = harness({ model, tools: tools(), agents, ...opts })
  opened.push(h)
  return { model, id: h.session() }
}

/** Answers every request as a person does over the API (meta names the request and who answered). */
const replyAll = (x: Harness, reply: 'once' | 'reject', message?: string) =>
  autoReply(x, reply, message, { id: 'owner', name: 'owner' })

const of = (x: Harness, id: string, type: string) =>
  x
    .events(id)
    .filter((e) => e.type === type)
    .map((e) => e.data as Record<string, unknown>)

const RUN_HEAD = [
  'session.created',
  'input.accepted',
  'run.started',
  'input.delivered',
  'message.created',
  'step.started',
  'tool.input.started',
  'tool.input.delta',
  'step.finished',
  'message.completed',
]

describe('a person rejects a permission request', () => {
  it('a reject ends the run once the step settles: no further model step', async () => {
    const { model, id } = setup()
    const asked = replyAll(h, 'reject')
    await h.runtime.submit(id, { parts: text('touch a') })
    await h.runtime.idle(id)

    expect(asked).toEqual(['guarded'])
    expect(collapse(h.types(id))).toEqual([
      ...RUN_HEAD,
      'tool.called',
      'permission.requested',
      'permission.replied',
      'tool.failed',
      'run.finished',
    ])
    expect(
      h
        .events(id)
        .slice(-3)
        .map((e) => [e.type, e.data, e.meta.actor]),
    ).toEqual([
      ['permission.replied', { requestId: expect.any(String), reply: 'reject' }, 'user'],
      [
        'tool.failed',
        { partId: expect.any(String), error: { kind: 'denied', message: DEFAULT_REJECT_MESSAGE } },
        'tool',
      ],
      ['run.finished', { runId: expect.any(String), outcome: 'rejected' }, 'runtime'],
    ])
    expect(model.calls).toHaveLength(1)
    expect(getSession(h.store, id)).toMatchObject({ status: 'idle', run: null, lastRun: { outcome: 'rejected' } })
    // the rejected call's part records the rejection, as before
    expect(getParts(h.store, id).find((p) => p.type === 'tool')).toMatchObject({
      state: 'error',
      input: { target: 'a' },
      error: { kind: 'denied' },
      permission: { reply: 'reject', by: { id: 'owner', name: 'owner' } },
    })
    expect(verify(h.store).differences).toEqual([])
  })

  it('the next input runs as usual, and the model sees the rejected call', async () => {
    const { model, id } = setup([{ when: { turn: 1 }, text: 'ok, not touching it' }, ...STEPS])
    replyAll(h, 'reject')
    await h.runtime.submit(id, { parts: text('touch a') })
    await h.runtime.idle(id)
    await h.runtime.submit(id, { parts: text('never mind') })
    await h.runtime.idle(id)
    expect(of(h, id, 'run.finished').map((d) => d.outcome)).toEqual(['rejected', 'idle'])
    expect(JSON.stringify(model.calls[1]?.prompt)).toContain(DEFAULT_REJECT_MESSAGE)
  })

  it('with permission.continueOnReject the run goes on as before', async () => {
    const { model, id } = setup(STEPS, { continueOnReject: true })
    replyAll(h, 'reject')
    await h.runtime.submit(id, { parts: text('touch a') })
    await h.runtime.idle(id)
    expect(collapse(h.types(id)).slice(RUN_HEAD.length)).toEqual([
      'tool.called',
      'permission.requested',
      'permission.replied',
      'tool.failed',
      'message.created',
      'step.started',
      'text.started',
      'text.delta',
      'text.ended',
      'step.finished',
      'message.completed',
      'run.finished',
    ])
    expect(of(h, id, 'run.finished')[0]).toMatchObject({ outcome: 'idle' })
    expect(model.calls).toHaveLength(2)
  })

  it('a reject with a message is guidance: the model reads it and the run goes on', async () => {
    const { model, id } = setup()
    replyAll(h, 'reject', 'use lookup instead')
    await h.runtime.submit(id, { parts: text('touch a') })
    await h.runtime.idle(id)
    expect(of(h, id, 'tool.failed').map((d) => d.error)).toEqual([{ kind: 'denied', message: 'use lookup instead' }])
    expect(of(h, id, 'run.finished')[0]).toMatchObject({ outcome: 'idle' })
    expect(model.calls).toHaveLength(2)
    expect(JSON.stringify(model.calls[1]?.prompt)).toContain('use lookup instead')
  })

  it('a deny rule is not a person rejecting: the call fails denied and the run goes on', async () => {
    const { model, id } = setup([
      { when: { afterToolResult: false }, toolCalls: [{ id: 'c1', name: 'guarded', input: { target: 'secret.txt' } }] },
      { when: { afterToolResult: true }, text: 'carried on' },
    ])
    const asked = replyAll(h, 'reject')
    await h.runtime.submit(id, { parts: text('touch the secret') })
    await h.runtime.idle(id)
    expect(asked).toEqual([])
    expect(of(h, id, 'tool.failed').map((d) => (d.error as { kind: string }).kind)).toEqual(['denied'])
    expect(of(h, id, 'run.finished')[0]).toMatchObject({ outcome: 'idle' })
    expect(model.calls).toHaveLength(2)
  })

  it('several calls in one step: those before finish normally, the rejected one fails, the rest are settled unrun', async () => {
    const { model, id } = setup([
      {
        when: { afterToolResult: false },
        toolCalls: [
          { id: 'c1', name: 'lookup', input: { query: 'x' } },
          { id: 'c2', name: 'guarded', input: { target: 'a' } },
          { id: 'c3', name: 'guarded', input: { target: 'b' } },
        ],
      },
      { when: { afterToolResult: true }, text: 'carried on' },
    ])
    const asked = replyAll(h, 'reject')
    await h.runtime.submit(id, { parts: text('look up x, then touch a and b') })
    await h.runtime.idle(id)

    expect(asked).toEqual(['guarded']) // the third call is never asked: the user already said no
    const types = h.types(id)
    expect(types.slice(types.indexOf('message.completed'))).toEqual([
      'message.completed',
      'tool.called',
      'tool.completed',
      'tool.called',
      'permission.requested',
      'permission.replied',
      'tool.failed',
      'tool.failed',
      'run.finished',
    ])
    const parts = getParts(h.store, id).filter((p) => p.type === 'tool')
    expect(parts.map((p) => (p.type === 'tool' ? [p.callId, p.state, p.error?.kind, p.error?.message] : []))).toEqual([
      ['c1', 'completed', undefined, undefined],
      ['c2', 'error', 'denied', DEFAULT_REJECT_MESSAGE],
      ['c3', 'error', 'denied', NOT_RUN_AFTER_REJECT],
    ])
    expect(of(h, id, 'run.finished')).toEqual([{ runId: expect.any(String), outcome: 'rejected' }])
    expect(model.calls).toHaveLength(1)
  })

  it('two requests pending at once: rejecting one closes the other, and the run ends', async () => {
    const { model, id } = setup([
      { when: { afterToolResult: false }, toolCalls: [{ id: 'c1', name: 'pair', input: { first: 'a', second: 'b' } }] },
      { when: { afterToolResult: true }, text: 'carried on' },
    ])
    await h.runtime.submit(id, { parts: text('touch a and b') })
    await until(() => (getSession(h.store, id)?.pendingPermissions.length ?? 0) === 2)
    const [first, second] = getSession(h.store, id)?.pendingPermissions ?? []
    await execute(
      sqlitePorts(h.store),
      id,
      (s) => decidePermission({ type: 'reply', requestId: first!.requestId, reply: 'reject' }, s, id, h.ids),
      { meta: { actor: 'user', request: first!.requestId }, durability: 'full' },
    )
    await h.runtime.idle(id)
    const types = h.types(id)
    expect(types.slice(types.indexOf('tool.called'))).toEqual([
      'tool.called',
      'permission.requested',
      'permission.requested',
      'permission.replied',
      'permission.replied',
      'tool.failed',
      'run.finished',
    ])
    expect(of(h, id, 'permission.replied')).toEqual([
      { requestId: first!.requestId, reply: 'reject' },
      { requestId: second!.requestId, reply: 'reject' }, // the reject cascade settles the other request
    ])
    expect(of(h, id, 'run.finished')).toEqual([{ runId: expect.any(String), outcome: 'rejected' }])
    expect(getSession(h.store, id)?.pendingPermissions).toEqual([])
    expect(model.calls).toHaveLength(1)
  })

  it('doom loop: a reject at the doom-loop prompt ends the run instead of asking again', async () => {
    const same = { id: 'c', name: 'lookup', input: { query: 'same' } }
    const { model, id } = setup([{ toolCalls: [same], when: {}, times: 10 }])
    const asked = replyAll(h, 'reject')
    await h.runtime.submit(id, { parts: text('go') })
    await h.runtime.idle(id)
    expect(asked).toEqual(['doom_loop'])
    expect(of(h, id, 'tool.completed')).toHaveLength(2)
    expect(collapse(h.types(id)).slice(-5)).toEqual([
      'tool.called',
      'permission.requested',
      'permission.replied',
      'tool.failed',
      'run.finished',
    ])
    expect(of(h, id, 'run.finished')).toEqual([{ runId: expect.any(String), outcome: 'rejected' }])
    expect(model.calls).toHaveLength(3)
  })
})

describe('the doom-loop request carries the input as a value', () => {
  it('the request metadata and the rejected call part hold the input object, not a JSON string of it', async () => {
    const same = { id: 'c', name: 'lookup', input: { query: 'same' } }
    const { id } = setup([{ toolCalls: [same], when: {}, times: 3 }, { text: 'stopped' }], { continueOnReject: true })
    replyAll(h, 'reject')
    await h.runtime.submit(id, { parts: text('go') })
    await h.runtime.idle(id)
    const [requested] = h.events(id).filter((e) => e.type === 'permission.requested')
    const part = getParts(h.store, id).filter((p) => p.type === 'tool')[2]
    expect(requested?.data).toEqual({
      requestId: expect.any(String),
      partId: part?.id,
      callId: 'c',
      permission: 'doom_loop',
      patterns: ['lookup'],
      metadata: { tool: 'lookup', input: { query: 'same' }, always: ['lookup'] },
    })
    // the call is recorded as called (with its input) before it asks, like any call that asks
    const called = h.events(id).filter((e) => e.type === 'tool.called')[2]
    expect(called?.seq).toBeLessThan(requested?.seq ?? 0)
    expect(part).toMatchObject({
      tool: 'lookup',
      state: 'error',
      input: { query: 'same' },
      error: { kind: 'denied' },
      permission: { reply: 'reject' },
    })
  })
})

describe('a restart does not undo the stop', () => {
  /** The log of a run that made one guarded call and asked for it, as the runtime writes it. */
  function midRun(): ChronicleEvent[] {
    return [
      {
        type: 'input.accepted',
        data: {
          inputId: 'in_1',
          parts: [{ type: 'text', text: 'touch a' }],
          delivery: 'queue',
          noReply: false,
          digest: 'd1',
        },
      },
      { type: 'run.started', data: { runId: 'run_A', reason: 'input' } },
      { type: 'input.delivered', data: { inputId: 'in_1', messageId: 'msg_000000U', partIds: ['prt_000000i'] } },
      {
        type: 'message.created',
        data: { messageId: 'msg_000000A', role: 'assistant', parentId: 'msg_000000U', agent: 'build', model: 'm' },
      },
      {
        type: 'tool.input.started',
        data: { messageId: 'msg_000000A', partId: 'prt_000000b', callId: 'call_1', tool: 'guarded' },
      },
      { type: 'tool.input.delta', data: { partId: 'prt_000000b', delta: '{"target":"a"}' } },
      {
        type: 'step.finished',
        data: { messageId: 'msg_000000A', partId: 'prt_000000t', finishReason: 'tool-calls', usage: {} },
      },
      { type: 'message.completed', data: { messageId: 'msg_000000A', finish: 'tool-calls', usage: {} } },
      {
        type: 'tool.called',
        data: {
          messageId: 'msg_000000A',
          partId: 'prt_000000b',
          callId: 'call_1',
          tool: 'guarded',
          input: { target: 'a' },
        },
      },
      {
        type: 'permission.requested',
        data: { requestId: 'per_1', partId: 'prt_000000b', callId: 'call_1', permission: 'guarded', patterns: ['a'] },
      },
    ]
  }
  const crashed = (x: Harness, id: string, events: ChronicleEvent[], actor: 'runtime' | 'user' = 'runtime') =>
    x.store.append(id, events, { meta: { actor, run: 'run_A' } })
  const reject = async (x: Harness, id: string) =>
    execute(
      sqlitePorts(x.store),
      id,
      (s) => decidePermission({ type: 'reply', requestId: 'per_1', reply: 'reject' }, s, id, x.ids),
      {
        meta: { actor: 'user', request: 'per_1' },
        durability: 'full',
      },
    )

  it('rejected and failed before the crash: the resumed run ends rejected without a model step', async () => {
    const { model, id } = setup()
    crashed(h, id, midRun())
    await reject(h, id)
    crashed(h, id, [
      {
        type: 'tool.failed',
        data: { partId: 'prt_000000b', error: { kind: 'denied', message: DEFAULT_REJECT_MESSAGE } },
      },
    ])
    const head = h.store.head()
    await recoverSessions(sqlitePorts(h.store))
    await h.runtime.resume(id, 'run_A')
    await h.runtime.idle(id)
    expect(
      h
        .events(id)
        .filter((e) => e.seq > head)
        .map((e) => [e.type, e.data]),
    ).toEqual([
      ['run.resumed', { runId: 'run_A', attempt: 1 }],
      ['run.finished', { runId: 'run_A', outcome: 'rejected' }],
    ])
    expect(model.calls).toHaveLength(0)
  })

  it('rejected just before the crash, the call not yet failed: recovery settles it and the run ends rejected', async () => {
    const { model, id } = setup()
    crashed(h, id, midRun())
    await reject(h, id)
    const head = h.store.head()
    await recoverSessions(sqlitePorts(h.store))
    await h.runtime.resume(id, 'run_A')
    await h.runtime.idle(id)
    expect(
      h
        .events(id)
        .filter((e) => e.seq > head)
        .map((e) => [e.type, e.data]),
    ).toEqual([
      ['tool.failed', { partId: 'prt_000000b', error: { kind: 'interrupted', message: INTERRUPTED_MESSAGE } }],
      ['run.resumed', { runId: 'run_A', attempt: 1 }],
      ['run.finished', { runId: 'run_A', outcome: 'rejected' }],
    ])
    expect(model.calls).toHaveLength(0)
  })

  it('parked at the crash, rejected after the restart: the call fails denied and the run ends rejected', async () => {
    const { model, id } = setup()
    crashed(h, id, midRun())
    await recoverSessions(sqlitePorts(h.store))
    await h.runtime.resume(id, 'run_A')
    await new Promise((r) => setTimeout(r, 20))
    const head = h.store.head()
    await reject(h, id)
    await h.runtime.idle(id)
    expect(
      h
        .events(id)
        .filter((e) => e.seq > head)
        .map((e) => [e.type, e.data]),
    ).toEqual([
      ['permission.replied', { requestId: 'per_1', reply: 'reject' }],
      ['tool.failed', { partId: 'prt_000000b', error: { kind: 'denied', message: DEFAULT_REJECT_MESSAGE } }],
      ['run.finished', { runId: 'run_A', outcome: 'rejected' }],
    ])
    expect(model.calls).toHaveLength(0)
  })

  it('a reject given by the runtime (a cancel closing the request) is not a person rejecting', async () => {
    const { model, id } = setup([{ text: 'carried on' }])
    crashed(h, id, midRun())
    crashed(
      h,
      id,
      [
        { type: 'permission.replied', data: { requestId: 'per_1', reply: 'reject' } },
        {
          type: 'tool.failed',
          data: { partId: 'prt_000000b', error: { kind: 'denied', message: DEFAULT_REJECT_MESSAGE } },
        },
      ],
      'runtime',
    )
    await recoverSessions(sqlitePorts(h.store))
    await h.runtime.resume(id, 'run_A')
    await h.runtime.idle(id)
    expect(of(h, id, 'run.finished')).toEqual([{ runId: 'run_A', outcome: 'idle' }])
    expect(model.calls).toHaveLength(1)
  })
})

describe('inside a sub-agent', () => {
  it("a reject of the child's call stops the child's run; the task call returns and the parent goes on", async () => {
    const PARENT = 'delegate please'
    const x = subagentHarness([
      { when: { userContains: PARENT, afterToolResult: false }, ...task('c_task', 'CHILD: touch the file') },
      {
        when: { userContains: 'CHILD:', afterToolResult: false },
        toolCalls: [{ id: 'c_bash', name: 'bash', input: { command: 'touch pwned' } }],
      },
      { when: { userContains: 'CHILD:', afterToolResult: true }, text: 'child carried on' },
      { when: { userContains: PARENT, afterToolResult: true }, text: 'parent done' },
    ])
    opened.push(x)
    const parent = x.session()
    await x.runtime.submit(parent, { parts: text(PARENT) })
    await until(() => (getSession(x.store, parent)?.pendingPermissions.length ?? 0) > 0)
    const [request] = getSession(x.store, parent)?.pendingPermissions ?? []
    await execute(
      sqlitePorts(x.store),
      parent,
      (s) => decidePermission({ type: 'reply', requestId: request!.requestId, reply: 'reject' }, s, parent, x.ids),
      { meta: { actor: 'user', request: request!.requestId }, durability: 'full' },
    )
    await x.runtime.idle(parent)
    const child = x.children(parent)[0] as string
    expect(collapse(x.events(child).map((e) => e.type)).slice(-4)).toEqual([
      'message.completed',
      'tool.called',
      'tool.failed',
      'run.finished',
    ])
    expect(dataOf(x.events(child), 'run.finished')).toEqual([{ runId: expect.any(String), outcome: 'rejected' }])
    expect(dataOf(x.events(parent), 'subtask.finished')).toMatchObject([{ outcome: 'rejected' }])
    expect(dataOf(x.events(parent), 'run.finished')).toEqual([{ runId: expect.any(String), outcome: 'idle' }])
  })
})

describe('the setting', () => {
  const configWith = (permission: unknown) => {
    const dir = mkdtempSync(join(tmpdir(), 'chronicle-reject-config-'))
    const file = join(dir, 'chronicle.json')
    writeFileSync(file, JSON.stringify({ permission }))
    return () => loadConfig({ env: { CHRONICLE_DATA_DIR: join(dir, 'data') }, configPath: file })
  }
  const rule = { permission: 'bash', pattern: 'git status*', action: 'allow' }

  it('`permission` is the list of rules, or {rules, continueOnReject}; off by default', () => {
    expect(configWith([rule])()).toMatchObject({ rules: [rule], continueOnReject: false })
    expect(configWith({ rules: [rule], continueOnReject: true })()).toMatchObject({
      rules: [rule],
      continueOnReject: true,
    })
    expect(configWith({ continueOnReject: true })()).toMatchObject({ rules: [], continueOnReject: true })
    expect(configWith({ continueOnReject: 'yes' })).toThrow(/permission/)
  })
})
