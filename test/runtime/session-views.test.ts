import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { execute } from '../../src/commands/execute.js'
import { decideSession } from '../../src/commands/session.js'
import type { EventStore } from '../../src/events/store.js'
import { loadView } from '../../src/projections/queries/read-model.js'
import { openStore } from '../../src/projections/open.js'
import { SessionViews } from '../../src/runtime/loop/session-views.js'
import { executeNow } from '../support/execute-now.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'
import { sqliteLog } from '../../src/events/log.js'
import { sqliteReadModels } from '../../src/projections/read-models.js'

/**
 * The loop's views of sessions: always equal to the read model when read, and
 * a committed event costs a view nothing until it is read (or until enough
 * wait that holding them would cost memory).
 */
describe('session views', () => {
  let dir: string
  let store: EventStore
  let views: SessionViews
  const id = 'ses_views'

  const rename = (title: string) =>
    executeNow(store, id, (s) => decideSession({ type: 'rename', title }, s, id), { meta: { actor: 'user' } })

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'chronicle-views-'))
    store = openStore(join(dir, 'chronicle.db'))
    views = new SessionViews({ log: sqliteLog(store), readModels: sqliteReadModels(store) })
    await execute(
      sqlitePorts(store),
      id,
      (s) => decideSession({ type: 'create', directory: dir, agent: 'build', model: null }, s, id),
      {
        meta: { actor: 'user' },
      },
    )
  })
  afterEach(() => {
    views.close()
    store.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('equals the read model when read, however many commits came since', async () => {
    await views.read(id)
    for (const n of [1, 10, 300]) {
      for (let i = 0; i < n; i++) rename(`title ${n}/${i}`)
      expect(await views.read(id)).toEqual(loadView(store, id))
    }
  })

  it('folds what committed when the view is read, not as it commits', async () => {
    const held = await views.read(id)
    const before = held.session?.title
    rename('renamed')
    expect(held.session?.title).toBe(before)
    expect((await views.read(id)).session?.title).toBe('renamed')
    expect(held.session?.title).toBe('renamed') // the same view, brought up to date
  })

  it('folds as it goes once 256 events wait unread: what a view holds stays bounded', async () => {
    const held = await views.read(id)
    for (let i = 0; i < 256; i++) rename(`title ${i}`)
    expect(held.session?.title).toBe('title 255')
    rename('one more')
    expect(held.session?.title).toBe('title 255')
    expect(await views.read(id)).toEqual(loadView(store, id))
  })

  it('folds what commits while a view is being loaded, once, past the version the load read', async () => {
    const models = sqliteReadModels(store)
    // read models that answer late, as PostgreSQL's may: the view is the log as it was when asked
    const slow = {
      ...models,
      view: async (sessionId: string, opts?: { committed?: boolean }) => {
        const view = await models.view(sessionId, opts)
        rename('renamed while loading')
        return view
      },
    }
    const late = new SessionViews({ log: sqliteLog(store), readModels: slow })
    try {
      rename('before')
      const view = await late.read(id)
      expect(view.session?.title).toBe('renamed while loading')
      expect(view).toEqual(loadView(store, id))
    } finally {
      late.close()
    }
  })
})
