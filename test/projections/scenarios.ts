import type { SessionView } from '../../src/projections/fold/model.js'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import type { EventStore } from '../../src/events/store.js'

/** Small histories the projection specs build: conversations, forks and reverts. */

const meta = { actor: 'runtime' as const }

/** A session of `turns` turns (a user message, an assistant answer in one text part); the seq ending each. */
export function conversation(store: EventStore, id: string, turns: number): { ends: number[]; messages: string[] } {
  store.append(id, [{ type: 'session.created', data: { directory: '/w', agent: 'build', model: null } }], { meta })
  const ends: number[] = []
  const messages: string[] = []
  for (let t = 0; t < turns; t++) {
    const [user, answer, prt] = [`msg_${id}_${t}u`, `msg_${id}_${t}a`, `prt_${id}_${t}`]
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
      { type: 'input.delivered', data: { inputId: `in_${t}`, messageId: user, partIds: [`${prt}u`] } },
      {
        type: 'message.created',
        data: { messageId: answer, role: 'assistant', parentId: user, agent: 'build', model: 'scripted:x' },
      },
      { type: 'text.started', data: { messageId: answer, partId: prt } },
      { type: 'text.delta', data: { partId: prt, text: `answer ${t}` } },
      { type: 'text.ended', data: { partId: prt } },
      { type: 'message.completed', data: { messageId: answer, finish: 'stop' } },
    ]
    ends.push(store.append(id, events, { meta }).at(-1)?.seq as number)
    messages.push(user, answer)
  }
  return { ends, messages }
}

export const fork = (store: EventStore, child: string, from: string, seq: number) =>
  store.append(child, [{ type: 'session.forked', data: { from: { sessionId: from, seq } } }], { meta })

/** A revert of the session's files that hides `messages`, started and completed. */
export const revertEvents = (id: string, messages: string[]): ChronicleEvent[] => [
  {
    type: 'workspace.restore.started',
    data: { restoreId: `rst_${id}`, kind: 'revert', to: 1, from: 'a'.repeat(40), tree: 'b'.repeat(40), messages },
  },
  { type: 'workspace.restore.completed', data: { restoreId: `rst_${id}`, changed: [] } },
]

export const revert = (store: EventStore, id: string, messages: string[]) =>
  store.append(id, revertEvents(id, messages), { meta })

/** A view as plain JSON, its messages and parts as entries sorted by id: what two reads of one session compare by. */
export const plainView = (view: SessionView) =>
  JSON.parse(
    JSON.stringify({
      session: view.session,
      messages: [...view.messages.entries()].sort(),
      parts: [...view.parts.entries()].sort(),
    }),
  )
