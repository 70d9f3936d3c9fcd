import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { unconfined } from '../../src/tools/sandbox.js'
import { STORE_LOST_MESSAGE } from '../../src/runtime/recovery/outage.js'
import { usePostgres } from '../support/use-postgres.js'
import { Client, closedAfterEach, type Frame, type TestServer } from './helpers.js'

/**
 * PostgreSQL lost while the server runs (docs/ARCHITECTURE.md "PostgreSQL lost while serving"): the whole
 * server on a real PostgreSQL that is killed (`pg_ctl stop -m immediate`) and started again under it. What
 * cannot commit is not acknowledged — HTTP and WebSocket clients are told STORE_UNAVAILABLE —, a run pauses
 * rather than fails and goes on by itself once the database is back, a subscription that could not read
 * the log resumes, and nothing acknowledged is lost.
 */

const postgres = usePostgres()

const opened = closedAfterEach()

const STORY =
  'Once upon a time there was an append-only log, and every delta the model streamed became an event of it. ' +
  'One night its database went away without a word; the server kept the run open and waited, and when the ' +
  'database came back it read the log again, closed what had been cut off and carried on. The end.'

const script = join(mkdtempSync(join(tmpdir(), 'chronicle-store-lost-')), 'script.json')
writeFileSync(
  script,
  JSON.stringify({
    chunkSize: 4,
    delayMs: 8,
    steps: [
      { when: { userContains: '#story' }, text: STORY },
      {
        when: { userContains: '#job', afterToolResult: false },
        text: 'Running the job.',
        toolCalls: [
          {
            name: 'bash',
            input: {
              command: 'printf "s\\n" >> job.started && sleep 1 && printf "w\\n" >> job.marker',
              description: 'job',
            },
          },
        ],
      },
      { when: { userContains: '#job', afterToolResult: true }, text: 'The job is done (or was cut off).' },
      { when: {}, text: 'Hello.' },
    ],
  }),
)

const serve = (url: string) =>
  opened.serve(
    { CHRONICLE_DATABASE_URL: url, CHRONICLE_MODEL: `scripted:${script}` },
    {
      config: { rules: [{ permission: 'bash', pattern: '*', action: 'allow' }] },
      options: { sandbox: unconfined('off') },
    },
  )

type Wire = Frame & {
  seq: number
  version: number
  session: string
  event: { type: string; data: Record<string, unknown> }
}

const isEvent = (type: string) => (f: Frame) => f.type === 'event' && (f as Wire).event.type === type

async function newSession(client: Client, directory: string): Promise<string> {
  const created = await client.call('session.create', { directory })
  return (created.result as { session: { id: string } }).session.id
}

/** Asks until the store answers again (a new connection each time: the pool reconnects by itself). */
async function untilAnswered(call: () => Promise<Frame>): Promise<Frame> {
  for (let i = 0; i < 100; i++) {
    const reply = await call()
    if ((reply.error as { code?: string } | undefined)?.code !== 'STORE_UNAVAILABLE') return reply
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error('the store never answered again')
}

/** Every event of the session as the log holds it, read by a fresh subscriber after the fact. */
async function logged(server: TestServer, session: string): Promise<Wire[]> {
  const reader = opened.track(await Client.connect(server.wsUrl, server.token))
  await reader.call('subscribe', { sessions: [session], after: 0 })
  await reader.wait((f) => f.type === 'caught-up')
  return reader.events() as Wire[]
}

describe('PostgreSQL lost while the server runs', () => {
  it('answers STORE_UNAVAILABLE over HTTP and WebSocket while it is down, acknowledging nothing; serves again once it is back', async () => {
    const database = await postgres().database()
    const { server, client } = await serve(database)
    const session = await newSession(client, server.dir)
    await postgres().crash()

    const submit = { session, inputId: 'in_while_down', parts: [{ type: 'text', text: 'hi' }] }
    const refused = await client.call('input.submit', submit)
    expect(refused.result).toBeUndefined()
    expect(refused.error).toMatchObject({ code: 'STORE_UNAVAILABLE' })
    expect((refused.error as { message: string }).message).toMatch(/^the PostgreSQL event store is unavailable: /)
    const http = await fetch(`${server.url}/sessions/${session}`, {
      headers: { authorization: `Bearer ${server.token}` },
    })
    expect(http.status).toBe(503)
    expect(http.headers.get('content-type')).toMatch(/^application\/problem\+json/)
    expect(await http.json()).toMatchObject({ code: 'STORE_UNAVAILABLE', status: 503 })

    await postgres().restart()
    // the same server, no restart of its own: the same input now accepted, once
    const accepted = await untilAnswered(() => client.call('input.submit', submit))
    expect(accepted.result).toMatchObject({ duplicate: false })
    await client.call('subscribe', { sessions: [session], after: 0 })
    await client.wait(isEvent('run.finished'), 20_000)
    const events = await logged(server, session)
    expect(events.filter((e) => e.event.type === 'input.accepted').map((e) => e.event.data['inputId'])).toEqual([
      'in_while_down',
    ])
    expect(events.find((e) => e.event.type === 'run.finished')?.event.data['outcome']).toBe('idle')
    const again = await fetch(`${server.url}/sessions/${session}`, {
      headers: { authorization: `Bearer ${server.token}` },
    })
    expect(again.status).toBe(200)
  })

  it('pauses a run that loses the database mid-stream and finishes it once it is back: no run fails, the subscriber misses nothing', async () => {
    const database = await postgres().database()
    const { server, client } = await serve(database)
    const session = await newSession(client, server.dir)
    await client.call('subscribe', { sessions: [session], after: 0 })
    const ack = await client.call('input.submit', {
      session,
      inputId: 'in_story',
      parts: [{ type: 'text', text: '#story' }],
    })
    const ackSeq = (ack.result as { seq: number }).seq
    await client.wait((f) => client.events().filter((e) => (e as Wire).event.type === 'text.delta').length >= 5 && !!f)
    await postgres().crash()
    await new Promise((r) => setTimeout(r, 1_000)) // the model's stream ends meanwhile: the run is paused, not ended
    expect(client.frames.some(isEvent('run.finished'))).toBe(false)
    await postgres().restart()

    const finished = (await client.wait(isEvent('run.finished'), 30_000)) as Wire
    expect(finished.event.data).toMatchObject({ outcome: 'idle' })
    expect(finished.event.data['error']).toBeUndefined()
    const events = await logged(server, session)
    // the live subscriber heard every event of the session once, in order — the very events the log holds
    const live = client.events() as Wire[]
    expect(live.map((e) => e.seq)).toEqual(events.map((e) => e.seq))
    expect(events.map((e) => e.version)).toEqual(events.map((_, i) => i + 1))
    // the acknowledged input is there once, at the seq it was acknowledged at
    expect(events.filter((e) => e.event.type === 'input.accepted').map((e) => e.seq)).toEqual([ackSeq])
    // the cut-off message was closed with the outage's error; the run went on and told the whole story
    const completed = events.filter((e) => e.event.type === 'message.completed').map((e) => e.event.data)
    expect(completed).toHaveLength(2)
    expect(completed[0]).toMatchObject({ error: { message: STORE_LOST_MESSAGE } })
    expect(completed[1]?.['error']).toBeUndefined()
    expect(events.filter((e) => e.event.type === 'run.started')).toHaveLength(1)
    expect(events.filter((e) => e.event.type === 'run.finished')).toHaveLength(1)
    const state = await client.call('session.state', { session })
    const parts = (state.result as { parts: { type: string; text?: string; messageId: string }[] }).parts
    const lastMessage = completed[1]?.['messageId']
    expect(parts.filter((p) => p.type === 'text' && p.messageId === lastMessage).map((p) => p.text)).toEqual([STORY])
  })

  it('fails a tool call cut off by the outage as interrupted, never re-runs it, and goes on', async () => {
    const database = await postgres().database()
    const { server, client } = await serve(database)
    const session = await newSession(client, server.dir)
    await client.call('subscribe', { sessions: [session], after: 0 })
    await client.call('input.submit', { session, parts: [{ type: 'text', text: '#job' }] })
    await client.wait(isEvent('tool.called'), 20_000)
    for (let i = 0; i < 200 && !existsSync(join(server.dir, 'job.started')); i++)
      await new Promise((r) => setTimeout(r, 10))
    await postgres().crash() // the job is sleeping: its completion cannot be recorded
    await new Promise((r) => setTimeout(r, 1_500))
    await postgres().restart()

    const finished = (await client.wait(isEvent('run.finished'), 30_000)) as Wire
    expect(finished.event.data).toMatchObject({ outcome: 'idle' })
    const events = await logged(server, session)
    const ends = events
      .filter((e) => e.event.type === 'tool.completed' || e.event.type === 'tool.failed')
      .map((e) => ({ type: e.event.type, error: e.event.data['error'] }))
    expect(ends).toEqual([{ type: 'tool.failed', error: { kind: 'interrupted', message: STORE_LOST_MESSAGE } }])
    // it ran once (its outcome unknown to the log), and was not run again
    expect(readFileSync(join(server.dir, 'job.started'), 'utf8')).toBe('s\n')
    expect(readFileSync(join(server.dir, 'job.marker'), 'utf8')).toBe('w\n')
    expect(events.at(-1)?.event.type).toBe('run.finished')
  })

  it('a live subscriber is not left silent: a new subscribe is told STORE_UNAVAILABLE, the open one hears what commits once it is back', async () => {
    const database = await postgres().database()
    const { server, client } = await serve(database)
    const session = await newSession(client, server.dir)
    await client.call('subscribe', { sessions: [session], after: 0 })
    await client.call('input.submit', { session, parts: [{ type: 'text', text: 'hello' }] })
    await client.wait(isEvent('run.finished'), 20_000)

    await postgres().crash()
    const late = opened.track(await Client.connect(server.wsUrl, server.token))
    const refused = await late.call('subscribe', { sessions: [session], after: 0 })
    expect(refused.error).toMatchObject({ code: 'STORE_UNAVAILABLE' })
    await postgres().restart()

    await untilAnswered(() =>
      client.call('input.submit', { session, inputId: 'in_after', parts: [{ type: 'text', text: 'again' }] }),
    )
    await client.wait(
      (f) => client.events().filter((e) => (e as Wire).event.type === 'run.finished').length === 2 && !!f,
      20_000,
    )
    const events = await logged(server, session)
    expect((client.events() as Wire[]).map((e) => e.seq)).toEqual(events.map((e) => e.seq))
  })
})
