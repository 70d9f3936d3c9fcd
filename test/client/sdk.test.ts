import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { ApiError, ChronicleHttp, ChronicleSocket, type EventFrame, type SocketStatus } from '../../src/client/index.js'
import { loadConfig } from '../../src/config.js'
import { createChronicle, type Chronicle } from '../../src/main.js'

/**
 * The SDK (`chronicle/client`) against a real listening server: the protocol
 * over HTTP and WebSocket, and a subscription that survives a server restart
 * with every event delivered once.
 */

const SCRIPT = {
  chunkSize: 4,
  steps: [
    { when: { userContains: 'quick' }, text: 'A quick answer.' },
    { when: { userContains: 'slow' }, delayMs: 15, text: 'a slow answer that streams for a while '.repeat(6) },
  ],
}

let dir: string
let port = 0
let chronicle: Chronicle
let url: string
let token: string

async function start(): Promise<void> {
  const config = loadConfig({
    env: {
      CHRONICLE_DATA_DIR: join(dir, 'data'),
      CHRONICLE_PORT: String(port),
      CHRONICLE_MODEL: `scripted:${join(dir, 'script.json')}`,
    },
    cwd: dir,
    configPath: false,
  })
  const quiet = new Writable({ write: (_c, _e, done) => done() })
  chronicle = await createChronicle({ ...config, titles: false }, { logDestination: quiet, directory: dir })
  url = await chronicle.start()
  port = Number(new URL(url).port)
  token = chronicle.token.token
}

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'chronicle-sdk-'))
  writeFileSync(join(dir, 'script.json'), JSON.stringify(SCRIPT))
  port = 0
  await start()
})

afterEach(async () => {
  await chronicle.stop()
  rmSync(dir, { recursive: true, force: true })
})

describe('ChronicleHttp', () => {
  it('calls the protocol’s methods over their routes', async () => {
    const http = new ChronicleHttp({ url, token })
    expect(await http.health()).toMatchObject({ status: 'ok' })
    expect(await http.call('whoami', {})).toMatchObject({ role: 'admin' })
    const { session } = await http.call('session.create', { directory: dir, title: 'sdk' })
    expect(session.title).toBe('sdk')
    const answer = await http.submitAndWait({ session: session.id, parts: [{ type: 'text', text: 'quick' }] })
    expect(answer.duplicate).toBe(false)
    const state = await http.call('session.state', { session: session.id })
    expect(state.messages.map((m) => m.role)).toEqual(['user', 'assistant'])
    const page = await http.call('session.history', { session: session.id, limit: 5 })
    expect(page.events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5].map((i) => (page.events[0]?.seq ?? 0) + i - 1))
    expect(page.next).toBe(page.events.at(-1)?.seq)
  })

  it('a refusal is an ApiError with the server’s code and HTTP status', async () => {
    const http = new ChronicleHttp({ url, token })
    const missing = await http.call('session.get', { session: 'ses_missing' }).catch((e: unknown) => e)
    expect(missing).toBeInstanceOf(ApiError)
    expect(missing).toMatchObject({ status: 404, code: 'SESSION_NOT_FOUND' })
    const anonymous = await new ChronicleHttp({ url }).call('session.list', {}).catch((e: unknown) => e)
    expect(anonymous).toMatchObject({ status: 401, code: 'UNAUTHORIZED' })
    const nowhere = await new ChronicleHttp({ url: 'http://127.0.0.1:9' }).health().catch((e: unknown) => e)
    expect(nowhere).toMatchObject({ code: 'UNREACHABLE' })
  })
})

describe('ChronicleSocket', () => {
  it('subscribes, catches up and delivers live events in seq order', async () => {
    const socket = await ChronicleSocket.connect({ url, token })
    try {
      const { session } = await socket.call('session.create', { directory: dir })
      const frames: EventFrame[] = []
      const sub = await socket.subscribe({ sessions: [session.id] }, (f) => frames.push(f))
      expect(await sub.caughtUp).toBeGreaterThanOrEqual(1)
      const done = new Promise<void>((resolve) => {
        const check = setInterval(() => {
          if (frames.some((f) => f.event.type === 'run.finished')) {
            clearInterval(check)
            resolve()
          }
        }, 10)
      })
      await socket.call('input.submit', { session: session.id, parts: [{ type: 'text', text: 'quick' }] })
      await done
      const text = frames.filter((f) => f.event.type === 'text.delta').map((f) => f.event.data.text)
      expect(text.join('')).toBe('A quick answer.')
      const seqs = frames.map((f) => f.seq)
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b))
      expect(frames[0]?.event.type).toBe('session.created')
    } finally {
      socket.close()
    }
  })

  it('rejects a first connection with a bad token as UNAUTHORIZED', async () => {
    const refused = await ChronicleSocket.connect({ url, token: 'nope-nope-nope-nope' }).catch((e: unknown) => e)
    expect(refused).toMatchObject({ code: 'UNAUTHORIZED' })
  })

  it('after a server restart mid-stream, resumes with every event exactly once and no gap', async () => {
    const statuses: SocketStatus[] = []
    const socket = await ChronicleSocket.connect({
      url,
      token,
      reconnect: { minMs: 50, maxMs: 200 },
      onStatus: (s) => statuses.push(s),
    })
    try {
      const { session } = await socket.call('session.create', { directory: dir })
      const frames: EventFrame[] = []
      await socket.subscribe({ sessions: [session.id] }, (f) => frames.push(f))
      await socket.call('input.submit', {
        session: session.id,
        inputId: 'in_sdk_restart',
        parts: [{ type: 'text', text: 'slow' }],
      })
      // cut the stream in the middle of the answer
      while (frames.filter((f) => f.event.type === 'text.delta').length < 5) await new Promise((r) => setTimeout(r, 5))
      await chronicle.stop()
      // a read sent while the server is down waits for the next connection
      const pending = socket.call('session.get', { session: session.id })
      await start()
      expect((await pending).session.id).toBe(session.id)
      // the restarted server's recovery finishes the run; the subscription follows it
      for (let i = 0; i < 600 && !frames.some((f) => f.event.type === 'run.finished'); i++)
        await new Promise((r) => setTimeout(r, 10))
      expect(frames.some((f) => f.event.type === 'run.finished')).toBe(true)
      const log = await new ChronicleHttp({ url, token }).call('session.history', { session: session.id, limit: 5000 })
      const delivered = frames.map((f) => f.seq)
      expect(delivered).toEqual(log.events.map((e) => e.seq).slice(0, delivered.length))
      expect(new Set(delivered).size).toBe(delivered.length)
      expect(statuses).toEqual(expect.arrayContaining(['open', 'reconnecting']))
      expect(statuses.at(-1)).toBe('open')
    } finally {
      socket.close()
    }
  })

  it('a call that cannot be sent again fails with CLOSED when the connection drops', async () => {
    const socket = await ChronicleSocket.connect({ url, token, reconnect: { minMs: 50 } })
    try {
      await chronicle.stop()
      const create = await socket.call('session.create', { directory: dir }).catch((e: unknown) => e)
      expect(create).toMatchObject({ code: 'CLOSED' })
    } finally {
      socket.close()
      await start()
    }
  })
})
