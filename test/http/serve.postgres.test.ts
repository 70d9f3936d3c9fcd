import { existsSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { DB_FILE } from '../../src/data-dir.js'
import { usePostgres } from '../support/use-postgres.js'
import { closedAfterEach } from './helpers.js'

/**
 * `serve` on PostgreSQL (docs/ARCHITECTURE.md "The store port"): the whole server — HTTP, WebSocket,
 * runtime, recovery — with CHRONICLE_DATABASE_URL naming a real server, and no SQLite store made.
 */

const postgres = usePostgres()

const opened = closedAfterEach()

/** the scripted model's reply to every prompt */
const script = join(mkdtempSync(join(tmpdir(), 'chronicle-serve-pg-')), 'script.json')
writeFileSync(script, JSON.stringify({ steps: [{ when: {}, text: 'Hello from PostgreSQL.' }] }))

const serve = (url: string) => opened.serve({ CHRONICLE_DATABASE_URL: url, CHRONICLE_MODEL: `scripted:${script}` })

type Wire = { seq: number; session: string; event: { type: string } }

describe('serve on PostgreSQL', () => {
  it('runs a turn streamed over WebSocket without a gap; a second server on the database resumes from a seq; no SQLite file is made', async () => {
    const url = await postgres().database()
    const first = await serve(url)
    const { client } = first
    const created = await client.call('session.create', { directory: first.server.dir })
    const session = (created.result as { session: { id: string } }).session.id
    await client.call('subscribe', { sessions: [session], after: 0 })
    await client.call('input.submit', { session, parts: [{ type: 'text', text: 'hi' }] })
    await client.wait((f) => f.type === 'event' && (f as unknown as Wire).event.type === 'run.finished', 20_000)
    const events = client.events() as unknown as Wire[]
    const seqs = events.map((e) => e.seq)
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b))
    expect(new Set(seqs).size).toBe(seqs.length)
    const types = events.map((e) => e.event.type)
    expect(types[0]).toBe('session.created')
    expect(types).toContain('text.delta')
    expect(types.at(-1)).toBe('run.finished')
    expect(existsSync(join(first.server.dir, 'data', DB_FILE))).toBe(false)

    // search answers from the index in the same database; backups are SQLite's file copies: they say so
    const found = (await client.call('search', { q: 'hello postgresql' })).result as {
      hits: { session: string; type: string }[]
    }
    expect(found.hits.map((h) => [h.session, h.type])).toEqual([[session, 'text']])
    expect((await client.call('store.backup', { out: join(first.server.dir, 'backup') })).error).toMatchObject({
      code: 'NOT_IMPLEMENTED',
    })

    const middle = seqs[Math.floor(seqs.length / 2)] as number
    const last = seqs.at(-1) as number
    await first.server.close()
    opened.untrack(first.server)

    const second = await serve(url)
    const listed = await second.client.call('session.list', {})
    expect((listed.result as { sessions: { id: string }[] }).sessions.map((s) => s.id)).toEqual([session])
    await second.client.call('subscribe', { sessions: [session], after: middle })
    await second.client.wait(
      (f) => f.type === 'caught-up' || (f.type === 'event' && (f as { seq?: number }).seq === last),
    )
    const resumed = (second.client.events() as unknown as Wire[]).map((e) => e.seq)
    // every event the first subscriber saw after `middle`, in order, then what the first server appended after
    // run.finished (the session's title) before it closed: no gap, no duplicate
    const tail = seqs.filter((s) => s > middle)
    expect(resumed.slice(0, tail.length)).toEqual(tail)
    expect(resumed.every((seq, i) => i === 0 || seq > (resumed[i - 1] as number))).toBe(true)
  })
})
