import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { PG_TYPES, type PostgresEventLog } from '../../../src/events/postgres/log.js'
import { openPostgresStore } from '../../../src/projections/postgres/open.js'
import {
  createPostgresIndexer,
  dumpPostgresIndex,
  ensurePostgresIndex,
} from '../../../src/projections/search/postgres-index.js'
import { createPostgresSearch, type PostgresSearch } from '../../../src/projections/search/postgres-search.js'
import { rebuildPostgresIndex, verifyPostgresIndex } from '../../../src/projections/search/postgres-upkeep.js'
import { parseQuery } from '../../../src/projections/search/query.js'
import { usePostgres } from '../../support/use-postgres.js'
import { assistant, created, input, model, streamed, toolCall } from './helpers.js'

/**
 * PostgreSQL's search as the server runs it: the index in the store's
 * database, built by an indexer on its own connection while the store
 * appends; indexers of two servers taking turns on one database; `rebuild`
 * and `verify` of the index.
 */

const server = usePostgres()
let url: string
let log: PostgresEventLog
const opened: { end(): Promise<void> }[] = []
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.end()
  await log.close()
})

async function setup(): Promise<void> {
  url = await server().database()
  log = await openPostgresStore(url)
}
function search(startAfterMs = 60_000, debounceMs = 5): PostgresSearch {
  const s = createPostgresSearch({ log, url, startAfterMs, debounceMs })
  opened.push({ end: () => s.close() })
  return s
}
async function client(): Promise<pg.Client> {
  const db = new pg.Client({ connectionString: url, types: PG_TYPES })
  await db.connect()
  opened.push(db)
  return db
}
const user = { meta: { actor: 'user' as const } }

/** Two sessions: inputs, a streamed answer, a tool called and completed, a rename. */
async function corpus(): Promise<void> {
  await log.append('ses_1', [created('first'), input('in_1', [{ type: 'text', text: 'a flaky test' }])], user)
  await log.append('ses_1', [assistant, ...streamed('text', 'prt_1', ['the clock ', 'races ', 'the login'])], {
    meta: model,
  })
  await log.append('ses_1', [toolCall('prt_2', 'bash', { command: 'rm -rf build' })], { meta: model })
  await log.append('ses_1', [{ type: 'tool.completed', data: { partId: 'prt_2', output: 'removed' } }], {
    meta: { actor: 'tool' },
  })
  await log.append('ses_2', [created(), input('in_2', [{ type: 'text', text: 'another café' }])], user)
  await log.append('ses_2', [{ type: 'session.renamed', data: { title: 'renamed' } }], user)
}

describe('PostgreSQL search as the server runs it', () => {
  it('a search starts the indexer, waits for the index to reach the head, and says so', async () => {
    await setup()
    const s = search()
    await log.append('ses_1', [created('pg spec'), input('in_1', [{ type: 'text', text: 'a flaky test' }])], user)
    const page = await s.search(parseQuery('flaky'), { waitMs: 30_000 })
    expect(page).toEqual({
      hits: [expect.objectContaining({ session: 'ses_1', key: 'in_1', seq: 2, snippet: 'a flaky test' })],
      indexedThrough: 2,
      head: 2,
    })
  })

  it('what is appended after the indexer started is indexed as it commits', async () => {
    await setup()
    const s = search()
    await log.append('ses_1', [created()], user)
    expect(await s.caughtUp(1, 30_000)).toBe(true)
    for (let i = 0; i < 20; i++)
      await log.append('ses_1', [input(`in_${i}`, [{ type: 'text', text: `message number${i}` }])], user)
    await log.append('ses_1', [assistant, ...streamed('text', 'prt_1', ['streamed ', 'answer'])], { meta: model })
    expect(await s.caughtUp(await log.head(), 30_000)).toBe(true)
    expect(s.position).toBe(await log.head())
    expect((await s.search(parseQuery('number7'))).hits.map((h) => h.key)).toEqual(['in_7'])
    expect((await s.search(parseQuery('streamed answer'))).hits.map((h) => h.key)).toEqual(['prt_1'])
    // diacritics folded, as SQLite's unicode61 folds them
    await log.append('ses_1', [input('in_x', [{ type: 'text', text: 'un café crème' }])], user)
    expect((await s.search(parseQuery('cafe creme'))).hits.map((h) => h.key)).toEqual(['in_x'])
  })

  it('the indexer starts by itself after startAfterMs, with no search', async () => {
    await setup()
    const s = search(10)
    await log.append('ses_1', [created('x')], user)
    const deadline = Date.now() + 30_000
    while (s.position < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
    expect(s.position).toBe(1)
  })

  it('two indexers on one database take turns; a part streaming across their turns is indexed whole', async () => {
    await setup()
    const [a, b] = [await client(), await client()]
    await ensurePostgresIndex(a)
    await log.append(
      'ses_1',
      [created(), assistant, { type: 'text.started', data: { messageId: 'msg_2', partId: 'prt_1' } }],
      {
        meta: model,
      },
    )
    await log.append('ses_1', [{ type: 'text.delta', data: { partId: 'prt_1', text: 'begun by one ' } }], {
      meta: model,
    })
    expect(await createPostgresIndexer().catchUp(a)).toBe(4)
    await log.append('ses_1', [{ type: 'text.delta', data: { partId: 'prt_1', text: 'ended by another' } }], {
      meta: model,
    })
    await log.append('ses_1', [{ type: 'text.ended', data: { partId: 'prt_1' } }], { meta: model })
    // while a holds the position's row, b does not wait for it: it says so and tries again later
    await a.query('BEGIN')
    await a.query('SELECT 1 FROM search_meta FOR UPDATE')
    const other = createPostgresIndexer()
    expect(await other.catchUp(b)).toBeUndefined()
    await a.query('COMMIT')
    expect(await other.catchUp(b)).toBe(6)
    const { docs } = await dumpPostgresIndex(b)
    expect(JSON.parse(docs.get('ses_1 prt_1') as string)[10]).toBe('begun by one ended by another')
  })

  it('rebuild gives the index built commit by commit, a few seqs at a time; verify finds it clean', async () => {
    await setup()
    const db = await client()
    await ensurePostgresIndex(db)
    const indexer = createPostgresIndexer('public', 2)
    await log.append('ses_0', [created('start')], user)
    await indexer.catchUp(db)
    await corpus()
    await indexer.catchUp(db)
    const live = await dumpPostgresIndex(db)
    expect([...live.docs.keys()]).toEqual([
      'ses_0 title',
      'ses_1 title',
      'ses_1 in_1',
      'ses_1 prt_1',
      'ses_1 prt_2',
      'ses_2 in_2',
      'ses_2 title',
    ])
    const rebuilt = await rebuildPostgresIndex(url)
    expect(rebuilt).toMatchObject({ events: await log.head(), documents: 7 })
    expect(await dumpPostgresIndex(db)).toEqual(live)
    expect(await verifyPostgresIndex(url)).toEqual({
      present: true,
      position: await log.head(),
      head: await log.head(),
      documents: 7,
      differences: [],
    })
  })

  it('verify names a document whose text or words were changed, one missing, a session changed', async () => {
    await setup()
    await corpus()
    await rebuildPostgresIndex(url)
    const db = await client()
    await db.query(`UPDATE search_docs SET text = 'forged' WHERE key = 'in_1'`)
    await db.query(`UPDATE search_docs SET words = to_tsvector('simple', 'forged') WHERE key = 'prt_1'`)
    await db.query(`DELETE FROM search_docs WHERE key = 'in_2'`)
    await db.query(`UPDATE search_sessions SET archived = true WHERE session_id = 'ses_2'`)
    const { differences } = await verifyPostgresIndex(url)
    expect(differences.map((d) => d.replace(/: .*/, ''))).toEqual([
      'session ses_2',
      'document ses_1 in_1',
      'document ses_1 prt_1',
      'document ses_2 in_2',
    ])
  })

  it('no index at all is not a difference: the server builds it when it starts', async () => {
    await setup()
    await corpus()
    expect(await verifyPostgresIndex(url)).toEqual({
      present: false,
      position: 0,
      head: await log.head(),
      documents: 0,
      differences: [],
    })
  })
})
