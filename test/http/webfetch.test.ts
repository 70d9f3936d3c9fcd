import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { ChronicleConfig } from '../../src/config.js'
import { DEFAULT_WEBFETCH } from '../../src/tools/builtin/webfetch.js'
import type { Resolver } from '../../src/tools/net/resolve.js'
import { page, startWebServer, type WebServer } from '../tools/fixtures/web-server.js'
import { Client, freePort, startServer, type TestServer } from './helpers.js'

/**
 * webfetch end to end: the real server, its runtime, gate and redactor, the scripted model
 * calling webfetch, and a real page server on 127.0.0.1 reached as `site.test` — a name the
 * server's resolver seam maps there and its config allows (docs/TOOLS.md "webfetch").
 */

const TOKEN = 'tok-webfetch-e2e-0123456789abcdef'
let site: WebServer
let server: TestServer | undefined

beforeAll(async () => {
  site = await startWebServer({
    '/hello.html': page('text/html', '<h1>Hello</h1><p>from <em>the page</em></p>'),
    // a page that prints the server's own token back (a hostile page, or one that reflects a query)
    '/echo.txt': page('text/plain', `token=${TOKEN}`),
  })
})
afterAll(() => site.close())
afterEach(async () => {
  await server?.close()
  server = undefined
  site.hits.length = 0
})

const siteResolver: Resolver = async (hostname) => {
  if (hostname === 'site.test') return [{ address: '127.0.0.1', family: 4 }]
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' })
}

/** A scripted model that calls webfetch on `url` when the prompt mentions `word`, then answers. */
async function serve(calls: Record<string, string>, config: Partial<ChronicleConfig> = {}): Promise<TestServer> {
  const file = join(mkdtempSync(join(tmpdir(), 'chronicle-script-')), 'script.json')
  const steps = [
    ...Object.entries(calls).map(([word, url]) => ({
      when: { userContains: word, afterToolResult: false },
      toolCalls: [{ id: 'call_fetch', name: 'webfetch', input: { url } }],
    })),
    { when: { afterToolResult: true }, text: 'Read it.' },
  ]
  writeFileSync(file, JSON.stringify({ chunkSize: 64, steps }))
  return startServer(
    { CHRONICLE_MODEL: `scripted:${file}`, CHRONICLE_LOG_LEVEL: 'warn', CHRONICLE_TOKEN: TOKEN },
    {
      config: { webfetch: { ...DEFAULT_WEBFETCH, allowHosts: ['site.test'] }, ...config },
      options: { webfetch: { resolve: siteResolver } },
    },
  )
}

const allowSite = [{ permission: 'webfetch', pattern: 'site.test', action: 'allow' as const }]

/** Submits `prompt` over HTTP and waits for the run; the session's events. */
async function prompt(s: TestServer, text: string) {
  const headers = { authorization: `Bearer ${s.token}` }
  const created = await s.chronicle.app.inject({
    method: 'POST',
    url: '/sessions',
    headers,
    payload: { directory: s.dir },
  })
  const session = created.json().session.id as string
  const answered = await s.chronicle.app.inject({
    method: 'POST',
    url: `/sessions/${session}/inputs?wait=true`,
    headers,
    payload: { parts: [{ type: 'text', text }] },
  })
  expect(answered.statusCode).toBe(200)
  const history = await s.chronicle.app.inject({ url: `/sessions/${session}/events`, headers })
  return history.json().events as { type: string; data: Record<string, unknown> }[]
}

const toolEvents = (events: { type: string; data: Record<string, unknown> }[]) =>
  events.filter(
    (e) => (e.type.startsWith('tool.') && !e.type.startsWith('tool.input')) || e.type.startsWith('permission.'),
  )

describe('webfetch through the server', () => {
  it('a rule allowing the host: no ask; the page is converted and recorded', async () => {
    server = await serve({ hello: `${site.origin('site.test')}/hello.html` }, { rules: allowSite })
    const events = await prompt(server, 'say hello')
    expect(toolEvents(events).map((e) => e.type)).toEqual(['tool.called', 'tool.completed'])
    expect(events.find((e) => e.type === 'tool.completed')?.data).toMatchObject({
      output: '# Hello\n\nfrom _the page_',
      metadata: { status: 200, contentType: 'text/html', hops: [{ address: '127.0.0.1', status: 200 }] },
    })
    expect(site.hits).toEqual(['/hello.html'])
  })

  it("a page echoing the server's token is recorded redacted: not in the log, not in the database's bytes", async () => {
    server = await serve({ echo: `${site.origin('site.test')}/echo.txt` }, { rules: allowSite })
    const events = await prompt(server, 'echo it')
    expect(events.find((e) => e.type === 'tool.completed')?.data.output).toBe('token=[redacted:CHRONICLE_TOKEN]')
    expect(JSON.stringify(events)).not.toContain(TOKEN)
    const { dataDir } = server.chronicle.config
    const files = ['chronicle.db', 'chronicle.db-wal'].map((n) => join(dataDir, n)).filter((f) => existsSync(f))
    expect(files).toContain(join(dataDir, 'chronicle.db'))
    for (const f of files) expect(readFileSync(f).includes(TOKEN)).toBe(false)
  })

  it('asks by default: permission.requested {webfetch, [site.test]} over WebSocket; a reject fails the call and fetches nothing', async () => {
    server = await serve({ hello: `${site.origin('site.test')}/hello.html` })
    const c = await Client.connect(server.wsUrl, server.token)
    const created = await c.call('session.create', { directory: server.dir })
    const session = (created.result as { session: { id: string } }).session.id
    await c.call('subscribe', { sessions: [session], after: 0 })
    await c.call('input.submit', { session, parts: [{ type: 'text', text: 'say hello' }] })
    const requested = await c.wait(
      (f) => f.type === 'event' && (f.event as { type: string }).type === 'permission.requested',
    )
    const data = (requested.event as { data: { requestId: string; permission: string; patterns: string[] } }).data
    expect(data).toMatchObject({ permission: 'webfetch', patterns: ['site.test'] })
    await c.call('permission.reply', { session, requestId: data.requestId, reply: 'reject' })
    const finished = await c.wait((f) => f.type === 'event' && (f.event as { type: string }).type === 'run.finished')
    expect((finished.event as { data: { outcome: string } }).data.outcome).toBe('rejected')
    const failed = c.events().find((e) => (e.event as { type: string }).type === 'tool.failed')?.event
    expect(failed).toMatchObject({ data: { error: { kind: 'denied' } } })
    expect(site.hits).toEqual([])
    c.close()
  })

  it('the same host without the allowance in the config is refused: ADDRESS_REFUSED', async () => {
    server = await serve(
      { hello: `${site.origin('site.test')}/hello.html` },
      { rules: allowSite, webfetch: { ...DEFAULT_WEBFETCH, allowHosts: [] } },
    )
    const events = await prompt(server, 'say hello')
    const failed = events.find((e) => e.type === 'tool.failed')?.data as { error: { kind: string; message: string } }
    expect(failed.error.kind).toBe('failed')
    expect(failed.error.message).toMatch(/^ADDRESS_REFUSED: .*site\.test resolves to 127\.0\.0\.1, which is loopback\./)
    expect(site.hits).toEqual([])
  })

  it("the server's own port is refused, though its host is allowed: OWN_SERVER", async () => {
    const port = await freePort()
    server = await serve({ own: `http://site.test:${port}/health` }, { rules: allowSite, port })
    const events = await prompt(server, 'own server')
    expect(events.find((e) => e.type === 'tool.failed')?.data).toMatchObject({
      error: {
        kind: 'failed',
        message: `OWN_SERVER: http://site.test:${port}/health is this Chronicle server itself (port ${port})`,
      },
    })
  })
})
