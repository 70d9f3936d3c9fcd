import { afterEach, describe, expect, it } from 'vitest'
import { fork } from '../../src/commands/fork.js'
import { sequentialIds } from '../../src/events/ids.js'
import type { EventStore } from '../../src/events/store.js'
import { openStore } from '../../src/projections/open.js'
import { stateAt } from '../../src/projections/time-travel/time-travel.js'
import { json, plainStateAt, snapshotRows } from './helpers.js'
import { recordSession } from './recorded.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

const stores: EventStore[] = []
function open(snapshotOnCommit = true): EventStore {
  const store = openStore(':memory:', { snapshotEvery: 4, snapshotOnCommit })
  stores.push(store)
  return store
}
afterEach(() => {
  for (const s of stores.splice(0)) s.close()
})
const tick = () => new Promise((resolve) => setImmediate(resolve))

describe('background snapshot maintenance', () => {
  it('extends the chains after commits, for sessions and forks, without changing any answer', async () => {
    const store = open()
    const seqs = recordSession(store)
    expect(snapshotRows(store)).toBe(0) // nothing runs inside the append
    await tick()
    expect(snapshotRows(store)).toBe(Math.floor(seqs.length / 4))
    const child = await fork(sqlitePorts(store), sequentialIds(), 'ses_rec', seqs[20] as number)
    for (let i = 0; i < 9; i++)
      store.append(child.id, [{ type: 'session.renamed', data: { title: `t${i}` } }], { meta: { actor: 'user' } })
    await tick()
    const rows = store.asCommitted
      .reader()
      .prepare('SELECT version, base_version AS base FROM snapshots WHERE session_id = ? ORDER BY version')
      .all(child.id)
    const version = store.version(child.id)
    expect(version).toBeGreaterThanOrEqual(12)
    expect(rows).toEqual(
      Array.from({ length: Math.floor(version / 4) }, (_, i) => ({ version: 4 * (i + 1), base: 4 * i })),
    )
    for (const seq of seqs) expect(json(stateAt(store, 'ses_rec', seq))).toEqual(plainStateAt(store, 'ses_rec', seq))
    for (const e of store.readSession(child.id))
      expect(json(stateAt(store, child.id, e.seq))).toEqual(plainStateAt(store, child.id, e.seq))
  })

  it('is off with snapshotOnCommit: false, and harmless when the store closes first', async () => {
    const off = open(false)
    recordSession(off)
    await tick()
    expect(snapshotRows(off)).toBe(0)
    const closing = open()
    recordSession(closing)
    closing.close()
    await tick()
  })
})
