import { afterEach, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { execute } from '../../src/commands/execute.js'
import { fork } from '../../src/commands/fork.js'
import { decidePermission } from '../../src/commands/permission.js'
import type { StoredEvent } from '../../src/events/envelope.js'
import { cancelRun } from '../../src/commands/run.js'
import { ATIF_VERSION, atifOf } from '../../src/projections/transfer/atif.js'
import { subagentHarness, task, until, type SubagentHarness } from '../subagents/helpers.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'
import { recoverSessions } from '../../src/runtime/recovery/recovery.js'

/**
 * The ATIF export (docs/API.md "ATIF export") of a session the real runtime
 * wrote with the scripted model: text, reasoning, tool calls completed,
 * failed (invalid arguments, a tool error), denied by a person's reject and
 * aborted by a cancel, a sub-agent, and a compaction. The document is checked
 * against the ATIF schema, and its counts against the log.
 *
 * The schema below transcribes harbor's ATIF models, version 1.6
 * (`harbor/models/trajectories/*.py`, read at the vendored copy in
 * refreshdotdev/harbor-trajectories, commit 22dafa68f53b, `vendor/harbor/models/trajectories`,
 * and RFC 0001 "docs/rfcs/0001-trajectory-format.md"): every model forbids
 * extra fields; step ids run from 1; an observation's `source_call_id` names
 * a tool call of its own step; model_name, reasoning_effort,
 * reasoning_content, tool_calls and metrics belong to agent steps only;
 * timestamps are ISO 8601. Harbor publishes no JSON Schema file, so none is vendored.
 */

const ContentPart = z.strictObject({
  type: z.enum(['text', 'image']),
  text: z.string().optional(),
  source: z
    .strictObject({ media_type: z.enum(['image/jpeg', 'image/png', 'image/gif', 'image/webp']), path: z.string() })
    .optional(),
})
const Json = z.record(z.string(), z.unknown())
const Metrics = z.strictObject({
  prompt_tokens: z.number().int().optional(),
  completion_tokens: z.number().int().optional(),
  cached_tokens: z.number().int().optional(),
  cost_usd: z.number().optional(),
  prompt_token_ids: z.array(z.number().int()).optional(),
  completion_token_ids: z.array(z.number().int()).optional(),
  logprobs: z.array(z.number()).optional(),
  extra: Json.optional(),
})
const ToolCall = z.strictObject({ tool_call_id: z.string(), function_name: z.string(), arguments: Json })
const ObservationResult = z.strictObject({
  source_call_id: z.string().optional(),
  content: z.union([z.string(), z.array(ContentPart)]).optional(),
  subagent_trajectory_ref: z
    .array(z.strictObject({ session_id: z.string(), trajectory_path: z.string().optional(), extra: Json.optional() }))
    .optional(),
})
const Step = z
  .strictObject({
    step_id: z.number().int().min(1),
    timestamp: z.iso.datetime({ offset: true }).optional(),
    source: z.enum(['system', 'user', 'agent']),
    model_name: z.string().optional(),
    reasoning_effort: z.union([z.string(), z.number()]).optional(),
    message: z.union([z.string(), z.array(ContentPart)]),
    reasoning_content: z.string().optional(),
    tool_calls: z.array(ToolCall).optional(),
    observation: z.strictObject({ results: z.array(ObservationResult) }).optional(),
    metrics: Metrics.optional(),
    is_copied_context: z.boolean().optional(),
    extra: Json.optional(),
  })
  .refine(
    (s) =>
      s.source === 'agent' ||
      [s.model_name, s.reasoning_effort, s.reasoning_content, s.tool_calls, s.metrics].every((f) => f === undefined),
    'model_name, reasoning_effort, reasoning_content, tool_calls and metrics are for agent steps only',
  )
  .refine(
    (s) =>
      (s.observation?.results ?? []).every(
        (r) => r.source_call_id === undefined || (s.tool_calls ?? []).some((c) => c.tool_call_id === r.source_call_id),
      ),
    "an observation result's source_call_id names a tool call of its step",
  )
const Trajectory = z
  .strictObject({
    schema_version: z.enum(['ATIF-v1.0', 'ATIF-v1.1', 'ATIF-v1.2', 'ATIF-v1.3', 'ATIF-v1.4', 'ATIF-v1.5', 'ATIF-v1.6']),
    session_id: z.string(),
    agent: z.strictObject({
      name: z.string(),
      version: z.string(),
      model_name: z.string().optional(),
      tool_definitions: z.array(Json).optional(),
      extra: Json.optional(),
    }),
    steps: z.array(Step).min(1),
    notes: z.string().optional(),
    final_metrics: z
      .strictObject({
        total_prompt_tokens: z.number().int().optional(),
        total_completion_tokens: z.number().int().optional(),
        total_cached_tokens: z.number().int().optional(),
        total_cost_usd: z.number().optional(),
        total_steps: z.number().int().min(0).optional(),
        extra: Json.optional(),
      })
      .optional(),
    continued_trajectory_ref: z.string().optional(),
    extra: Json.optional(),
  })
  .refine((t) => t.steps.every((s, i) => s.step_id === i + 1), 'step ids run from 1, one by one')

const P = 'delegate please'
const LOOP = 'loop please'
const WAIT = 'wait please'
const WRAP = 'wrap up please'

let h: SubagentHarness
afterEach(() => h.close())

/** Rejects every permission request, as a person would through the decider. */
function rejectEveryRequest(): void {
  h.store.onCommit((events) => {
    for (const e of events) {
      if (e.type !== 'permission.requested') continue
      const { requestId } = e.data
      setImmediate(() =>
        execute(
          sqlitePorts(h.store),
          e.sessionId,
          (s) => decidePermission({ type: 'reply', requestId, reply: 'reject' }, s, e.sessionId, h.ids),
          { meta: { actor: 'user', by: { id: 'owner', name: 'owner' } }, durability: 'full' },
        ),
      )
    }
  })
}

/** A session with everything the export maps: the real runtime, the scripted model. */
async function richSession(): Promise<string> {
  h = subagentHarness(
    [
      {
        when: { userContains: P, afterToolResult: false },
        times: 1,
        reasoning: 'I should look it up first.',
        text: 'Looking.',
        toolCalls: [
          { id: 'c_ok', name: 'lookup', input: { query: 'x' } },
          { id: 'c_invalid', name: 'lookup', rawInput: '{not json' },
          { id: 'c_failed', name: 'read', input: { filePath: 'missing.txt' } },
        ],
        usage: { input: 100, output: 20 },
      },
      {
        when: { userContains: P, afterToolResult: true },
        times: 1,
        ...task('c_task', 'CHILD: answer'),
        usage: { input: 150, output: 10 },
      },
      { when: { userContains: 'CHILD:' }, times: 1, text: 'child answer', usage: { input: 30, output: 3 } },
      {
        when: { userContains: P, afterToolResult: true },
        times: 1,
        text: 'All done.',
        usage: { input: 200, output: 5 },
      },
      // the same call three times in a row asks doom_loop; the person rejects it
      {
        when: { userContains: LOOP },
        times: 3,
        toolCalls: [{ id: 'c_loop', name: 'lookup', input: { query: 'y' } }],
        usage: { input: 10, output: 1 },
      },
      {
        when: { userContains: WAIT },
        times: 1,
        toolCalls: [{ id: 'c_slow', name: 'slow', input: { ms: 60_000 } }],
        usage: { input: 12, output: 2 },
      },
      { when: { userContains: WRAP }, times: 1, text: 'Wrapped up.', usage: { input: 14, output: 3 } },
      {
        when: { userContains: '<transcript>' },
        times: 1,
        text: 'SUMMARY: looked up x, delegated, looped, waited.',
        usage: { input: 400, output: 12 },
      },
    ],
    { compaction: {} },
  )
  rejectEveryRequest()
  const id = h.session()
  await h.runtime.submit(id, { parts: [{ type: 'text', text: P }] })
  await h.runtime.idle(id)
  await h.runtime.submit(id, { parts: [{ type: 'text', text: WAIT }] })
  await until(() => h.events(id).some((e) => e.type === 'tool.called' && e.data.tool === 'slow'))
  await cancelRun(sqlitePorts(h.store), id, { actor: 'user' })
  await h.runtime.idle(id)
  for (const prompt of [LOOP, WRAP]) {
    await h.runtime.submit(id, { parts: [{ type: 'text', text: prompt }] })
    await h.runtime.idle(id)
  }
  await h.runtime.compact(id)
  await h.runtime.idle(id)
  return id
}

const ofType = (events: StoredEvent[], type: string) => events.filter((e) => e.type === type)

describe('ATIF export', () => {
  it('validates against the ATIF v1.6 schema, with every kind of step and call the session holds', async () => {
    const id = await richSession()
    const doc = atifOf(h.store, id, '0.1.0')
    const parsed = Trajectory.safeParse(doc)
    expect(parsed.success, JSON.stringify(parsed.error?.issues)).toBe(true)
    expect(doc.schema_version).toBe(ATIF_VERSION)
    expect(doc.agent).toEqual({
      name: 'chronicle',
      version: '0.1.0',
      model_name: 'mock:model',
      extra: { agent: 'build' },
    })

    const results = doc.steps.flatMap((s) => s.observation?.results ?? [])
    const content = (callId: string) => results.filter((r) => r.source_call_id === callId).map((r) => r.content)
    expect(content('c_ok')).toEqual(['result for x'])
    expect(content('c_invalid')[0]).toMatch(/^invalid: /)
    expect(content('c_failed')[0]).toMatch(/^failed: /)
    expect(content('c_loop').at(-1)).toMatch(/^denied: /)
    expect(content('c_slow')[0]).toMatch(/^aborted: /)
    const child = h.children(id)[0]
    expect(results.find((r) => r.source_call_id === 'c_task')?.subagent_trajectory_ref).toEqual([{ session_id: child }])

    const first = doc.steps.find((s) => s.source === 'agent')
    expect(first).toMatchObject({
      message: 'Looking.',
      reasoning_content: 'I should look it up first.',
      model_name: 'mock:model',
      metrics: { prompt_tokens: 100, completion_tokens: 20 },
    })
    expect(first?.tool_calls?.map((c) => [c.tool_call_id, c.function_name, c.arguments])).toEqual([
      ['c_ok', 'lookup', { query: 'x' }],
      ['c_invalid', 'lookup', {}],
      ['c_failed', 'read', { filePath: 'missing.txt' }],
    ])
    const summary = doc.steps.find((s) => (s.extra?.chronicle as { compaction?: boolean } | undefined)?.compaction)
    expect(summary).toMatchObject({ source: 'agent', message: 'SUMMARY: looked up x, delegated, looped, waited.' })
    expect(doc.steps.filter((s) => s.source === 'user').map((s) => s.message)).toEqual([P, WAIT, LOOP, WRAP])
  })

  it('a call a restart cut off is a result reading "interrupted: …", and the document still validates', async () => {
    h = subagentHarness([
      { when: { userContains: 'hang' }, times: 1, toolCalls: [{ id: 'c_hang', name: 'slow', input: { ms: 60_000 } }] },
    ])
    const id = h.session()
    await h.runtime.submit(id, { parts: [{ type: 'text', text: 'hang on' }] })
    await until(() => h.events(id).some((e) => e.type === 'tool.called' && e.data.tool === 'slow'))
    await h.runtime.stop() // the server goes down mid-call: the run stays open for recovery
    await recoverSessions(sqlitePorts(h.store)) // which records the call as interrupted
    expect(h.events(id).some((e) => e.type === 'tool.failed' && e.data.error.kind === 'interrupted')).toBe(true)
    const doc = atifOf(h.store, id, '0.1.0')
    const parsed = Trajectory.safeParse(doc)
    expect(parsed.success, JSON.stringify(parsed.error?.issues)).toBe(true)
    const results = doc.steps.flatMap((s) => s.observation?.results ?? [])
    expect(results.filter((r) => r.source_call_id === 'c_hang').map((r) => r.content)).toEqual([
      expect.stringMatching(/^interrupted: /),
    ])
  })

  it("round trip: steps, tool calls and tokens are the log's", async () => {
    const id = await richSession()
    const doc = atifOf(h.store, id, '0.1.0')
    const events = h.events(id)
    const stepsStarted = ofType(events, 'step.started').length
    const userMessages = ofType(events, 'input.delivered').length
    expect(doc.steps.filter((s) => s.source === 'agent')).toHaveLength(stepsStarted)
    expect(doc.steps.filter((s) => s.source === 'user')).toHaveLength(userMessages)
    expect(doc.final_metrics?.total_steps).toBe(doc.steps.length)

    // every call the model made, valid or not, and one result each
    const calls = ofType(events, 'tool.input.started').map((e) => (e.data as { callId: string }).callId)
    expect(doc.steps.flatMap((s) => (s.tool_calls ?? []).map((c) => c.tool_call_id))).toEqual(calls)
    expect(doc.steps.flatMap((s) => (s.observation?.results ?? []).map((r) => r.source_call_id))).toEqual(calls)

    const usage = ofType(events, 'step.finished').map(
      (e) => (e.data as unknown as { usage: Record<string, number> }).usage,
    )
    const sum = (key: string) => usage.reduce((n, u) => n + (u[key] ?? 0), 0)
    expect(doc.final_metrics).toMatchObject({
      total_prompt_tokens: sum('inputTokens'),
      total_completion_tokens: sum('outputTokens'),
      total_cached_tokens: sum('cachedInputTokens'),
    })
    expect(sum('inputTokens')).toBe(100 + 150 + 200 + 3 * 10 + 12 + 14 + 400)
  })

  it('a fork exports the history it inherited', async () => {
    const id = await richSession()
    const parentDoc = atifOf(h.store, id, '0.1.0')
    const at = ofType(h.events(id), 'run.finished')[0]?.seq as number
    const child = await fork(sqlitePorts(h.store), h.ids, id, at, { meta: { actor: 'user' } })
    const doc = atifOf(h.store, child.id, '0.1.0')
    expect(Trajectory.safeParse(doc).success).toBe(true)
    expect(doc.session_id).toBe(child.id)
    expect(doc.extra?.chronicle).toMatchObject({ forkedFrom: { sessionId: id, seq: at } })
    // the first exchange (up to the first run's end): its user step and agent steps, as the parent's
    const firstRun = parentDoc.steps.slice(
      0,
      parentDoc.steps.findIndex((s) => s.message === WAIT),
    )
    expect(doc.steps.map((s) => [s.source, s.message])).toEqual(firstRun.map((s) => [s.source, s.message]))
  })

  it('the schema check refuses what ATIF forbids: an unknown field, a result without its call, agent fields on a user step', () => {
    const base = {
      schema_version: 'ATIF-v1.6',
      session_id: 's',
      agent: { name: 'a', version: '1' },
      steps: [{ step_id: 1, source: 'user', message: 'hi' }],
    }
    expect(Trajectory.safeParse(base).success).toBe(true)
    expect(Trajectory.safeParse({ ...base, extraneous: 1 }).success).toBe(false)
    const step = (over: object) => ({ ...base, steps: [{ step_id: 1, source: 'agent', message: '', ...over }] })
    expect(Trajectory.safeParse(step({ observation: { results: [{ source_call_id: 'c1' }] } })).success).toBe(false)
    expect(
      Trajectory.safeParse({ ...base, steps: [{ step_id: 1, source: 'user', message: '', metrics: {} }] }).success,
    ).toBe(false)
    expect(Trajectory.safeParse({ ...base, steps: [{ step_id: 2, source: 'user', message: '' }] }).success).toBe(false)
    expect(Trajectory.safeParse({ ...base, steps: [] }).success).toBe(false)
  })

  it('a session with no message is NOTHING_TO_EXPORT', () => {
    h = subagentHarness([])
    const id = h.session()
    expect(() => atifOf(h.store, id, '0.1.0')).toThrow(expect.objectContaining({ code: 'NOTHING_TO_EXPORT' }))
  })
})
