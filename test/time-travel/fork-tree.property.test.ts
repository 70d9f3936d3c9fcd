import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { fork } from '../../src/commands/fork.js'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import { sequentialIds } from '../../src/events/ids.js'
import type { EventStore } from '../../src/events/store.js'
import { history } from '../../src/projections/queries/history.js'
import { openStore } from '../../src/projections/open.js'
import { loadView } from '../../src/projections/queries/read-model.js'
import { stateAt } from '../../src/projections/time-travel/time-travel.js'
import { verify } from '../../src/projections/upkeep/verify.js'
import { asState, json, plainStateAt } from './helpers.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/**
 * Random fork trees: sessions advance through agent turns a few events at a
 * time (so forks land mid-stream), and any session is forked at any event of
 * its history — forks of forks, siblings, forks inside inherited prefixes.
 * A model of the tree says what every history must be; time travel, the
 * stored read models and the plain fold must all agree.
 */
interface Node {
  readonly id: string
  readonly parent?: { readonly id: string; readonly cut: number }
  readonly own: number[]
  script: ChronicleEvent[]
}

type Command = { kind: 'step'; node: number; n: number } | { kind: 'fork'; node: number; at: number }

const command: fc.Arbitrary<Command> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('step' as const), node: fc.nat(), n: fc.integer({ min: 1, max: 5 }) }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('fork' as const), node: fc.nat(), at: fc.nat() }) },
)

let unique = 0
function turn(): ChronicleEvent[] {
  const k = ++unique
  const [input, user, msg, text, tool] = ['in', 'msg_u', 'msg_a', 'prt_t', 'prt_c'].map((p) => `${p}${k}`) as [
    string,
    string,
    string,
    string,
    string,
  ]
  return [
    {
      type: 'input.accepted',
      data: {
        inputId: input,
        parts: [{ type: 'text', text: `turn ${k}` }],
        delivery: 'queue',
        noReply: false,
        digest: input,
      },
    },
    { type: 'run.started', data: { runId: `run${k}`, reason: 'input' } },
    { type: 'input.delivered', data: { inputId: input, messageId: user, partIds: [`prt_u${k}`] } },
    {
      type: 'message.created',
      data: { messageId: msg, role: 'assistant', parentId: user, agent: 'build', model: null },
    },
    { type: 'text.started', data: { messageId: msg, partId: text } },
    { type: 'text.delta', data: { partId: text, text: 'hello ' } },
    { type: 'tool.input.started', data: { messageId: msg, partId: tool, callId: `call${k}`, tool: 'bash' } },
    { type: 'tool.input.delta', data: { partId: tool, delta: '{"command":"ls"}' } },
    {
      type: 'tool.called',
      data: { messageId: msg, partId: tool, callId: `call${k}`, tool: 'bash', input: { command: 'ls' } },
    },
    {
      type: 'permission.requested',
      data: { requestId: `per${k}`, partId: tool, permission: 'bash', patterns: ['ls'] },
    },
    { type: 'permission.replied', data: { requestId: `per${k}`, reply: 'once' } },
    k % 2 === 0
      ? { type: 'tool.completed', data: { partId: tool, output: 'a b' } }
      : { type: 'tool.failed', data: { partId: tool, error: { kind: 'failed', message: 'exit 1' } } },
    { type: 'text.delta', data: { partId: text, text: 'world' } },
    { type: 'text.ended', data: { partId: text } },
    { type: 'message.completed', data: { messageId: msg, finish: 'stop', usage: { inputTokens: 3, outputTokens: 2 } } },
    { type: 'run.finished', data: { runId: `run${k}`, outcome: 'idle' } },
  ]
}

/** What the model says a node's history is: [seq, owner, inherited]. */
function expectedHistory(nodes: Map<string, Node>, id: string): [number, string, boolean][] {
  const node = nodes.get(id) as Node
  const inherited = node.parent
    ? expectedHistory(nodes, node.parent.id)
        .filter(([seq]) => seq <= (node.parent as { cut: number }).cut)
        .map(([seq, owner]): [number, string, boolean] => [seq, owner, true])
    : []
  return [...inherited, ...node.own.map((seq): [number, string, boolean] => [seq, id, false])]
}

async function run(commands: Command[]): Promise<void> {
  const store: EventStore = openStore(':memory:', { snapshotEvery: 3 })
  try {
    const ids = sequentialIds()
    const nodes = new Map<string, Node>()
    const created = store.append(
      'ses_root',
      [{ type: 'session.created', data: { directory: '/r', agent: 'build', model: null } }],
      { meta: { actor: 'user' } },
    )
    nodes.set('ses_root', { id: 'ses_root', own: created.map((e) => e.seq), script: [] })
    for (const c of commands) {
      const list = [...nodes.values()]
      const node = list[c.node % list.length] as Node
      if (c.kind === 'step') {
        if (node.script.length === 0) node.script = turn()
        const events = node.script.splice(0, c.n)
        node.own.push(...store.append(node.id, events, { meta: { actor: 'runtime' } }).map((e) => e.seq))
      } else {
        const hist = expectedHistory(nodes, node.id)
        const cut = (hist[c.at % hist.length] as [number, string, boolean])[0]
        const child = await fork(sqlitePorts(store), ids, node.id, cut)
        nodes.set(child.id, {
          id: child.id,
          parent: { id: node.id, cut },
          own: store.readSession(child.id).map((e) => e.seq),
          script: [],
        })
      }
    }

    const samples: { id: string; seq: number; answer: unknown }[] = []
    for (const node of nodes.values()) {
      const expected = expectedHistory(nodes, node.id)
      const page = history(store, node.id, { limit: 5000 })
      expect(page.events.map((e) => [e.seq, e.sessionId, e.inherited ?? false])).toEqual(expected)
      const now = stateAt(store, node.id)
      expect(json(now)).toEqual(asState(loadView(store, node.id), now.seq))
      expect(json(now)).toEqual(plainStateAt(store, node.id, now.seq))
      const picks = [expected[0], expected[Math.floor(expected.length / 2)], expected[expected.length - 2]]
      for (const [seq, owner] of picks.filter((p) => p !== undefined)) {
        const answer = json(stateAt(store, node.id, seq))
        expect(answer).toEqual(plainStateAt(store, owner, seq))
        samples.push({ id: node.id, seq, answer })
      }
    }
    expect(verify(store).differences).toEqual([])
    store.asCommitted.reader().exec('DELETE FROM snapshots')
    for (const { id, seq, answer } of samples)
      expect(json(stateAt(store, id, seq, { snapshotEvery: 0 }))).toEqual(answer)
  } finally {
    store.close()
  }
}

describe('random fork trees', () => {
  it('every history is its ancestors’ prefixes then its own events; every state equals the fold and the read model', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 40 }), (commands) => run(commands)),
      { numRuns: 60 },
    )
  })
})
