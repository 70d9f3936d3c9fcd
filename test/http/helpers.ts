import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { afterEach } from 'vitest'
import WebSocket from 'ws'
import { loadConfig, type ChronicleConfig } from '../../src/config.js'
import { createChronicle, type Chronicle, type ChronicleOptions } from '../../src/main.js'

/** A log destination that keeps every line in memory. */
export function capturedLogs(): { logs: string[]; sink: Writable } {
  const logs: string[] = []
  const sink = new Writable({
    write(chunk, _enc, done) {
      logs.push(String(chunk))
      done()
    },
  })
  return { logs, sink }
}

/** A real Chronicle in a temp data dir, logs captured in memory. */
export interface TestServer {
  readonly chronicle: Chronicle
  readonly dir: string
  readonly url: string
  readonly wsUrl: string
  readonly token: string
  readonly logs: string[]
  close(): Promise<void>
}

/** A port free right now on 127.0.0.1: for a server whose URL must be known before it starts (an OAuth redirect URL names it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number }
      srv.close(() => resolve(port))
    })
  })
}

export async function startServer(
  env: Record<string, string> = {},
  opts: { listen?: boolean; config?: Partial<ChronicleConfig>; options?: ChronicleOptions } = {},
): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-http-'))
  const { logs, sink } = capturedLogs()
  const base = loadConfig({
    env: { CHRONICLE_DATA_DIR: join(dir, 'data'), CHRONICLE_PORT: '0', ...env },
    cwd: dir,
    configPath: false,
  })
  // generated titles append after a run ends (test/runtime/titles.test.ts): off here unless a test asks,
  // so that what a test reads right after a run is the run's own events
  // and the user's skills from the test's own dir, never this machine's ~/.config (docs/TOOLS.md "skill")
  const config = { ...base, titles: false, skillsDir: join(dir, 'config', 'skills'), ...opts.config }
  const chronicle = await createChronicle(config, { ...opts.options, logDestination: sink, directory: dir })
  const url = opts.listen === false ? 'http://localhost' : await chronicle.start()
  return {
    chronicle,
    dir,
    url,
    wsUrl: `${url.replace(/^http/, 'ws')}/ws`,
    token: chronicle.token.token,
    logs,
    async close() {
      await chronicle.stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/**
 * Servers and WebSocket clients a spec file starts, each closed after its test: `serve` starts a server
 * (as `startServer`) with one client connected; `track` adds one made otherwise; `untrack` takes back a
 * server the test closed itself.
 */
export function closedAfterEach() {
  const servers: TestServer[] = []
  const clients: Client[] = []
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close()
    for (const s of servers.splice(0)) await s.close()
  })
  return {
    async serve(...args: Parameters<StartServer>): Promise<{ server: TestServer; client: Client }> {
      const server = await startServer(...args)
      servers.push(server)
      const client = await Client.connect(server.wsUrl, server.token)
      clients.push(client)
      return { server, client }
    },
    track<T extends TestServer | Client>(made: T): T {
      if (made instanceof Client) clients.push(made)
      else servers.push(made as TestServer)
      return made
    },
    untrack(server: TestServer): void {
      servers.splice(servers.indexOf(server), 1)
    },
  }
}

/**
 * How a server-level contract starts its servers (test/http/routes-contract.ts and its kind): `startServer`
 * on SQLite; on PostgreSQL, the same with a new database (test/support/postgres-servers.ts).
 */
export type StartServer = typeof startServer

/**
 * The log's head once every append made so far has committed, on either engine: what a spec compares to
 * say that nothing was appended (a read of every session waits for what is queued: read-your-writes).
 */
export async function committedHead(server: Pick<TestServer, 'chronicle'>): Promise<number> {
  const { log, readModels } = server.chronicle.ports
  await readModels.sessionIds()
  return log.head()
}

/**
 * committedHead once no session has work open (a run, waiting input, a compaction asked for): what an
 * earlier request started — a run, a compaction — appends after its reply, and would land in the middle of
 * a spec's "nothing appended" for the next one.
 */
export async function quietHead(server: Pick<TestServer, 'chronicle'>, timeoutMs = 10_000): Promise<number> {
  const deadline = Date.now() + timeoutMs
  while ((await server.chronicle.ports.readModels.sessionsWithOpenWork()).length > 0) {
    if (Date.now() > deadline) throw new Error(`sessions still have work open after ${timeoutMs} ms`)
    await new Promise((r) => setTimeout(r, 10))
  }
  return committedHead(server)
}

export type Frame = Record<string, unknown> & { type?: string; id?: string | number | null }

/** A real `ws` client that records every frame and answers `call` with the reply to its id. */
export class Client {
  readonly frames: Frame[] = []
  private waiters: { match: (f: Frame) => boolean; resolve: (f: Frame) => void }[] = []
  private n = 0
  closed: { code: number; reason: string } | undefined
  /** resolves with the close code */
  readonly whenClosed: Promise<number>

  constructor(readonly ws: WebSocket) {
    this.whenClosed = new Promise((resolve) => ws.once('close', (code) => resolve(code)))
    ws.on('message', (data) => this.onFrame(JSON.parse(String(data)) as Frame))
    ws.on('close', (code, reason) => {
      this.closed = { code, reason: String(reason) }
      for (const w of this.waiters) w.resolve({ type: '__closed', code })
      this.waiters = []
    })
  }

  static async connect(url: string, token: string | undefined, options: WebSocket.ClientOptions = {}): Promise<Client> {
    const ws = new WebSocket(url, {
      ...options,
      headers: { ...(token !== undefined && { authorization: `Bearer ${token}` }), ...options.headers },
    })
    const client = new Client(ws)
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve())
      ws.once('error', reject)
      ws.once('unexpected-response', (req, res) => {
        req.destroy()
        reject(new Error(`Unexpected server response: ${res.statusCode}`))
      })
    })
    return client
  }

  private onFrame(frame: Frame): void {
    this.frames.push(frame)
    const i = this.waiters.findIndex((w) => w.match(frame))
    if (i >= 0) {
      const [w] = this.waiters.splice(i, 1)
      w?.resolve(frame)
    }
  }

  /** The next frame matching (looking at frames already received first). */
  wait(match: (f: Frame) => boolean, timeoutMs = 10_000): Promise<Frame> {
    const seen = this.frames.find(match)
    if (seen) return Promise.resolve(seen)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`timed out waiting for a frame; got ${JSON.stringify(this.frames.slice(-5))}`)),
        timeoutMs,
      )
      this.waiters.push({
        match,
        resolve: (f) => {
          clearTimeout(timer)
          resolve(f)
        },
      })
    })
  }

  send(raw: string | Buffer): void {
    this.ws.send(raw)
  }

  async call(method: string, params?: unknown): Promise<Frame> {
    const id = `c${++this.n}`
    this.ws.send(JSON.stringify({ id, method, ...(params !== undefined && { params }) }))
    return this.wait((f) => f.id === id)
  }

  events(sub?: string): (Frame & { seq: number; version: number; session: string })[] {
    return this.frames.filter((f) => f.type === 'event' && (sub === undefined || f.sub === sub)) as never
  }

  close(): void {
    this.ws.terminate()
  }
}

/**
 * Writes the scripted model's script the route and import specs share: a prompt naming hello.txt reads it and
 * answers 'It says hello.'; any other prompt gets `otherwise`.
 */
export function writeHelloScript(path: string, otherwise: string): void {
  writeFileSync(
    path,
    JSON.stringify({
      chunkSize: 8,
      steps: [
        {
          when: { afterToolResult: false, userContains: 'hello.txt' },
          toolCalls: [{ id: 'call_1', name: 'read', input: { filePath: 'hello.txt' } }],
        },
        { when: { afterToolResult: true }, text: 'It says hello.' },
        { when: { afterToolResult: false }, text: otherwise },
      ],
    }),
  )
}
