import { afterEach, describe, expect, it } from 'vitest'
import type { EventStore } from '../../src/events/store.js'
import { foldSession } from '../../src/projections/fold/fold.js'
import { openStore } from '../../src/projections/open.js'
import { loadView } from '../../src/projections/queries/read-model.js'
import { rebuild } from '../../src/projections/upkeep/rebuild.js'
import { verify } from '../../src/projections/upkeep/verify.js'
import * as scenarios from './scenarios.js'

/**
 * Forks share their parent's rows (src/projections/rows/shared-rows.ts): a fork
 * writes rows only for what it changes, reads the rest from its parent as of
 * the fork point, and still equals a fold of its log — whatever the parent
 * does after, and for a fork at any earlier event.
 */

const meta = { actor: 'runtime' as const }
let store: EventStore
afterEach(() => store?.close())

const count = (table: string) =>
  store.asCommitted.reader().prepare(`SELECT COUNT(*) FROM ${table}`).pluck().get() as number
const same = (id: string) =>
  expect(scenarios.plainView(loadView(store, id))).toEqual(scenarios.plainView(foldSession(store, id)))

const conversation = (id: string, turns: number) => scenarios.conversation(store, id, turns)
const fork = (child: string, from: string, seq: number) => scenarios.fork(store, child, from, seq)
const revert = (id: string, messages: string[]) => scenarios.revert(store, id, messages)

describe('forks share their parent’s rows', () => {
  it('a fork writes rows for nothing it inherits: the same few rows at any length of its parent', () => {
    store = openStore(':memory:')
    const rowsOfFork = (turns: number) => {
      const parent = `ses_p${turns}`
      const { ends } = conversation(parent, turns)
      const before = count('messages') + count('parts')
      fork(`ses_f${turns}`, parent, ends[Math.floor(turns / 2)] as number)
      same(`ses_f${turns}`)
      return count('messages') + count('parts') - before
    }
    expect(rowsOfFork(10)).toBe(0)
    expect(rowsOfFork(400)).toBe(0)
    expect(count('inherits')).toBe(2)
  })

  it('what was in flight at the fork point is the fork’s own: the parent finishing it does not reach the fork', () => {
    store = openStore(':memory:')
    const { ends } = conversation('ses_p', 2)
    const streaming = store.append(
      'ses_p',
      [
        { type: 'message.created', data: { messageId: 'msg_open', role: 'assistant', agent: 'build', model: null } },
        { type: 'text.started', data: { messageId: 'msg_open', partId: 'prt_open' } },
        { type: 'text.delta', data: { partId: 'prt_open', text: 'half' } },
      ],
      { meta },
    )
    fork('ses_f', 'ses_p', streaming.at(-1)?.seq as number) // a bare fork, as a log may hold: nothing settled
    store.append(
      'ses_p',
      [
        { type: 'text.delta', data: { partId: 'prt_open', text: ' and the rest' } },
        { type: 'text.ended', data: { partId: 'prt_open' } },
        { type: 'message.completed', data: { messageId: 'msg_open', finish: 'stop' } },
      ],
      { meta },
    )
    store.append('ses_f', [{ type: 'text.delta', data: { partId: 'prt_open', text: ' differently' } }], { meta })
    same('ses_f')
    same('ses_p')
    const text = (id: string) => loadView(store, id).parts.get('prt_open')
    expect(text('ses_f')).toMatchObject({ text: 'half differently', ended: false })
    expect(text('ses_p')).toMatchObject({ text: 'half and the rest', ended: true })
    expect(ends).toHaveLength(2)
  })

  it('a parent’s revert after the fork leaves the fork’s messages as it read them (copy on write)', () => {
    store = openStore(':memory:')
    const { ends, messages } = conversation('ses_p', 6)
    fork('ses_f', 'ses_p', ends[5] as number)
    fork('ses_g', 'ses_f', store.head()) // a fork of the fork reads through both
    const before = count('messages')
    revert('ses_p', messages.slice(-4))
    expect(count('messages') - before).toBe(4) // the fork's own copies, as it read them; ses_g reads those
    for (const id of ['ses_p', 'ses_f', 'ses_g']) same(id)
    expect(loadView(store, 'ses_p').messages.get(messages.at(-1) as string)).toMatchObject({ reverted: 'rst_ses_p' })
    expect(loadView(store, 'ses_g').messages.get(messages.at(-1) as string)).not.toHaveProperty('reverted')
  })

  it('a parent and its fork rewriting a message in one commit leave a fork of the fork the message as it read it', async () => {
    store = openStore(':memory:')
    const { ends, messages } = conversation('ses_p', 3)
    fork('ses_f', 'ses_p', ends[2] as number)
    fork('ses_g', 'ses_f', store.head())
    const hidden = messages.slice(-2)
    // one commit: ses_p's revert copies the messages into ses_f as it read them, then ses_f's own revert
    // changes those copies, which ses_g must get before they move on
    const reverts = ['ses_p', 'ses_f'].map((id) =>
      store.enqueue(id, scenarios.revertEvents(id, hidden), { meta: { actor: 'runtime' } }),
    )
    const [p, f] = await Promise.all(reverts)
    expect(p?.[0]?.seq).toBe((f?.[0]?.seq as number) - 2) // committed together, in call order
    for (const id of ['ses_p', 'ses_f', 'ses_g']) same(id)
    const last = (id: string) => loadView(store, id).messages.get(hidden.at(-1) as string)
    expect(last('ses_f')).toMatchObject({ reverted: 'rst_ses_f' })
    expect(last('ses_g')).toBeDefined()
    expect(last('ses_g')).not.toHaveProperty('reverted')
  })

  it('a parent’s revert reaches a fork of a fork that reads past its own parent’s later rewrite', () => {
    store = openStore(':memory:')
    const { ends, messages } = conversation('ses_p', 3)
    fork('ses_f', 'ses_p', ends[2] as number)
    fork('ses_g', 'ses_f', store.head()) // reads ses_f as it is now, then ses_p
    const hidden = messages.slice(-2)
    revert('ses_f', hidden) // ses_f's own rows of them, past ses_g's fork point: ses_g reads on to ses_p's
    revert('ses_p', hidden) // ses_p's rows move on: ses_g must get them as it read them
    for (const id of ['ses_p', 'ses_f', 'ses_g']) same(id)
    const last = (id: string) => loadView(store, id).messages.get(hidden.at(-1) as string)
    expect(last('ses_f')).toMatchObject({ reverted: 'rst_ses_f' })
    expect(last('ses_g')).toBeDefined()
    expect(last('ses_g')).not.toHaveProperty('reverted')
  })

  it('a fork at an event before a revert reads the messages unreverted, whenever it is made', () => {
    store = openStore(':memory:')
    const { ends, messages } = conversation('ses_p', 6)
    revert('ses_p', messages.slice(-4))
    fork('ses_f', 'ses_p', ends[5] as number) // the revert came after this point
    fork('ses_e', 'ses_p', ends[1] as number) // and before this one's, nothing it hid existed yet
    for (const id of ['ses_p', 'ses_f', 'ses_e']) same(id)
    expect(loadView(store, 'ses_f').messages.get(messages.at(-1) as string)).not.toHaveProperty('reverted')
    expect(loadView(store, 'ses_e').messages.size).toBe(4)
  })

  it('a fork of a session projected before rows had versions copies its rows, as forks did', () => {
    store = openStore(':memory:')
    const { ends } = conversation('ses_old', 5)
    store.asCommitted
      .reader()
      .exec('UPDATE messages SET version = NULL; UPDATE parts SET version = NULL; UPDATE sessions SET versioned = 0')
    const before = count('messages') + count('parts')
    fork('ses_f', 'ses_old', ends[2] as number)
    expect(count('messages') + count('parts') - before).toBe(6 + 6) // three turns: two messages and two parts each
    expect(count('inherits')).toBe(0)
    same('ses_f')
  })

  it('rebuild lays the rows out as the live projection did, and verify finds nothing', () => {
    store = openStore(':memory:')
    const { ends, messages } = conversation('ses_p', 8)
    const forked = fork('ses_f', 'ses_p', ends[3] as number).at(-1)?.seq as number
    revert('ses_p', messages.slice(-6))
    fork('ses_g', 'ses_f', forked)
    const rows = () => ({
      messages: store.asCommitted.reader().prepare('SELECT * FROM messages ORDER BY session_id, id').all(),
      parts: store.asCommitted
        .reader()
        .prepare('SELECT session_id, id, version, through FROM parts ORDER BY session_id, id')
        .all(),
      inherits: store.asCommitted.reader().prepare('SELECT * FROM inherits ORDER BY session_id').all(),
      rewrites: store.asCommitted.reader().prepare('SELECT * FROM rewrites ORDER BY session_id, version, id').all(),
    })
    const live = rows()
    rebuild(store)
    expect(rows()).toEqual(live)
    expect(verify(store).differences).toEqual([])
  })
})
