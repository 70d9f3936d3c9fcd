import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { execute } from '../../src/commands/execute.js'
import { decidePermission } from '../../src/commands/permission.js'
import { loadConfig } from '../../src/config.js'
import type { PermissionRule } from '../../src/events/catalogue.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'
import { createBuiltinTools } from '../../src/tools/builtin/index.js'
import { DEFAULT_WEBFETCH } from '../../src/tools/builtin/webfetch.js'
import { createWebSearchTool, SEARXNG_FIELDS, type WebSearchSettings } from '../../src/tools/builtin/websearch.js'
import type { Resolver } from '../../src/tools/net/resolve.js'
import { createRedactor } from '../../src/tools/redact.js'
import { ToolFailure } from '../../src/tools/tool.js'
import { page, redirect, startWebServer, type WebServer } from './fixtures/web-server.js'
import { type Fixture, fixture, tempDir } from './helpers.js'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'

/**
 * websearch (docs/TOOLS.md "websearch") through its real execute path and the
 * real permission gate, against a SearXNG-shaped provider on 127.0.0.1 that
 * records what it was asked — no test leaves this machine.
 */

let provider: WebServer
let elsewhere: WebServer
const temp = tempDir('chronicle-websearch-')
const KEY = 'search-key-0123456789abcdef'
const asked: { query: string | null; limit: string | null; key: string | undefined }[] = []

const searx = {
  results: [
    {
      title: 'Node.js <b>streams</b>',
      url: 'https://nodejs.org/api/stream.html',
      content: 'Streams   are\n everywhere',
    },
    { title: 'No URL, left out', content: 'x' },
    { title: 'Second', url: 'https://example.com/2', content: `the provider echoes ${KEY}` },
    { title: 'Third', url: 'https://example.com/3' },
  ],
}

beforeAll(async () => {
  provider = await startWebServer({
    '/search': (req, res) => {
      const url = new URL(req.url ?? '/', 'http://x')
      asked.push({
        query: url.searchParams.get('q'),
        limit: url.searchParams.get('n'),
        key: req.headers['x-api-key'] as string | undefined,
      })
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(searx))
    },
    '/custom': page(
      'application/json',
      JSON.stringify({ data: { items: [{ name: 'A', link: 'https://a.example', summary: 'about a' }] } }),
    ),
    '/html': page('text/html', '<html>not json</html>'),
    '/big': page('application/json', JSON.stringify({ results: [{ url: 'u', title: 'x'.repeat(5000) }] })),
    '/down': (_req, res) => void res.writeHead(503, { 'content-type': 'text/plain' }).end('busy'),
    '/slow': (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.write('{')
    },
    '/away': redirect('/search?q=moved'),
  })
  elsewhere = await startWebServer({
    '/search': (req, res) => {
      asked.push({ query: 'elsewhere', limit: null, key: req.headers['x-api-key'] as string | undefined })
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"results":[]}')
    },
  })
})
afterAll(async () => {
  await provider.close()
  await elsewhere.close()
  temp.cleanup()
})
afterEach(() => {
  asked.length = 0
})

const resolve: Resolver = async (hostname) => {
  const map: Record<string, string> = { 'search.test': '127.0.0.1', 'elsewhere.test': '127.0.0.1' }
  const address = map[hostname]
  if (!address) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' })
  return [{ address, family: 4 }]
}

const allowAll: PermissionRule[] = [{ permission: 'websearch', pattern: '*', action: 'allow' }]

function settings(overrides: Partial<WebSearchSettings> = {}): WebSearchSettings {
  return {
    url: `${provider.origin('search.test')}/search?q={query}&n={limit}&format=json`,
    headers: { 'X-API-Key': KEY },
    secrets: [],
    fields: SEARXNG_FIELDS,
    maxResults: 10,
    ...overrides,
  }
}

function setup(
  opts: {
    settings?: Partial<WebSearchSettings>
    rules?: PermissionRule[]
    maxBytes?: number
    allowHosts?: string[]
  } = {},
) {
  const f = fixture({ directory: temp.dir, rules: opts.rules ?? allowAll })
  const tool = createWebSearchTool({
    settings: settings(opts.settings),
    fetch: {
      ...DEFAULT_WEBFETCH,
      defaultTimeoutSeconds: 1,
      ...(opts.maxBytes && { maxBytes: opts.maxBytes }),
      ...(opts.allowHosts && { allowHosts: opts.allowHosts }),
    },
    resolve,
    redactor: createRedactor([{ name: 'SEARCH_KEY', value: KEY }]),
  })
  const run = (args: Record<string, unknown>, ctx = f.ctx()) => tool.execute(tool.parameters.parse(args), ctx)
  return { f, tool, run }
}

async function failure(promise: Promise<unknown>): Promise<{ kind: string; message: string }> {
  const err = await promise.then(
    () => {
      throw new Error('the call succeeded')
    },
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(ToolFailure)
  return { kind: (err as ToolFailure).kind, message: (err as ToolFailure).message }
}

describe('websearch: results', () => {
  it('asks a SearXNG provider and records title, url and snippet; the key goes to it and is scrubbed from what comes back', async () => {
    const { run } = setup()
    const result = await run({ query: 'node streams & pipes', limit: 3 })
    expect(asked).toEqual([{ query: 'node streams & pipes', limit: '3', key: KEY }])
    expect(result.output).toBe(
      [
        '1. Node.js streams\n   https://nodejs.org/api/stream.html\n   Streams are everywhere',
        '2. Second\n   https://example.com/2\n   the provider echoes [redacted:SEARCH_KEY]',
        '3. Third\n   https://example.com/3',
      ].join('\n\n'),
    )
    expect(result.title).toBe('websearch: node streams & pipes')
    expect(result.metadata).toEqual({
      query: 'node streams & pipes',
      provider: provider.origin('search.test'),
      status: 200,
      results: [
        { title: 'Node.js streams', url: 'https://nodejs.org/api/stream.html', snippet: 'Streams are everywhere' },
        { title: 'Second', url: 'https://example.com/2', snippet: 'the provider echoes [redacted:SEARCH_KEY]' },
        { title: 'Third', url: 'https://example.com/3', snippet: '' },
      ],
    })
  })

  it('limit cuts the list (default 5); a limit over maxResults is refused by the schema', async () => {
    const { run, tool } = setup({ settings: { maxResults: 2 } })
    expect((await run({ query: 'q' })).metadata?.results).toHaveLength(2)
    expect(tool.parameters.safeParse({ query: 'q', limit: 3 }).success).toBe(false)
  })

  it('a generic JSON API: results and fields at the configured paths', async () => {
    const { run } = setup({
      settings: {
        url: `${provider.origin('search.test')}/custom?query={query}`,
        fields: { results: 'data.items', title: 'name', url: 'link', snippet: 'summary' },
      },
    })
    expect((await run({ query: 'a' })).output).toBe('1. A\n   https://a.example\n   about a')
  })

  it('no results says so', async () => {
    const { run } = setup({ settings: { url: `${elsewhere.origin('elsewhere.test')}/search?q={query}` } })
    expect((await run({ query: 'nothing' })).output).toBe('No results for "nothing".')
  })
})

describe('websearch: failures and caps', () => {
  it.each([
    ['/html', "the search provider's answer is not JSON"],
    ['/down', `HTTP_STATUS: ${'{origin}'}/down answered 503 Service Unavailable`],
    ['/custom', `the search provider's answer has no list of results at "results"`],
  ])('%s fails clearly', async (path, message) => {
    const { run } = setup({ settings: { url: `${provider.origin('search.test')}${path}` } })
    expect(await failure(run({ query: 'q' }))).toEqual({
      kind: 'failed',
      message: message.replace('{origin}', provider.origin('search.test')),
    })
  })

  it("webfetch's size and time caps hold", async () => {
    const big = setup({ settings: { url: `${provider.origin('search.test')}/big` }, maxBytes: 1000 })
    expect(await failure(big.run({ query: 'q' }))).toEqual({
      kind: 'failed',
      message: "the search provider's answer is larger than 1000 bytes",
    })
    const slow = setup({ settings: { url: `${provider.origin('search.test')}/slow` } })
    const started = Date.now()
    expect((await failure(slow.run({ query: 'q' }))).message).toMatch(/^TIMEOUT: /)
    expect(Date.now() - started).toBeLessThan(5000)
  })

  it('a redirect to another host gets no key, and a private address there is refused', async () => {
    const hop = await startWebServer({
      '/go': redirect(`${elsewhere.origin('elsewhere.test')}/search`),
      '/private': redirect('http://10.0.0.1/search'),
    })
    try {
      const { run } = setup({ settings: { url: `${hop.origin('search.test')}/go` } })
      await run({ query: 'q' }).catch(() => undefined)
      // elsewhere.test is not the provider: its loopback address is refused before anything is sent…
      expect(asked).toEqual([])
      // …and where webfetch's config allows it, it is reached without the provider's key
      const allowed = setup({ settings: { url: `${hop.origin('search.test')}/go` }, allowHosts: ['elsewhere.test'] })
      await allowed.run({ query: 'q' })
      expect(asked).toEqual([{ query: 'elsewhere', limit: null, key: undefined }])
      asked.length = 0
      const same = setup({ settings: { url: `${provider.origin('search.test')}/away` } })
      await same.run({ query: 'q' })
      // a redirect within the provider's origin keeps the key
      expect(asked).toEqual([{ query: 'moved', limit: null, key: KEY }])
      const priv = setup({ settings: { url: `${hop.origin('search.test')}/private` } })
      expect((await failure(priv.run({ query: 'q' }))).message).toMatch(/10\.0\.0\.1/)
    } finally {
      await hop.close()
    }
  })
})

describe('websearch: permission and configuration', () => {
  const reply = async (f: Fixture, requestId: string, answer: 'once' | 'reject') =>
    execute(
      sqlitePorts(f.store),
      f.sessionId,
      (s) => decidePermission({ type: 'reply', requestId, reply: answer }, s, f.sessionId, f.ids),
      { meta: { actor: 'user', request: requestId }, durability: 'full' },
    )
  const nextRequest = async (f: Fixture) => {
    for (let i = 0; i < 200 && f.requested().length < 1; i++) await new Promise((r) => setTimeout(r, 5))
    return f.requested()[0]
  }

  it('asks websearch with the query by default; a reject sends nothing to the provider', async () => {
    const { f, run } = setup({ rules: [] })
    const call = run({ query: 'secret plans' })
    const request = await nextRequest(f)
    expect(request).toMatchObject({
      permission: 'websearch',
      patterns: ['secret plans'],
      metadata: { query: 'secret plans', provider: provider.origin('search.test') },
    })
    await reply(f, request?.requestId as string, 'reject')
    expect((await failure(call)).kind).toBe('denied')
    expect(asked).toEqual([])
  })

  it('is not offered without a provider; the config resolves {env:NAME} in headers and names the value a secret', () => {
    const ids = (websearch?: WebSearchSettings) =>
      createBuiltinTools({ dataDir: temp.dir, updateTodos: () => undefined, ...(websearch && { websearch }) }).map(
        (t) => t.id,
      )
    expect(ids()).not.toContain('websearch')
    expect(ids(settings())).toContain('websearch')

    const file = join(temp.dir, 'chronicle.json')
    writeFileSync(
      file,
      JSON.stringify({
        websearch: { url: 'http://127.0.0.1:8888/search?q={query}&format=json', headers: { 'X-Key': '{env:BRAVE}' } },
      }),
    )
    const config = loadConfig({ configPath: file, env: { BRAVE: KEY, CHRONICLE_DATA_DIR: temp.dir } })
    expect(config.websearch).toEqual({
      url: 'http://127.0.0.1:8888/search?q={query}&format=json',
      headers: { 'X-Key': KEY },
      secrets: [{ name: 'BRAVE', value: KEY }],
      fields: SEARXNG_FIELDS,
      maxResults: 10,
    })
    expect(loadConfig({ configPath: false, env: { CHRONICLE_DATA_DIR: temp.dir } }).websearch).toBeUndefined()
    expect(() => loadConfig({ configPath: file, env: { CHRONICLE_DATA_DIR: temp.dir } })).toThrow(
      /websearch\.headers\.X-Key names BRAVE, which is not set/,
    )
  })
})
