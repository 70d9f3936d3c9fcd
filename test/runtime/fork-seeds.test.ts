import { afterEach, describe, expect, it } from 'vitest'
import { fork } from '../../src/commands/fork.js'
import { decideSession } from '../../src/commands/session.js'
import { sequentialIds } from '../../src/events/ids.js'
import type { EventStore } from '../../src/events/store.js'
import { openStore } from '../../src/projections/open.js'
import { loadView } from '../../src/projections/queries/read-model.js'
import type { ReadModels } from '../../src/projections/read-models.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'
import { SessionViews } from '../../src/runtime/loop/session-views.js'
import { executeNow } from '../support/execute-now.js'
import { asState } from '../time-travel/helpers.js'
import { recordSession } from '../time-travel/recorded.js'

/**
 * A new fork's first view is built from its fork point's state, which the
 * fork has just computed, and the fork's own events the views heard commit —
 * not read from its rows, which are its parent's prefix (thousands at a
 * thousand turns). Whichever way it is built, it is the read model.
 */
describe('a fork’s first view', () => {
  const stores: EventStore[] = []
  const held: SessionViews[] = []
  afterEach(() => {
    for (const v of held.splice(0)) v.close()
    for (const s of stores.splice(0)) s.close()
  })

  /** The loop's views over a store, counting the read-model loads each session cost. */
  function viewsOf(store: EventStore) {
    const ports = sqlitePorts(store)
    const loads = new Map<string, number>()
    const readModels: ReadModels = {
      ...ports.readModels,
      view: (sessionId, opts) => {
        loads.set(sessionId, (loads.get(sessionId) ?? 0) + 1)
        return ports.readModels.view(sessionId, opts)
      },
    }
    const views = new SessionViews({ ...ports, readModels })
    held.push(views)
    return { views, loads, ports }
  }

  function recorded() {
    const store = openStore(':memory:', { snapshotEvery: 5 })
    stores.push(store)
    return { store, seqs: recordSession(store) }
  }

  it('at every event of a recorded session, equals the fork’s read model, with no read of its rows', async () => {
    const { store, seqs } = recorded()
    const { views, loads, ports } = viewsOf(store)
    const ids = sequentialIds()
    for (const seq of seqs) {
      const child = await fork(ports, ids, 'ses_rec', seq)
      const view = await views.read(child.id)
      expect(asState(view, seq)).toEqual(asState(loadView(store, child.id), seq))
      expect(loads.get(child.id)).toBeUndefined()
    }
  })

  it('folds what the fork committed after it was made, and what commits while it is being built', async () => {
    const { store, seqs } = recorded()
    const { views, loads, ports } = viewsOf(store)
    const child = await fork(ports, sequentialIds(), 'ses_rec', seqs[20] as number)
    const rename = (title: string) =>
      executeNow(store, child.id, (s) => decideSession({ type: 'rename', title }, s, child.id), {
        meta: { actor: 'user' },
      })
    rename('before the first read')
    const reading = views.read(child.id)
    rename('while it is built')
    const view = await reading
    expect(view.session?.title).toBe('while it is built')
    expect(asState(view, 0)).toEqual(asState(loadView(store, child.id), 0))
    expect(loads.get(child.id)).toBeUndefined()
  })

  it('is read from the rows when the views did not hear the fork being made', async () => {
    const { store, seqs } = recorded()
    const ports = sqlitePorts(store)
    const child = await fork(ports, sequentialIds(), 'ses_rec', seqs[30] as number)
    const { views, loads } = viewsOf(store)
    expect(asState(await views.read(child.id), 0)).toEqual(asState(loadView(store, child.id), 0))
    expect(loads.get(child.id)).toBe(1)
  })

  it('is read from the rows once the fork has more events of its own than a seed holds (64)', async () => {
    const { store, seqs } = recorded()
    const { views, loads, ports } = viewsOf(store)
    const child = await fork(ports, sequentialIds(), 'ses_rec', seqs[30] as number)
    for (let i = 0; i < 64; i++)
      executeNow(store, child.id, (s) => decideSession({ type: 'rename', title: `t${i}` }, s, child.id), {
        meta: { actor: 'user' },
      })
    const view = await views.read(child.id)
    expect(view.session?.title).toBe('t63')
    expect(asState(view, 0)).toEqual(asState(loadView(store, child.id), 0))
    expect(loads.get(child.id)).toBe(1)
  })
})
