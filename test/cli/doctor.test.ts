import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LLMock } from '@copilotkit/aimock'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { LanguageModelV3StreamPart } from '@ai-sdk/provider'
import { MockLanguageModelV3 } from 'ai/test'
import { doctor } from '../../src/cli/doctor.js'
import { fixedModelResolver } from '../../src/runtime/model/providers.js'
import { secureDataDir } from '../../src/data-dir.js'
import { resolveToken } from '../../src/http/token.js'
import { VERSION } from '../../src/main.js'
import { startServer, type TestServer } from '../http/helpers.js'

/**
 * `chronicle doctor` (src/cli/doctor.ts), called directly with a real temp data
 * dir (real files, real modes), a real Chronicle server, a real OpenAI-compatible
 * mock server: one `ok|warn|fail  <check>: <detail>` line per check, exit 1 when
 * any failed — and never a secret in what it prints.
 */

const API_KEY = 'sk-doctor-test-0123456789abcdef'
const NOWHERE = 'http://127.0.0.1:9' // the discard port: nothing answers

let root: string
let server: TestServer | undefined
let mock: LLMock
let refusing: Server

beforeAll(async () => {
  mock = new LLMock({ port: 0, host: '127.0.0.1' })
  await mock.start()
  refusing = createServer((_req, res) => {
    res.writeHead(401, { 'content-type': 'application/json' })
    res.end('{"error":{"message":"invalid api key"}}')
  })
  await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve))
})
afterAll(async () => {
  await mock.stop()
  await new Promise((resolve) => refusing.close(resolve))
})
afterEach(async () => {
  await server?.close()
  server = undefined
  rmSync(root, { recursive: true, force: true })
})

/** A private data dir with a token, as a server's first start leaves it; returns the env pointing at it. */
function prepared(env: Record<string, string> = {}): Record<string, string> {
  root = mkdtempSync(join(tmpdir(), 'chronicle-doctor-'))
  const dataDir = join(root, 'data')
  secureDataDir(dataDir)
  resolveToken(dataDir, undefined)
  const script = join(root, 'script.json')
  writeFileSync(script, JSON.stringify({ steps: [{ text: 'hi' }] }))
  return {
    PATH: process.env.PATH ?? '',
    HOME: join(root, 'home'),
    CHRONICLE_DATA_DIR: dataDir,
    CHRONICLE_MODEL: `scripted:${script}`,
    CHRONICLE_URL: NOWHERE,
    ...env,
  }
}

async function run(env: Record<string, string>, argv: string[] = []) {
  const lines: string[] = []
  const code = await doctor(
    { positionals: [], flags: new Map(argv.length ? [['config', argv[0]!]] : []) },
    (l) => lines.push(l),
    env,
  )
  const line = (check: string) => lines.find((l) => l.replace(/^\w+ {2}/, '').startsWith(`${check}: `))
  return { code, lines, line }
}

describe('chronicle doctor', () => {
  it('passes on a ready machine with a running server: every line ok or warn, exit 0', async () => {
    root = mkdtempSync(join(tmpdir(), 'chronicle-doctor-'))
    server = await startServer()
    const dataDir = server.chronicle.config.dataDir
    const script = join(root, 'script.json')
    writeFileSync(script, JSON.stringify({ steps: [{ text: 'hi' }] }))
    const { code, lines, line } = await run({
      PATH: process.env.PATH ?? '',
      HOME: join(root, 'home'),
      CHRONICLE_DATA_DIR: dataDir,
      CHRONICLE_MODEL: `scripted:${script}`,
      CHRONICLE_URL: server.url,
    })
    expect(code).toBe(0)
    expect(lines.map((l) => l.split(':')[0])).toEqual([
      'ok  config',
      'ok  model',
      'ok  provider',
      expect.stringMatching(/^(ok|warn) {2}sandbox$/), // bubblewrap may not run in every test environment
      'ok  git',
      'ok  data dir',
      'ok  disk',
      'ok  store',
      'ok  token',
      'ok  server',
      'ok  sessions',
    ])
    expect(line('config')).toBe('ok  config: no config file: the environment only')
    expect(line('model')).toBe(`ok  model: scripted:${script} can be built`)
    expect(line('git')).toMatch(/^ok {2}git: git version \d/)
    expect(line('data dir')).toBe(
      `ok  data dir: ${dataDir} is private (0700; chronicle.db, chronicle.db-wal, chronicle.db-shm 0600)`,
    )
    expect(line('token')).toBe(`ok  token: ${join(dataDir, 'token')} is private (0600)`)
    expect(line('server')).toBe(
      `ok  server: Chronicle ${VERSION} answers at ${server.url}; the token speaks for owner (admin)`,
    )
    expect(lines.join('\n')).not.toContain(server.token)
  })

  it('names a session busy with nothing recorded past the bound as stuck; once cancelled it is idle and no longer named', async () => {
    root = mkdtempSync(join(tmpdir(), 'chronicle-doctor-'))
    // a provider that starts an answer and then says nothing more (the server's own stall bound is 5 minutes)
    const silent = new MockLanguageModelV3({
      doStream: async () => ({
        stream: new ReadableStream<LanguageModelV3StreamPart>({
          start(controller) {
            controller.enqueue({ type: 'text-start', id: 't' })
            controller.enqueue({ type: 'text-delta', id: 't', delta: 'Let me th' })
          },
        }),
      }),
    })
    server = await startServer({}, { options: { models: fixedModelResolver(silent, 'mock:silent') } })
    const auth = { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' }
    const created = await fetch(`${server.url}/sessions`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ model: 'mock:silent' }),
    })
    const { session } = (await created.json()) as { session: { id: string } }
    await fetch(`${server.url}/sessions/${session.id}/inputs`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ parts: [{ type: 'text', text: 'think' }] }),
    })
    const status = async () =>
      (
        (await (await fetch(`${server?.url}/sessions/${session.id}`, { headers: auth })).json()) as {
          session: { status: string }
        }
      ).session.status
    while ((await status()) !== 'busy') await new Promise((r) => setTimeout(r, 20))
    const env = {
      PATH: process.env.PATH ?? '',
      HOME: join(root, 'home'),
      CHRONICLE_DATA_DIR: server.chronicle.config.dataDir,
      CHRONICLE_URL: server.url,
    }
    const doctorSays = async (stuckAfter: string) => {
      const lines: string[] = []
      await doctor({ positionals: [], flags: new Map([['stuck-after', stuckAfter]]) }, (l) => lines.push(l), env)
      return lines.find((l) => l.includes('  sessions: '))
    }
    // named once its last event is older than the bound (a loaded machine may take a while to record it)
    const stuck = new RegExp(
      `^warn {2}sessions: 1 look stuck — ${session.id} \\(busy, nothing recorded for [\\d.]+ s\\): .*POST /sessions/<id>/cancel`,
    )
    let said = await doctorSays('0.3')
    for (const until = Date.now() + 10_000; !stuck.test(said ?? '') && Date.now() < until; )
      said = await doctorSays('0.3')
    expect(said).toMatch(stuck)
    expect(await doctorSays('60')).toBe('ok  sessions: 1 sessions, none busy with nothing recorded for 60 s')
    const cancelled = await fetch(`${server.url}/sessions/${session.id}/cancel`, {
      method: 'POST',
      headers: auth,
      body: '{}',
    })
    expect(cancelled.status).toBe(200)
    while ((await status()) !== 'idle') await new Promise((r) => setTimeout(r, 20))
    expect(await doctorSays('0')).toBe('ok  sessions: 1 sessions, none busy with nothing recorded for 0 s')
  })

  it('a PostgreSQL store nobody answers at fails, STORE_UNAVAILABLE, its password hidden', async () => {
    const { code, line, lines } = await run(prepared({ CHRONICLE_DATABASE_URL: 'postgres://u:hunter2@127.0.0.1:9/db' }))
    expect(code).toBe(1)
    expect(line('store')).toMatch(
      /^fail {2}store: STORE_UNAVAILABLE: cannot connect to PostgreSQL at postgres:\/\/u:\*\*\*@127\.0\.0\.1:9\/db: /,
    )
    expect(lines.join('\n')).not.toContain('hunter2')
  })

  it('a data dir or token others can read fails, naming the path', async () => {
    const env = prepared()
    chmodSync(env.CHRONICLE_DATA_DIR!, 0o755)
    chmodSync(join(env.CHRONICLE_DATA_DIR!, 'token'), 0o644)
    const { code, lines } = await run(env)
    expect(code).toBe(1)
    expect(lines.filter((l) => l.startsWith('fail'))).toEqual([
      `fail  data dir: ${env.CHRONICLE_DATA_DIR} is mode 755, not 700: other users can read it (chmod 700 ${env.CHRONICLE_DATA_DIR})`,
      `fail  token: ${join(env.CHRONICLE_DATA_DIR!, 'token')} is mode 644, not 600: other users can read it (chmod 600 ${join(env.CHRONICLE_DATA_DIR!, 'token')}): the server refuses a token file others can read`,
    ])
  })

  it('a default model the server cannot build fails with its code', async () => {
    const { code, line } = await run(prepared({ CHRONICLE_MODEL: 'nope:model' }))
    expect(code).toBe(1)
    expect(line('model')).toBe(
      'fail  model: nope:model cannot be used: UNKNOWN_MODEL: unknown model "nope:model": expected openai:<id>, anthropic:<id>, google:<id>, compatible:<id> or scripted:<file>',
    )
    const compatible = await run(prepared({ CHRONICLE_MODEL: 'compatible:qwen' }))
    expect(compatible.line('model')).toBe(
      'fail  model: compatible:qwen cannot be used: UNKNOWN_MODEL: model "compatible:qwen" needs a base URL (CHRONICLE_BASE_URL)',
    )
  })

  it('an OpenAI-compatible server that answers with the key and lists the model: ok, and the key is never printed', async () => {
    const env = prepared({
      CHRONICLE_MODEL: 'compatible:gpt-4o',
      CHRONICLE_BASE_URL: `${mock.url}/v1`,
      CHRONICLE_API_KEY: API_KEY,
    })
    const { code, lines, line } = await run(env)
    expect(code).toBe(0)
    expect(line('model')).toBe('ok  model: compatible:gpt-4o can be built')
    expect(line('provider')).toBe(`ok  provider: ${mock.url}/v1 answers with the key and lists gpt-4o`)
    expect(lines.join('\n')).not.toContain(API_KEY)
  })

  it('a model the server does not list is a warning; a refused key and an unreachable server fail', async () => {
    const base = { CHRONICLE_MODEL: 'openai:no-such-model', OPENAI_API_KEY: API_KEY }
    const unlisted = await run(prepared({ ...base, OPENAI_BASE_URL: `${mock.url}/v1` }))
    expect(unlisted.line('provider')).toMatch(
      new RegExp(
        `^warn {2}provider: ${mock.url}/v1 answers with the key, but no-such-model is not among the \\d+ models it lists$`,
      ),
    )
    const port = (refusing.address() as AddressInfo).port
    const refused = await run(prepared({ ...base, OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1` }))
    expect(refused.code).toBe(1)
    expect(refused.line('provider')).toBe(
      `fail  provider: http://127.0.0.1:${port}/v1 refuses the API key (OPENAI_API_KEY): HTTP 401`,
    )
    const unreachable = await run(prepared({ ...base, OPENAI_BASE_URL: `${NOWHERE}/v1` }))
    expect(unreachable.code).toBe(1)
    expect(unreachable.line('provider')).toMatch(/^fail {2}provider: http:\/\/127\.0\.0\.1:9\/v1 is unreachable: /)
    for (const r of [unlisted, refused, unreachable]) expect(r.lines.join('\n')).not.toContain(API_KEY)
  })

  it('without an API key the provider is not contacted: a warning', async () => {
    const { code, line } = await run(
      prepared({ CHRONICLE_MODEL: 'compatible:qwen', CHRONICLE_BASE_URL: `${NOWHERE}/v1` }),
    )
    expect(code).toBe(0)
    expect(line('provider')).toBe(`warn  provider: no API key (set CHRONICLE_API_KEY): ${NOWHERE}/v1 was not contacted`)
  })

  it('no server at CHRONICLE_URL is a warning; a server that refuses the token fails', async () => {
    const alone = await run(prepared())
    expect(alone.code).toBe(0)
    expect(alone.line('server')).toMatch(
      /^warn {2}server: none answers at http:\/\/127\.0\.0\.1:9 \(.+\): start one with `chronicle serve`$/,
    )
    server = await startServer()
    const wrong = 'wrong-token-0123456789abcdef'
    const refused = await run({ ...prepared({ CHRONICLE_URL: server.url }), CHRONICLE_TOKEN: wrong })
    expect(refused.code).toBe(1)
    expect(refused.line('server')).toBe(
      `fail  server: Chronicle ${VERSION} answers at ${server.url}, but refuses the token: HTTP 401 UNAUTHORIZED`,
    )
    expect(refused.lines.join('\n')).not.toContain(wrong)
  })

  it('says how much is free where the data dir is, and fails below the bound the server starts with', async () => {
    const env = prepared()
    const roomy = await run(env)
    expect(roomy.line('disk')).toMatch(new RegExp(`^ok {2}disk: [\\d.]+ MiB free at ${env.CHRONICLE_DATA_DIR}$`))
    const file = join(root, 'greedy.json')
    writeFileSync(file, JSON.stringify({ limits: { minFreeBytes: 2 ** 52 } }))
    const tight = await run(env, [file])
    expect(tight.line('disk')).toMatch(
      /^fail {2}disk: only [\d.]+ MiB free at \S+, below limits\.minFreeBytes \(4294967296\.0 MiB\): the server will not start$/,
    )
    expect(tight.code).toBe(1)
  })

  it('a config file that does not validate fails, and nothing else is checked', async () => {
    const env = prepared()
    const file = join(root, 'bad.json')
    mkdirSync(root, { recursive: true })
    writeFileSync(file, JSON.stringify({ port: 'eighty', token: 'short' }))
    const { code, lines } = await run(env, [file])
    expect(code).toBe(1)
    expect(lines).toEqual([
      `fail  config: invalid config file ${file}:\n  - port: Invalid input: expected number, received string\n  - token: token must be at least 16 characters`,
    ])
  })
})
