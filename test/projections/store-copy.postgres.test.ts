import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { checkChain } from '../../src/events/chain-check.js'
import { isChronicleError } from '../../src/events/errors.js'
import { PG_TYPES } from '../../src/events/postgres/log.js'
import type { EventStore } from '../../src/events/store.js'
import { storedRows } from '../../src/events/stored-rows.js'
import { foldSession } from '../../src/projections/fold/fold.js'
import { openStore } from '../../src/projections/open.js'
import { copyToPostgres } from '../../src/projections/postgres/copy.js'
import { rebuildPostgres } from '../../src/projections/postgres/rebuild.js'
import { openPostgresStore } from '../../src/projections/postgres/open.js'
import { foldAt } from '../../src/projections/postgres/projection.js'
import { pgLoadView } from '../../src/projections/postgres/read-models.js'
import { verifyPostgres } from '../../src/projections/postgres/verify.js'
import { loadView } from '../../src/projections/queries/read-model.js'
import { runInProcess } from '../cli/helpers.js'
import { usePostgres } from '../support/use-postgres.js'
import { play, stepsArb } from './histories.js'
import { conversation, fork, revert, plainView } from './scenarios.js'

/**
 * `chronicle store copy --to postgres://…`: a SQLite store moves into an empty
 * PostgreSQL database with the same seqs, versions, texts and hashes (so the
 * same head digest), its blobs, and read models that equal SQLite's and a
 * fold of the copied log; sessions read the same at every seq, and a fork
 * appended to both stores afterwards gets the same seq, hash and state.
 */
const postgres = usePostgres()
const meta = { actor: 'runtime' as const }
const cleanups: (() => void | Promise<void>)[] = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

function sqliteFile(): { store: EventStore; path: string } {
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-copy-'))
  const path = join(dir, 'chronicle.db')
  const store = openStore(path)
  cleanups.push(() => {
    store.close()
    rmSync(dir, { recursive: true, force: true })
  })
  return { store, path }
}

async function client(url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url, types: PG_TYPES })
  await c.connect()
  cleanups.push(() => c.end())
  return c
}

/** A store with forks, a revert, a part still streaming, a blob and a system stream. */
function history(store: EventStore): string[] {
  const { ends, messages } = conversation(store, 'ses_p', 6)
  fork(store, 'ses_f', 'ses_p', ends[3] as number)
  revert(store, 'ses_p', messages.slice(-4))
  fork(store, 'ses_e', 'ses_p', ends[5] as number)
  store.append(
    'ses_f',
    [
      {
        type: 'message.created',
        data: { messageId: 'msg_live', role: 'assistant', agent: 'build', model: 'scripted:x' },
      },
      { type: 'text.started', data: { messageId: 'msg_live', partId: 'prt_live' } },
      { type: 'text.delta', data: { partId: 'prt_live', text: 'still ' } },
      { type: 'text.delta', data: { partId: 'prt_live', text: 'streaming' } },
    ],
    { meta },
  )
  store.blobs.put('the system prompt, stored once')
  store.append(
    'sys_tokens',
    [
      {
        type: 'token.created',
        data: { tokenId: 'tok_1', name: 'ci', role: 'audit', salt: 'c2FsdA', hash: 'aGFzaA' },
      },
    ],
    { meta: { actor: 'user' } },
  )
  return ['ses_p', 'ses_f', 'ses_e']
}

/** The copy equals its source: every stored event byte for byte, the head digest, the blobs, and every session. */
async function expectSameStore(store: EventStore, db: pg.Client, sessions: readonly string[]): Promise<void> {
  const source = [...storedRows(store.asCommitted.reader())].map((r) => [r.seq, r.version, r.hash?.toString('hex')])
  const copied = (
    await db.query<{ seq: number; version: number; hash: Buffer }>('SELECT seq, version, hash FROM events ORDER BY seq')
  ).rows.map((r) => [r.seq, r.version, r.hash.toString('hex')])
  expect(copied).toEqual(source)
  const report = await verifyPostgres(db)
  expect(report.chain.breaks).toEqual([])
  expect(report.differences).toEqual([])
  expect(report.chain.head).toEqual(checkChain(store.asCommitted.reader()).head)
  for (const id of sessions) {
    expect(plainView(await pgLoadView(db, id))).toEqual(plainView(loadView(store, id)))
    // time travel: the state at each of the session's events
    for (const e of store.readSession(id))
      expect(plainView(await foldAt(db, id, e.seq))).toEqual(plainView(foldSession(store, id, e.seq)))
  }
}

describe('chronicle store copy', () => {
  it('copies a store with the same seqs, hashes and head digest; every session reads the same at every seq', async () => {
    const { store } = sqliteFile()
    const sessions = history(store)
    const url = await postgres().database()
    const report = await copyToPostgres(store, url)
    expect(report).toMatchObject({ events: store.head(), sessions: 3, blobs: 1, rechained: false })
    const db = await client(url)
    await expectSameStore(store, db, sessions)
    expect((await db.query('SELECT content FROM blobs')).rows).toEqual([{ content: 'the system prompt, stored once' }])
  }, 60_000)

  it('rebuild on PostgreSQL lays the read models out again as the appends did: a damaged table is read right again', async () => {
    const { store } = sqliteFile()
    const sessions = history(store)
    const url = await postgres().database()
    await copyToPostgres(store, url)
    const db = await client(url)
    const tables = async () => ({
      sessions: (await db.query('SELECT * FROM sessions ORDER BY id')).rows,
      messages: (await db.query('SELECT * FROM messages ORDER BY session_id, id')).rows,
      parts: (await db.query('SELECT * FROM parts ORDER BY session_id, id')).rows,
      inherits: (await db.query('SELECT * FROM inherits ORDER BY session_id')).rows,
      rewrites: (await db.query('SELECT * FROM rewrites ORDER BY session_id, version, id')).rows,
    })
    const projected = await tables()
    await db.query(
      "DELETE FROM messages WHERE session_id = 'ses_p'; UPDATE sessions SET data = '{}' WHERE id = 'ses_f'",
    )
    expect((await verifyPostgres(db)).differences.length).toBeGreaterThan(0)

    const report = await rebuildPostgres(url)
    expect(report).toMatchObject({ sessions: 3, events: store.head() - 1 }) // the token stream's event is no session's
    expect(await tables()).toEqual(projected)
    expect((await verifyPostgres(db)).differences).toEqual([])
    for (const id of sessions) expect(plainView(await pgLoadView(db, id))).toEqual(plainView(loadView(store, id)))
  }, 60_000)

  it('random histories copy exactly', async () => {
    await fc.assert(
      fc.asyncProperty(stepsArb(40), async (steps) => {
        const { store } = sqliteFile()
        const { sessions } = await play(store, steps)
        const url = await postgres().database()
        await copyToPostgres(store, url)
        await expectSameStore(store, await client(url), [...sessions])
        for (const c of cleanups.splice(0).reverse()) await c()
      }),
      { numRuns: 10, endOnFailure: true },
    )
  }, 300_000)

  it('a fork appended to the copy and to its source afterwards gets the same seq, hash and state on both', async () => {
    const { store } = sqliteFile()
    history(store)
    const url = await postgres().database()
    await copyToPostgres(store, url)
    const log = await openPostgresStore(url)
    cleanups.push(() => log.close())
    const at = Date.parse('2026-12-01T10:00:00Z')
    const event = [{ type: 'session.forked' as const, data: { from: { sessionId: 'ses_p', seq: 9 } } }]
    const [here] = store.append('ses_g', event, { meta, at })
    const [there] = await log.append('ses_g', event, { meta, at })
    expect(there).toEqual(here)
    const db = await client(url)
    expect((await db.query('SELECT hash FROM events WHERE seq = $1', [here?.seq])).rows[0]?.hash).toEqual(
      store.chainHead().hash,
    )
    expect(plainView(await pgLoadView(db, 'ses_g'))).toEqual(plainView(loadView(store, 'ses_g')))
    expect((await verifyPostgres(db)).differences).toEqual([])
  }, 60_000)

  it('refuses a database that already holds a log, and changes nothing there', async () => {
    const { store } = sqliteFile()
    history(store)
    const url = await postgres().database()
    await copyToPostgres(store, url)
    const db = await client(url)
    const before = (await db.query('SELECT seq, hash FROM log_head')).rows
    store.append('ses_p', [{ type: 'session.renamed', data: { title: 'later' } }], { meta })
    const second = await copyToPostgres(store, url).catch((err: unknown) => err)
    expect(isChronicleError(second, 'STORE_NOT_EMPTY')).toBe(true)
    expect((await db.query('SELECT seq, hash FROM log_head')).rows).toEqual(before)
    expect((await db.query('SELECT count(*)::int AS n FROM events')).rows[0]?.n).toBe(before[0]?.seq)
  }, 60_000)

  it('a copy that fails part way (an event the source cannot decode) leaves the target empty, to be copied again', async () => {
    const { store } = sqliteFile()
    history(store)
    // an edit behind the log's back: one late event's data no longer fits its schema
    store.asCommitted.reader().exec(`DROP TRIGGER event_log_no_update;
      UPDATE event_log SET data = '{"messageId": 7}' WHERE seq = (SELECT MAX(seq) - 3 FROM event_log)`)
    const url = await postgres().database()
    const failed = await copyToPostgres(store, url).catch((err: unknown) => err)
    expect(isChronicleError(failed, 'CORRUPT_EVENT')).toBe(true)
    const db = await client(url)
    expect((await db.query('SELECT seq FROM log_head')).rows).toEqual([{ seq: 0 }])
    for (const table of ['events', 'streams', 'sessions', 'messages', 'parts', 'blobs'])
      expect((await db.query(`SELECT count(*)::int AS n FROM ${table}`)).rows[0]?.n).toBe(0)
  }, 60_000)

  it('a log older than its hash chain is copied chained anew from its first event, and verifies', async () => {
    const { store } = sqliteFile()
    const sessions = history(store)
    // as a database from before SQLite schema migration 13 left it: its first events carry no hash
    store.asCommitted.reader().exec(`DROP TRIGGER event_log_no_update; DROP TRIGGER log_chain_from_fixed;
      UPDATE event_log SET hash = NULL WHERE seq < 5; UPDATE log_chain SET from_seq = 5`)
    expect(checkChain(store.asCommitted.reader()).unchained).toBe(4)
    const url = await postgres().database()
    expect((await copyToPostgres(store, url)).rechained).toBe(true)
    const db = await client(url)
    const report = await verifyPostgres(db)
    expect([report.chain.breaks, report.differences, report.chain.events]).toEqual([[], [], store.head()])
    for (const id of sessions) expect(plainView(await pgLoadView(db, id))).toEqual(plainView(loadView(store, id)))
  }, 60_000)

  it('from the command line: copies, verifies the copy, prints its head; refuses a second copy, names no password', async () => {
    const { store, path } = sqliteFile()
    history(store)
    const head = checkChain(store.asCommitted.reader()).head
    store.close()
    const data = join(path, '..')
    const url = await postgres().database()
    const env = { CHRONICLE_DATA_DIR: data, CHRONICLE_URL: 'http://127.0.0.1:9' }
    const copied = await runInProcess(['store', 'copy', '--to', url], env)
    expect([copied.code, copied.stderr]).toEqual([0, ''])
    expect(copied.stdout).toContain(`chain intact: ${head.seq} events; head ${head.seq}:${head.digest}`)
    expect(copied.stdout).toMatch(/^copied \d+ events of 3 sessions and 1 blobs to postgres:.* in \d+ ms\n/)
    expect(copied.stdout).toContain('3 sessions checked, 0 differences')
    const again = await runInProcess(['store', 'copy', '--to', url], env)
    expect(again.code).toBe(1)
    expect(again.stderr).toMatch(/already holds a log \(its head is seq \d+\)/)
    const secret = new URL(url)
    secret.password = 'hunter2'
    secret.port = '9'
    const unreachable = await runInProcess(['store', 'copy', '--to', secret.toString()], env)
    expect(unreachable.code).toBe(1)
    expect(unreachable.stderr).toMatch(/cannot connect to PostgreSQL/)
    expect(unreachable.stderr).not.toContain('hunter2')
    const usage = await runInProcess(['store', 'copy', '--to', 'mysql://x'], env)
    expect([usage.code, usage.stderr]).toEqual([2, expect.stringMatching(/store copy needs --to postgres:\/\//)])
  }, 60_000)
})
