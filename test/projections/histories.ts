import fc from 'fast-check'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import type { EventMeta, StoredEvent } from '../../src/events/envelope.js'
import type { EventStore } from '../../src/events/store.js'

/**
 * A small generator of valid session histories. fast-check draws a list of
 * steps; `play` interprets each against a model of every session (inbox,
 * run, open message, open text parts, tool calls and their states,
 * permissions, compaction, subtasks) and appends only events that are valid
 * in that state — through `append` or the batching `enqueue`, at random.
 * Forks copy the model of their parent at the fork point, as the store does.
 */
export interface Step {
  readonly pick: number
  readonly arg: number
  readonly text: string
  readonly batched: boolean
}

const textArb = fc.oneof(
  { weight: 6, arbitrary: fc.string({ maxLength: 60 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 30 }) },
  { weight: 1, arbitrary: fc.constantFrom('\ud83d', '\ude00', '😀 emoji', 'x'.repeat(700), 'é'.repeat(1100)) },
)

export const stepsArb = (maxLength = 120): fc.Arbitrary<Step[]> =>
  fc.array(fc.record({ pick: fc.nat(), arg: fc.nat(), text: textArb, batched: fc.boolean() }), {
    minLength: 1,
    maxLength,
    size: 'max',
  })

interface Model {
  id: string
  inbox: { inputId: string; parts: number }[]
  run: string | null
  lastUser: string | undefined
  msg: string | null
  open: string[]
  tools: { partId: string; state: 'pending' | 'running' }[]
  subtasks: string[]
  perms: string[]
  rules: string[]
  compaction: string | null
  step: number
  /** every message created, in order: what reverts hide and patches land on */
  messages: string[]
  /** a revert or unrevert started and not yet completed */
  restoring: string | null
}

const clone = (m: Model): Model => structuredClone(m)

export interface Played {
  readonly sessions: string[]
  readonly events: number
}

export async function play(store: EventStore, steps: readonly Step[]): Promise<Played> {
  const models: Model[] = []
  /** per session: [last seq, model after it] at each resolved append, for forks */
  const history = new Map<string, { seq: number; model: Model }[]>()
  const pending: Promise<unknown>[] = []
  let n = 0
  let events = 0
  const id = (prefix: string) => `${prefix}_${String(++n).padStart(5, '0')}`

  const emit = (m: Model, list: ChronicleEvent[], batched: boolean, meta: EventMeta = { actor: 'runtime' }) => {
    events += list.length
    const snapshot = clone(m)
    const record = (stored: StoredEvent[]) => {
      const last = stored[stored.length - 1]
      if (last) history.get(m.id)?.push({ seq: last.seq, model: snapshot })
    }
    if (batched) pending.push(store.enqueue(m.id, list, { meta }).then(record))
    else record(store.append(m.id, list, { meta }))
  }

  const create = (step: Step) => {
    const m: Model = {
      id: id('ses'),
      inbox: [],
      run: null,
      lastUser: undefined,
      msg: null,
      open: [],
      tools: [],
      subtasks: [],
      perms: [],
      rules: [],
      compaction: null,
      step: 0,
      messages: [],
      restoring: null,
    }
    models.push(m)
    history.set(m.id, [])
    emit(
      m,
      [
        {
          type: 'session.created',
          data: {
            directory: '/repo',
            agent: 'build',
            model: step.arg % 2 ? null : 'openai:gpt',
            ...(step.arg % 3 === 0 && { title: step.text || 'titled' }),
          },
        },
      ],
      false,
    )
  }

  for (const step of steps) {
    if (models.length === 0 || step.pick % 31 === 0) {
      if (models.length < 4) {
        create(step)
        continue
      }
    }
    if (step.pick % 37 === 1 && models.length < 6) {
      // Fork an existing session at one of its resolved appends.
      await Promise.all(pending.splice(0))
      const parent = models[step.arg % models.length] as Model
      const points = history.get(parent.id) ?? []
      const point = points[step.arg % Math.max(points.length, 1)]
      if (point) {
        const child = { ...clone(point.model), id: id('ses') }
        models.push(child)
        history.set(child.id, [])
        emit(
          child,
          [
            {
              type: 'session.forked',
              data: { from: { sessionId: parent.id, seq: point.seq }, ...(step.arg % 2 === 0 && { title: 'fork' }) },
            },
          ],
          false,
        )
        continue
      }
    }
    const m = models[step.arg % models.length] as Model
    // Streaming dominates real logs: while a part is open, most steps are deltas.
    const options = m.open.length > 0 && step.pick % 4 !== 0 ? streaming(m, step) : actions(m, step, id)
    const chosen = options[step.pick % options.length] as () => ChronicleEvent[]
    emit(m, chosen(), step.batched, { actor: 'model', run: m.run ?? 'none' })
    if (step.pick % 7 === 0) await Promise.all(pending.splice(0))
  }
  await Promise.all(pending)
  return { sessions: models.map((m) => m.id), events }
}

function streaming(m: Model, s: Step): (() => ChronicleEvent[])[] {
  const partId = m.open[s.arg % m.open.length] as string
  return [
    () => [{ type: 'text.delta', data: { partId, text: s.text } }],
    () => [{ type: 'reasoning.delta', data: { partId, text: s.text } }],
    () => [
      { type: 'text.delta', data: { partId, text: s.text } },
      { type: 'text.delta', data: { partId, text: s.text.toUpperCase() } },
    ],
  ]
}

/** The events that are valid next for session `m`, each as a thunk that also updates the model. */
function actions(m: Model, s: Step, id: (p: string) => string): (() => ChronicleEvent[])[] {
  const list: (() => ChronicleEvent[])[] = []
  const pickOf = <T>(xs: readonly T[]): T => xs[s.arg % xs.length] as T
  const usage = { inputTokens: s.arg % 500, outputTokens: s.arg % 97, ...(s.arg % 2 === 0 && { reasoningTokens: 3 }) }

  list.push(() => {
    const inputId = id('in')
    const noReply = s.arg % 5 === 0
    const parts =
      s.arg % 3 === 0
        ? [
            { type: 'text' as const, text: s.text },
            { type: 'file' as const, path: 'src/a.ts', mediaType: 'text/plain' },
          ]
        : [{ type: 'text' as const, text: s.text || 'hello' }]
    if (!noReply) m.inbox.push({ inputId, parts: parts.length })
    return [
      {
        type: 'input.accepted',
        data: {
          inputId,
          parts,
          delivery: s.arg % 2 ? 'steer' : 'queue',
          noReply,
          digest: `d${inputId}`,
          ...(s.arg % 4 === 1 && { agent: 'plan' }),
        },
      },
    ]
  })
  if (m.inbox.length > 0) {
    list.push(() => {
      const input = m.inbox.shift() as { inputId: string; parts: number }
      const messageId = id('msg')
      m.lastUser = messageId
      m.messages.push(messageId)
      const partIds = Array.from({ length: input.parts }, () => id('prt'))
      return [
        {
          type: 'input.delivered',
          data: { inputId: input.inputId, messageId, partIds, ...(s.arg % 2 === 0 && { steered: true }) },
        },
      ]
    })
  }
  if (m.run === null) {
    list.push(() => {
      m.run = id('run')
      return [{ type: 'run.started', data: { runId: m.run, reason: 'input' } }]
    })
  } else {
    const runId = m.run
    list.push(() => [{ type: 'run.resumed', data: { runId, attempt: 1 + (s.arg % 3) } }])
    list.push(() => [{ type: 'run.cancel.requested', data: { runId } }])
    list.push(() => {
      m.run = null
      const outcome = pickOf(['idle', 'error', 'cancelled', 'max_steps', 'failed'] as const)
      return [
        {
          type: 'run.finished',
          data: { runId, outcome, ...(outcome === 'error' && { error: { kind: 'provider', message: 'boom' } }) },
        },
      ]
    })
  }
  if (m.msg === null) {
    list.push(() => {
      m.msg = id('msg')
      m.messages.push(m.msg)
      return [
        {
          type: 'message.created',
          data: {
            messageId: m.msg,
            role: 'assistant',
            agent: 'build',
            model: 'openai:gpt',
            ...(m.lastUser && { parentId: m.lastUser }),
            ...(s.arg % 11 === 0 && { summary: true }),
          },
        },
      ]
    })
  } else {
    const messageId = m.msg
    list.push(() => {
      m.msg = null
      m.open = []
      return [
        {
          type: 'message.completed',
          data: {
            messageId,
            finish: pickOf(['stop', 'tool-calls', 'length']),
            usage,
            ...(s.arg % 2 === 0 && { cost: (s.arg % 100) / 1000 }),
            ...(s.arg % 9 === 0 && { error: { kind: 'aborted', message: 'stopped' } }),
          },
        },
      ]
    })
    list.push(() => [
      {
        type: 'step.started',
        data: { messageId, partId: id('prt'), step: ++m.step, contextDigest: `sha256:${m.step}` },
      },
    ])
    list.push(() => [{ type: 'step.finished', data: { messageId, partId: id('prt'), finishReason: 'stop', usage } }])
    list.push(() => [
      {
        type: 'step.retried',
        data: { messageId, attempt: 1 + (s.arg % 4), delayMs: s.arg % 2000, error: 'rate limited' },
      },
    ])
    for (const kind of ['text', 'reasoning'] as const) {
      list.push(() => {
        const partId = id('prt')
        m.open.push(partId)
        return [{ type: `${kind}.started`, data: { messageId, partId } }]
      })
    }
    list.push(() => {
      const partId = id('prt')
      m.tools.push({ partId, state: 'pending' })
      return [
        {
          type: 'tool.input.started',
          data: { messageId, partId, callId: `call_${partId}`, tool: pickOf(['read', 'bash', 'task']) },
        },
      ]
    })
    list.push(() => {
      // A tool call that arrives whole (no input streaming).
      const partId = id('prt')
      m.tools.push({ partId, state: 'running' })
      return [
        {
          type: 'tool.called',
          data: { messageId, partId, callId: `call_${partId}`, tool: 'read', input: { filePath: s.text } },
        },
      ]
    })
    const pending = m.tools.filter((t) => t.state === 'pending')
    if (pending.length > 0) {
      const tool = pickOf(pending)
      list.push(() => [{ type: 'tool.input.delta', data: { partId: tool.partId, delta: s.text } }])
      list.push(() => {
        tool.state = 'running'
        return [
          {
            type: 'tool.called',
            data: {
              messageId,
              partId: tool.partId,
              callId: `call_${tool.partId}`,
              tool: 'bash',
              input: s.arg % 2 ? { command: 'ls' } : undefined,
            },
          },
        ]
      })
    }
  }
  if (m.open.length > 0) {
    const partId = pickOf(m.open)
    const kind = 'text' // either delta type is valid for both part kinds
    list.push(() => [{ type: `${kind}.delta`, data: { partId, text: s.text } }])
    list.push(() => {
      m.open = m.open.filter((p) => p !== partId)
      return [{ type: s.arg % 2 ? 'text.ended' : 'reasoning.ended', data: { partId } }]
    })
  }
  if (m.tools.length > 0) {
    const tool = pickOf(m.tools)
    const end = () => (m.tools = m.tools.filter((t) => t !== tool))
    list.push(() => {
      end()
      const kind = pickOf(['failed', 'invalid', 'denied', 'aborted', 'interrupted'] as const)
      return [{ type: 'tool.failed', data: { partId: tool.partId, error: { kind, message: `${kind}: ${s.text}` } } }]
    })
    if (tool.state === 'running') {
      list.push(() => [
        {
          type: 'tool.progressed',
          data: { partId: tool.partId, metadata: { output: s.text, [`k${s.arg % 3}`]: s.arg } },
        },
      ])
      list.push(() => {
        end()
        return [
          {
            type: 'tool.completed',
            data: {
              partId: tool.partId,
              output: s.text,
              ...(s.arg % 2 === 0 && { title: 'done' }),
              ...(s.arg % 3 === 0 && { metadata: { exit: 0 } }),
              ...(s.arg % 5 === 0 && { attachments: [{ type: 'image', mediaType: 'image/png', data: 'AAAA' }] }),
            },
          },
        ]
      })
      list.push(() => {
        const requestId = id('per')
        m.perms.push(requestId)
        return [
          {
            type: 'permission.requested',
            data: {
              requestId,
              partId: tool.partId,
              callId: `call_${tool.partId}`,
              permission: 'bash',
              patterns: [s.text || '*'],
              ...(s.arg % 2 === 0 && { metadata: { why: 'x' } }),
            },
          },
        ]
      })
      if (!m.subtasks.includes(tool.partId)) {
        list.push(() => {
          m.subtasks.push(tool.partId)
          return [
            {
              type: 'subtask.started',
              data: { partId: tool.partId, callId: `call_${tool.partId}`, childSessionId: `ses_child_${tool.partId}` },
            },
          ]
        })
      }
    }
  }
  if (m.subtasks.length > 0) {
    const partId = pickOf(m.subtasks)
    list.push(() => {
      m.subtasks = m.subtasks.filter((p) => p !== partId)
      return [
        {
          type: 'subtask.finished',
          data: {
            partId,
            callId: `call_${partId}`,
            childSessionId: `ses_child_${partId}`,
            outcome: pickOf(['idle', 'error', 'cancelled'] as const),
          },
        },
      ]
    })
  }
  if (m.perms.length > 0) {
    const requestId = pickOf(m.perms)
    list.push(() => {
      m.perms = m.perms.filter((p) => p !== requestId)
      return [
        {
          type: 'permission.replied',
          data: {
            requestId,
            reply: pickOf(['once', 'always', 'reject'] as const),
            ...(s.arg % 2 === 0 && { message: 'no' }),
          },
        },
      ]
    })
  }
  list.push(() => {
    const ruleId = id('rul')
    m.rules.push(ruleId)
    return [
      {
        type: 'permission.rule.added',
        data: {
          ruleId,
          rule: { permission: 'edit', pattern: s.text || '*', action: pickOf(['allow', 'deny', 'ask'] as const) },
        },
      },
    ]
  })
  if (m.rules.length > 0) {
    const ruleId = pickOf(m.rules)
    list.push(() => {
      m.rules = m.rules.filter((r) => r !== ruleId)
      return [{ type: 'permission.rule.removed', data: { ruleId } }]
    })
  }
  if (m.compaction === null) {
    list.push(() => {
      m.compaction = id('cmp')
      return [
        {
          type: 'compaction.requested',
          data: { compactionId: m.compaction, reason: pickOf(['auto', 'overflow', 'manual'] as const) },
        },
      ]
    })
  } else {
    const compactionId = m.compaction
    list.push(() => [{ type: 'compaction.started', data: { compactionId } }])
    list.push(() => {
      m.compaction = null
      return [
        {
          type: 'compaction.completed',
          data: {
            compactionId,
            summaryMessageId: m.lastUser ?? 'msg_none',
            ...(s.arg % 2 === 0 && { tailStartMessageId: 'msg_tail' }),
            tokensBefore: 9000,
            tokensAfter: 1200,
          },
        },
      ]
    })
    list.push(() => {
      m.compaction = null
      return [{ type: 'compaction.failed', data: { compactionId, error: 'summary too long' } }]
    })
  }
  list.push(() => [
    {
      type: 'todo.updated',
      data: {
        items: [
          {
            content: s.text,
            status: pickOf(['pending', 'in_progress', 'completed', 'cancelled'] as const),
            priority: pickOf(['high', 'medium', 'low'] as const),
          },
        ],
      },
    },
  ])
  list.push(() => [{ type: 'session.renamed', data: { title: s.text.trim().slice(0, 400) || 'renamed' } }])
  list.push(() => [
    { type: 'session.rules.changed', data: { rules: [{ permission: 'bash', pattern: 'git *', action: 'allow' }] } },
  ])
  if (s.arg % 13 === 0) list.push(() => [{ type: 'session.archived', data: {} }])
  // What changes an entity that was settled: a tool's late patch on a message, a revert marking messages.
  const tree = (s.arg % 16).toString(16).repeat(40)
  if (m.messages.length > 0) {
    const messageId = pickOf(m.messages)
    list.push(() => [
      {
        type: 'workspace.snapshotted',
        data: {
          tree,
          reason: 'tool',
          messageId,
          changed: [{ path: `f${s.arg % 3}.ts`, status: pickOf(['added', 'modified', 'deleted'] as const), added: 1 }],
        },
      },
    ])
  }
  if (m.restoring === null) {
    list.push(() => {
      const restoreId = id('rst')
      m.restoring = restoreId
      const kind = s.arg % 3 === 0 ? 'unrevert' : 'revert'
      const messages = kind === 'revert' ? m.messages.slice(-(1 + (s.arg % 3))) : []
      return [
        {
          type: 'workspace.restore.started',
          data: { restoreId, kind, ...(kind === 'revert' && { to: 1 }), from: tree, tree, messages },
        },
      ]
    })
  } else {
    const restoreId = m.restoring
    list.push(() => {
      m.restoring = null
      return [{ type: 'workspace.restore.completed', data: { restoreId, changed: [] } }]
    })
  }
  return list
}
