import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { sqliteLog } from '../../src/events/log.js'
import { sequentialIds } from '../../src/events/ids.js'
import { openStore } from '../../src/projections/open.js'
import { openPostgresStore } from '../../src/projections/postgres/open.js'
import { postgresPorts, type StorePorts, sqlitePorts } from '../../src/projections/store-ports.js'
import { importSessions } from '../../src/projections/transfer/export.js'
import { verifyPostgres } from '../../src/projections/postgres/verify.js'
import { verify } from '../../src/projections/upkeep/verify.js'
import { runInProcess } from '../cli/helpers.js'
import { Client, closedAfterEach, startServer, writeHelloScript } from '../http/helpers.js'
import { usePostgres } from '../support/use-postgres.js'

/**
 * Export and import on PostgreSQL (docs/TIME-TRAVEL.md "Export and import"):
 * a fork exported over HTTP from a server on a real PostgreSQL, imported by
 * `chronicle import` into another PostgreSQL database (through the log port,
 * in one transaction), then served there read-only — its history, its state
 * at any seq, a fork of it with a directory that runs. The same file imported
 * into SQLite and into PostgreSQL reads the same at every seq; a malformed one
 * appends nothing.
 */

const postgres = usePostgres()
const dir = mkdtempSync(join(tmpdir(), 'chronicle-import-pg-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const script = join(dir, 'script.json')
writeHelloScript(script, 'Noted.')

const opened = closedAfterEach()

async function serve(database: string) {
  const server = opened.track(
    await startServer({ CHRONICLE_DATABASE_URL: database, CHRONICLE_MODEL: `scripted:${script}` }),
  )
  writeFileSync(join(server.dir, 'hello.txt'), 'hello from the file\n')
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${server.token}`,
        ...(body !== undefined && { 'content-type': 'application/json' }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    })
    const text = await res.text()
    return {
      status: res.status,
      text,
      body: /^application\/(problem\+)?json/.test(res.headers.get('content-type') ?? '') ? JSON.parse(text) : {},
    }
  }
  return { server, call }
}

type Event = { seq: number; type: string }

/** A session with a turn that reads a file, forked at the read's result, the fork's own turn run: its export. */
async function exported(database: string): Promise<{ fork: string; file: string }> {
  const { server, call } = await serve(database)
  const id = (await call('POST', '/sessions', { directory: server.dir })).body.session.id as string
  await call('POST', `/sessions/${id}/inputs?wait=true`, { parts: [{ type: 'text', text: 'what is in hello.txt?' }] })
  const events = (await call('GET', `/sessions/${id}/events?limit=5000`)).body.events as Event[]
  const at = events.find((e) => e.type === 'tool.completed')?.seq as number
  const fork = (await call('POST', `/sessions/${id}/fork`, { at, files: false })).body.session.id as string
  await call('POST', `/sessions/${fork}/inputs?wait=true`, { parts: [{ type: 'text', text: 'and then?' }] })
  const res = await call('GET', `/sessions/${fork}/export`)
  expect(res.status).toBe(200)
  const file = join(dir, `${fork}.jsonl`)
  writeFileSync(file, res.text)
  await server.close()
  opened.untrack(server)
  return { fork, file }
}

describe('export and import on PostgreSQL', () => {
  it('a fork exported over HTTP imports by `chronicle import` into another database; a server there serves it read-only, time-travels it and forks it with a directory', async () => {
    const { fork, file } = await exported(await postgres().database())
    const target = await postgres().database()
    const env = {
      CHRONICLE_DATABASE_URL: target,
      CHRONICLE_DATA_DIR: join(dir, 'cli'),
      CHRONICLE_URL: 'http://127.0.0.1:9',
    }

    const bad = join(dir, 'bad.jsonl')
    writeFileSync(bad, `${(await import('node:fs')).readFileSync(file, 'utf8')}{"seq": 7,\n`)
    const refused = await runInProcess(['import', bad], env)
    expect([refused.code, refused.stdout]).toEqual([1, ''])
    expect(refused.stderr).toMatch(/import line \d+: not JSON; nothing was imported/)

    const imported = await runInProcess(['import', file], env)
    expect([imported.code, imported.stderr.includes('verify found')]).toEqual([0, false])
    const lines = imported.stdout.trimEnd().split('\n')
    const mapping = new Map(lines.slice(0, -1).map((l) => l.split(' → ') as [string, string]))
    expect(mapping.size).toBe(2) // the fork and its parent, whose prefix the fork's history needs
    const id = mapping.get(fork) as string
    expect(lines.at(-1)).toMatch(
      new RegExp(`^imported ${fork} as ${id}: \\d+ events appended, 2 new sessions, read-only \\(fork one`),
    )

    const { server, call } = await serve(target)
    const session = (await call('GET', `/sessions/${id}`)).body.session
    expect(session).toMatchObject({ id, imported: { originalId: fork }, status: 'idle' })
    const input = await call('POST', `/sessions/${id}/inputs`, { parts: [{ type: 'text', text: 'go on' }] })
    expect([input.status, input.body.code]).toEqual([409, 'SESSION_READ_ONLY'])

    // its history and its state at any seq, as the source had them: the same turns, renumbered
    const events = (await call('GET', `/sessions/${id}/events?limit=5000`)).body.events as Event[]
    // a fork's history: its parent's prefix, then its own events from session.forked, the import's marker last
    const forked = events.find((e) => e.type === 'session.forked') as Event
    expect(events.map((e) => e.type).at(0)).toBe('session.created')
    expect(events.map((e) => e.type).at(-1)).toBe('session.imported')
    const state = (seq?: number) => call('GET', `/sessions/${id}/state${seq === undefined ? '' : `?at=${seq}`}`)
    const last = (await state()).body as { messages: { role: string }[]; parts: { type: string; text?: string }[] }
    // the fork at the read's result: the read's call and result, then the fork's own turn (not the parent's answer)
    expect(last.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant'])
    expect(last.parts.filter((p) => p.type === 'text').map((p) => p.text)).toEqual([
      'what is in hello.txt?',
      'and then?',
      'Noted.',
    ])
    const atFork = (await state(forked.seq)).body as { messages: unknown[] }
    expect(atFork.messages).toHaveLength(2) // the parent's, up to the read's result

    // over the socket too, and a fork of it with a directory runs
    const ws = await Client.connect(server.wsUrl, server.token)
    try {
      expect((await ws.call('session.fork', { session: id, at: events.at(-1)?.seq })).error).toMatchObject({
        code: 'DIRECTORY_REQUIRED',
      })
      const workspace = join(dir, 'workspace')
      mkdirSync(workspace, { recursive: true })
      writeFileSync(join(workspace, 'hello.txt'), 'hello again\n')
      const child = await ws.call('session.fork', { session: id, at: events.at(-1)?.seq, directory: workspace })
      const childId = (child.result as { session: { id: string } }).session.id
      expect(child.result).toMatchObject({
        session: { directory: workspace, rules: [], forkedFrom: { sessionId: id } },
      })
      const ran = await call('POST', `/sessions/${childId}/inputs?wait=true`, {
        parts: [{ type: 'text', text: 'one more' }],
      })
      expect(ran.status).toBe(200)
      const after = (await call('GET', `/sessions/${childId}/state`)).body as { messages: unknown[] }
      expect(after.messages).toHaveLength(6)
    } finally {
      ws.close()
    }
  }, 120_000)

  it('the same file imported into SQLite and into PostgreSQL reads the same at every seq, and verifies', async () => {
    const { file } = await exported(await postgres().database())
    const jsonl = (await import('node:fs')).readFileSync(file, 'utf8')
    const sqlite = openStore(':memory:')
    const log = await openPostgresStore(await postgres().database())
    try {
      const here = await importSessions(sqliteLog(sqlite), sequentialIds(), jsonl)
      const there = await importSessions(log, sequentialIds(), jsonl)
      // both stores were empty and drew the same ids: the same sessions at the same seqs
      expect([...there.seqs]).toEqual([...here.seqs])
      expect([...there.ids]).toEqual([...here.ids])
      expect(there.appended).toBe(here.appended)
      const a = sqlitePorts(sqlite).timeTravel
      const b = postgresPorts(log).timeTravel
      for (const { sessionId } of here.sessions) {
        const seqs = (await sqlitePorts(sqlite).log.readSession(sessionId)).map((e) => e.seq)
        // the file's events, as the file has them (its marker's time is each import's own)
        for (const seq of seqs.slice(0, -1))
          expect(await b.stateAt(sessionId, seq)).toEqual(await a.stateAt(sessionId, seq))
        const view = async (ports: StorePorts) => {
          const { session, ...rest } = await ports.readModels.view(sessionId)
          return { ...rest, session: session && { ...session, updatedAt: 'the import' } }
        }
        expect(await view(postgresPorts(log))).toEqual(await view(sqlitePorts(sqlite)))
      }
      // and each store's chain and read models check against its log
      const checked = [verify(sqlite), await verifyPostgres(await log.reader())]
      expect(checked.map((r) => [r.chain.breaks.length, r.differences.length])).toEqual([
        [0, 0],
        [0, 0],
      ])
    } finally {
      sqlite.close()
      await log.close()
    }
  }, 120_000)
})
