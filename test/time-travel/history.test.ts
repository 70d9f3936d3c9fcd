import { afterEach, describe, expect, it } from 'vitest'
import { fork } from '../../src/commands/fork.js'
import { isChronicleError } from '../../src/events/errors.js'
import { sequentialIds } from '../../src/events/ids.js'
import type { EventStore } from '../../src/events/store.js'
import { history } from '../../src/projections/queries/history.js'
import { openStore } from '../../src/projections/open.js'
import { recordSession } from './recorded.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

const stores: EventStore[] = []
afterEach(() => {
  for (const s of stores.splice(0)) s.close()
})

/** Two interleaved sessions, a fork of the first and a fork of that fork. */
async function setup() {
  const store = openStore(':memory:')
  stores.push(store)
  const ids = sequentialIds()
  const rec = recordSession(store)
  const other = store.append(
    'ses_other',
    [{ type: 'session.created', data: { directory: '/x', agent: 'build', model: null } }],
    { meta: { actor: 'user' } },
  )
  const child = await fork(sqlitePorts(store), ids, 'ses_rec', rec[30] as number)
  const rename = (id: string, title: string) =>
    store.append(id, [{ type: 'session.renamed', data: { title } }], { meta: { actor: 'user' } })
  const own = [...store.readSession(child.id).map((e) => e.seq), ...rename(child.id, 'c1').map((e) => e.seq)]
  rename('ses_rec', 'parent moves on')
  rename('ses_other', 'other')
  own.push(...rename(child.id, 'c2').map((e) => e.seq))
  const grand = await fork(sqlitePorts(store), ids, child.id, own[1] as number)
  return { store, ids, rec, other: other[0]?.seq as number, child: child.id, own, grand: grand.id }
}

describe('history', () => {
  it('of a fork is the parent’s prefix (marked inherited) then its own events, in forward pages', async () => {
    const { store, rec, child, own } = await setup()
    const expected = [...rec.slice(0, 31).map((s) => [s, true]), ...own.map((s) => [s, false])]
    const seen: unknown[] = []
    let after: number | undefined
    let pages = 0
    for (;;) {
      const page = history(store, child, { ...(after !== undefined && { after }), limit: 7 })
      seen.push(...page.events.map((e) => [e.seq, e.inherited ?? false]))
      pages++
      if (page.next === undefined) break
      expect(page.events).toHaveLength(7)
      after = page.next
    }
    expect(seen).toEqual(expected)
    expect(pages).toBe(Math.ceil(expected.length / 7))
  })

  it('pages backwards from `before`, each page in ascending order', async () => {
    const { store, rec, child, own } = await setup()
    const all = [...rec.slice(0, 31), ...own]
    const pages: number[][] = []
    let before: number | undefined = Number.MAX_SAFE_INTEGER
    while (before !== undefined) {
      const page = history(store, child, { before, limit: 10 })
      pages.push(page.events.map((e) => e.seq))
      before = page.next
    }
    expect(pages[0]).toEqual(all.slice(-10))
    expect(pages.flat().sort((a, b) => a - b)).toEqual(all)
    expect(pages.every((p) => p.every((s, i) => i === 0 || s > (p[i - 1] as number)))).toBe(true)
  })

  it('of a fork of a fork recurses, and a range between after and before is served', async () => {
    const { store, rec, own, grand } = await setup()
    const page = history(store, grand, { limit: 1000 })
    expect(page.next).toBeUndefined()
    expect(page.events.map((e) => [e.sessionId, e.seq])).toEqual([
      ...rec.slice(0, 31).map((s) => ['ses_rec', s]),
      ...own.slice(0, 2).map((s) => [page.events[31]?.sessionId, s]),
      ...store.readSession(grand).map((e) => [grand, e.seq]),
    ])
    const between = history(store, grand, { after: rec[5], before: own[1], limit: 1000 })
    expect(between.events.map((e) => e.seq)).toEqual([...rec.slice(6, 31), own[0]])
  })

  it('never shows another session’s or a sibling’s events', async () => {
    const { store, ids, child, other } = await setup()
    const sibling = await fork(sqlitePorts(store), ids, 'ses_rec', 3)
    const seqs = history(store, child, { limit: 1000 }).events.map((e) => e.seq)
    expect(seqs).not.toContain(other)
    for (const e of store.readSession(sibling.id)) expect(seqs).not.toContain(e.seq)
  })

  it('refuses a bad limit or cursor and an unknown session', async () => {
    const { store, child } = await setup()
    const code = (fn: () => unknown) => {
      try {
        fn()
      } catch (err) {
        return isChronicleError(err) ? err.code : 'other'
      }
      return 'none'
    }
    expect(code(() => history(store, child, { limit: 0 }))).toBe('BAD_REQUEST')
    expect(code(() => history(store, child, { limit: 5001 }))).toBe('BAD_REQUEST')
    expect(code(() => history(store, child, { after: -1 }))).toBe('BAD_REQUEST')
    expect(code(() => history(store, 'ses_nope'))).toBe('SESSION_NOT_FOUND')
  })
})
