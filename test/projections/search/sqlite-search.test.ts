import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { EventStore } from '../../../src/events/store.js'
import { openStore } from '../../../src/projections/open.js'
import { parseQuery } from '../../../src/projections/search/query.js'
import { createSqliteSearch, type SqliteSearch } from '../../../src/projections/search/sqlite-search.js'
import { assistant, created, input, model, streamed } from './helpers.js'

/**
 * SQLite's search as the server runs it: the index built by a real worker
 * thread reading the store's file while the store appends, each answer
 * saying how far the index has read.
 */

let dir: string
let store: EventStore
let search: SqliteSearch | undefined
afterEach(async () => {
  await search?.close()
  store.close()
  rmSync(dir, { recursive: true, force: true })
})

function open(startAfterMs = 60_000, debounceMs = 5): SqliteSearch {
  dir = mkdtempSync(join(tmpdir(), 'chronicle-search-worker-'))
  const source = join(dir, 'chronicle.db')
  store = openStore(source)
  search = createSqliteSearch({ store, source, path: join(dir, 'search.db'), startAfterMs, debounceMs })
  return search
}

describe('SQLite search with its worker', () => {
  it('a search starts the worker, waits for the index to reach the head, and says so', async () => {
    const s = open()
    store.append('ses_1', [created('worker spec'), input('in_1', [{ type: 'text', text: 'a flaky test' }])], {
      meta: { actor: 'user' },
    })
    const page = await s.search(parseQuery('flaky'), { waitMs: 30_000 })
    expect(page).toEqual({
      hits: [expect.objectContaining({ session: 'ses_1', key: 'in_1', seq: 2, snippet: 'a flaky test' })],
      indexedThrough: 2,
      head: 2,
    })
  })

  it('what is appended after the worker started is indexed as it commits, a run at a time', async () => {
    const s = open()
    store.append('ses_1', [created()], { meta: { actor: 'user' } })
    expect(await s.caughtUp(1, 30_000)).toBe(true)
    for (let i = 0; i < 20; i++)
      store.append('ses_1', [input(`in_${i}`, [{ type: 'text', text: `message number${i}` }])], {
        meta: { actor: 'user' },
      })
    store.append('ses_1', [assistant, ...streamed('text', 'prt_1', ['streamed ', 'answer'])], { meta: model })
    expect(await s.caughtUp(store.head(), 30_000)).toBe(true)
    expect(s.position).toBe(store.head())
    expect((await s.search(parseQuery('number7'))).hits.map((h) => h.key)).toEqual(['in_7'])
    expect((await s.search(parseQuery('streamed answer'))).hits.map((h) => h.key)).toEqual(['prt_1'])
  })

  it('the worker starts by itself after startAfterMs, with no search', async () => {
    const s = open(10)
    store.append('ses_1', [created('x')], { meta: { actor: 'user' } })
    const deadline = Date.now() + 30_000
    while (s.position < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
    expect(s.position).toBe(1)
  })

  it('an answer that could not wait says how far the index is behind', async () => {
    const s = open(60_000, 60_000) // the worker indexes the log's growth only a minute after it hears of it
    store.append('ses_1', [created('x')], { meta: { actor: 'user' } })
    await s.caughtUp(1, 30_000)
    const before = s.position
    store.append('ses_1', [input('in_1', [{ type: 'text', text: 'late' }])], { meta: { actor: 'user' } })
    const page = await s.search(parseQuery('late'), { waitMs: 0 })
    expect(page.head).toBe(2)
    expect(page.indexedThrough).toBe(before)
    expect(page.hits).toEqual([])
  })
})
