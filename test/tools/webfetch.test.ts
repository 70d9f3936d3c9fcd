import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { createServer as createTlsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { createSecureContext } from 'node:tls'
import { connect } from 'node:net'
import { gzipSync } from 'node:zlib'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { execute } from '../../src/commands/execute.js'
import { decidePermission } from '../../src/commands/permission.js'
import type { PermissionRule } from '../../src/events/catalogue.js'
import { createWebFetchTool, type WebFetchDeps } from '../../src/tools/builtin/webfetch.js'
import type { Connector } from '../../src/tools/net/connect.js'
import type { Resolver } from '../../src/tools/net/resolve.js'
import { createRedactor } from '../../src/tools/redact.js'
import { ToolFailure } from '../../src/tools/tool.js'
import { startProbe } from './event-loop-probe.js'
import { page, redirect, startWebServer, type WebServer } from './fixtures/web-server.js'
import { type Fixture, fixture, tempDir } from './helpers.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/**
 * webfetch through its real execute path and the real permission gate, against real HTTP servers
 * on 127.0.0.1. `site.test` is the tests' own host: a resolver maps it to 127.0.0.1 and the
 * config allows it by name (docs/SECURITY.md "Server-side request forgery"). `victim` stands for
 * what an attacker wants to reach — a service on this machine; every refused attempt must leave
 * it untouched.
 */

let site: WebServer
let victim: WebServer
const temp = tempDir('chronicle-webfetch-')
const SECRET = 'sk-live-0123456789abcdef'

beforeAll(async () => {
  site = await startWebServer({
    '/doc.html': page(
      'text/html; charset=utf-8',
      '<html><head><title>Doc</title><script>steal()</script><style>p{}</style></head><body><h1>Guide</h1><p>Use <b>bold</b> and <a href="/x">a link</a>.</p><ul><li>one</li><li>two</li></ul><pre><code>a  b\nc</code></pre></body></html>',
    ),
    '/data.json': page('application/json', '{"ok":true}'),
    '/latin1.txt': page('text/plain; charset=iso-8859-1', Buffer.from([0x63, 0x61, 0x66, 0xe9])),
    '/big.txt': page('text/plain', 'x'.repeat(5000)),
    '/bomb.txt': page('text/plain', gzipSync(Buffer.alloc(20 * 1024 * 1024, 0x61)), { 'content-encoding': 'gzip' }),
    '/image.png': page('image/png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0])),
    '/octets': page('application/octet-stream', 'plain looking but declared binary'),
    '/untyped': (_req, res) => {
      res.removeHeader('content-type')
      res.writeHead(200).end(Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 1, 2, 3]))
    },
    '/large.html': page(
      'text/html',
      `<html><body>${'<div><h2>Part</h2><p>Words and <a href="/x">links</a> and <b>more</b> words.</p></div>\n'.repeat(24_000)}</body></html>`,
    ),
    '/secret.txt': page('text/plain', `the key is ${SECRET}\n`),
    '/trickle': (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' })
      const timer = setInterval(() => res.write('.'), 100)
      res.on('close', () => clearInterval(timer))
    },
    '/moved': redirect('/doc.html', 301),
    '/loop': redirect('/loop'),
    '/missing': (_req, res) => void res.writeHead(404, { 'content-type': 'text/plain' }).end('gone'),
  })
  victim = await startWebServer({
    '/': page('text/plain', 'internal admin panel'),
    '/latest/meta-data/': page('text/plain', 'creds'),
  })
})
afterAll(async () => {
  await site.close()
  await victim.close()
  temp.cleanup()
})
afterEach(() => {
  site.hits.length = 0
  victim.hits.length = 0
})

const allowAll: PermissionRule[] = [{ permission: 'webfetch', pattern: '*', action: 'allow' }]

/** A resolver for the tests' names; a name it does not know does not exist. */
const names =
  (map: Record<string, string>, asked: string[] = []): Resolver =>
  async (hostname) => {
    asked.push(hostname)
    const address = map[hostname]
    if (!address) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' })
    return [{ address, family: address.includes(':') ? 6 : 4 }]
  }

function setup(opts: { deps?: Partial<WebFetchDeps>; rules?: PermissionRule[] } = {}) {
  const f = fixture({ directory: temp.dir, rules: opts.rules ?? allowAll })
  const tool = createWebFetchTool({
    dataDir: `${temp.dir}/data`,
    resolve: names({ 'site.test': '127.0.0.1', 'evil.test': '127.0.0.1', 'other.test': '127.0.0.1' }),
    ...opts.deps,
    settings: { allowHosts: ['site.test', 'other.test'], ...opts.deps?.settings },
  })
  const run = (args: Record<string, unknown>, ctx = f.ctx()) => tool.execute(tool.parameters.parse(args), ctx)
  return { f, tool, run }
}

/** The call's failure: kind and message. */
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

describe('webfetch: pages', () => {
  it('converts HTML to Markdown (scripts and styles dropped)', async () => {
    const { run } = setup()
    const result = await run({ url: `${site.origin('site.test')}/doc.html` })
    expect(result.output).toBe('# Guide\n\nUse **bold** and [a link](/x).\n\n-   one\n-   two\n\n```\na  b\nc\n```')
    expect(result.title).toBe(`${site.origin('site.test')}/doc.html (text/html)`)
    expect(result.metadata).toEqual({
      url: `${site.origin('site.test')}/doc.html`,
      status: 200,
      contentType: 'text/html',
      bytes: expect.any(Number),
      bodyTruncated: false,
      truncated: false,
      hops: [{ url: `${site.origin('site.test')}/doc.html`, address: '127.0.0.1', status: 200 }],
    })
    // the request named the host it was for, though it went to the pinned address
    expect(site.hosts.at(-1)).toBe(`site.test:${site.port}`)
  })

  it('text: the same parse, without tags; html: the page as sent', async () => {
    const { run } = setup()
    expect((await run({ url: `${site.origin('site.test')}/doc.html`, format: 'text' })).output).toBe(
      'Guide\n\nUse bold and a link.\n\none\ntwo\n\na b\nc',
    )
    expect((await run({ url: `${site.origin('site.test')}/doc.html`, format: 'html' })).output).toContain(
      '<script>steal()</script>',
    )
  })

  it('JSON passes as it is; a declared charset is decoded', async () => {
    const { run } = setup()
    expect((await run({ url: `${site.origin('site.test')}/data.json` })).output).toBe('{"ok":true}')
    expect((await run({ url: `${site.origin('site.test')}/latin1.txt` })).output).toBe('café')
  })

  it('follows a redirect after the same checks, and records each hop', async () => {
    const { run } = setup()
    const result = await run({ url: `${site.origin('site.test')}/moved` })
    expect(result.output.startsWith('# Guide')).toBe(true)
    expect(result.metadata?.hops).toEqual([
      { url: `${site.origin('site.test')}/moved`, address: '127.0.0.1', status: 301 },
      { url: `${site.origin('site.test')}/doc.html`, address: '127.0.0.1', status: 200 },
    ])
  })

  it('stops after the redirect limit: TOO_MANY_REDIRECTS', async () => {
    const { run } = setup({ deps: { settings: { maxRedirects: 3 } } })
    expect(await failure(run({ url: `${site.origin('site.test')}/loop` }))).toEqual({
      kind: 'failed',
      message: `TOO_MANY_REDIRECTS: more than 3 redirects, from ${site.origin('site.test')}/loop`,
    })
    expect(site.hits).toEqual(['/loop', '/loop', '/loop', '/loop'])
  })

  it('an error status is HTTP_STATUS', async () => {
    const { run } = setup()
    expect(await failure(run({ url: `${site.origin('site.test')}/missing` }))).toEqual({
      kind: 'failed',
      message: `HTTP_STATUS: ${site.origin('site.test')}/missing answered 404 Not Found`,
    })
  })
})

describe('webfetch: caps', () => {
  it('an oversized body is cut at maxBytes with a clear note', async () => {
    const { run } = setup({ deps: { settings: { maxBytes: 1000 } } })
    const result = await run({ url: `${site.origin('site.test')}/big.txt` })
    expect(result.output).toBe(
      `${'x'.repeat(1000)}\n\n[webfetch: the page is larger than 1000 bytes; only its first 1000 bytes were read.]`,
    )
    expect(result.metadata).toMatchObject({ bytes: 1000, bodyTruncated: true })
  })

  it('a compression bomb is cut by what it decodes to (20 MiB of gzip → 64 KiB)', async () => {
    const { run } = setup({ deps: { settings: { maxBytes: 64 * 1024 } } })
    const result = await run({ url: `${site.origin('site.test')}/bomb.txt` })
    expect(result.metadata).toMatchObject({ bytes: 64 * 1024, bodyTruncated: true, truncated: true })
    // the output over 50 KB is cut too, the rest saved in the session's own output directory
    const saved = result.metadata?.outputPath as string
    expect(readFileSync(saved, 'utf8').startsWith('a'.repeat(64 * 1024))).toBe(true)
  })

  it('a body that trickles past the timeout fails TIMEOUT at the timeout', async () => {
    const { run } = setup()
    const started = Date.now()
    expect(await failure(run({ url: `${site.origin('site.test')}/trickle`, timeout: 1 }))).toEqual({
      kind: 'failed',
      message: `TIMEOUT: ${site.origin('site.test')}/trickle did not arrive within 1 s`,
    })
    const elapsed = Date.now() - started
    expect(elapsed).toBeGreaterThanOrEqual(950)
    expect(elapsed).toBeLessThan(2500)
  })

  it('a 2 MB page is converted in a worker thread: the event loop never stalls', async () => {
    const { run } = setup()
    const probe = startProbe()
    const result = await run({ url: `${site.origin('site.test')}/large.html` })
    const { maxGapMs, fired } = probe.stop()
    expect(result.metadata).toMatchObject({ bodyTruncated: false, truncated: true })
    expect(result.output.startsWith('## Part\n\nWords and [links](/x) and **more** words.\n\n## Part')).toBe(true)
    expect(fired).toBeGreaterThan(10)
    // converted on the event loop, this page would block it for well over a second (about 0.8 s per MB
    // here); in a worker the loop only waits for the scheduler when the worker and other processes hold
    // both cores of a shared machine
    expect(maxGapMs).toBeLessThan(400)
  })

  it('a cancel during the conversion ends the call at once', async () => {
    const { f, run } = setup()
    const abort = new AbortController()
    const call = run({ url: `${site.origin('site.test')}/large.html` }, f.ctx({ abort: abort.signal }))
    // the body of 2 MB arrives in a few ms; the conversion takes most of a second
    setTimeout(() => abort.abort(new ToolFailure('aborted', 'the run was cancelled')), 150)
    const started = Date.now()
    expect(await failure(call)).toEqual({ kind: 'aborted', message: 'the run was cancelled' })
    // the conversion alone takes well over a second: the call ended with the cancel, not with it
    expect(Date.now() - started).toBeLessThan(1000)
  })

  it('a timeout above the configured maximum is invalid arguments', () => {
    const { tool } = setup({ deps: { settings: { maxTimeoutSeconds: 60 } } })
    expect(tool.parameters.safeParse({ url: 'https://example.com', timeout: 61 }).success).toBe(false)
  })

  it.each([
    ['/image.png', 'is image/png, not text: webfetch reads text, HTML, JSON and XML only'],
    ['/octets', 'is application/octet-stream, not text: webfetch reads text, HTML, JSON and XML only'],
    ['/untyped', 'has no content type and its bytes are binary'],
  ])('binary %s is refused: CONTENT_TYPE_REFUSED', async (path, why) => {
    const { run } = setup()
    expect(await failure(run({ url: `${site.origin('site.test')}${path}` }))).toEqual({
      kind: 'failed',
      message: `CONTENT_TYPE_REFUSED: ${site.origin('site.test')}${path} ${why}`,
    })
  })

  it("the server's secrets are scrubbed before the full text is saved", async () => {
    const { run } = setup({
      deps: { redactor: createRedactor([{ name: 'OPENAI_API_KEY', value: SECRET }]), settings: { maxBytes: 100_000 } },
    })
    const result = await run({ url: `${site.origin('site.test')}/secret.txt` })
    expect(result.output).toBe('the key is [redacted:OPENAI_API_KEY]\n')
  })
})

describe('webfetch: forgery attempts are refused before anything is sent', () => {
  const refused = async (url: string, deps?: Partial<WebFetchDeps>) => {
    const { run } = setup(deps && { deps })
    const result = await failure(run({ url }))
    expect(victim.hits).toEqual([])
    return result
  }

  it.each([
    ['loopback by IP', (p: number) => `http://127.0.0.1:${p}/`, '127.0.0.1 is loopback'],
    ['a decimal IP', (p: number) => `http://2130706433:${p}/`, '127.0.0.1 is loopback'],
    ['a hex, shortened IP', (p: number) => `http://0x7f.1:${p}/`, '127.0.0.1 is loopback'],
    ['a shortened IP', (p: number) => `http://127.1:${p}/`, '127.0.0.1 is loopback'],
    ['IPv6 loopback', (p: number) => `http://[::1]:${p}/`, '::1 is loopback'],
    [
      'IPv4-mapped IPv6',
      (p: number) => `http://[::ffff:127.0.0.1]:${p}/`,
      '::ffff:7f00:1 is an IPv6 form of 127.0.0.1 (loopback), which is not connected to as such',
    ],
    ['the unspecified address', (p: number) => `http://0.0.0.0:${p}/`, '0.0.0.0 is unspecified'],
    [
      'the metadata address',
      () => 'http://169.254.169.254/latest/meta-data/',
      '169.254.169.254 is the cloud metadata address',
    ],
    ['a private address', () => 'http://10.0.0.1/', '10.0.0.1 is private (RFC 1918)'],
    ['CGNAT', () => 'http://100.64.0.1/', '100.64.0.1 is carrier-grade NAT (100.64.0.0/10)'],
  ])('%s', async (_name, url, why) => {
    const target = url(victim.port)
    expect(await refused(target)).toEqual({
      kind: 'failed',
      message: `ADDRESS_REFUSED: ${new URL(target).href}: ${why}. Only public addresses can be fetched (a host on the user's network must be allowed by name in the server's config: webfetch.allowHosts).`,
    })
  })

  it('a name that resolves to loopback (through the test resolver, and localhost through the system one)', async () => {
    expect((await refused(`http://evil.test:${victim.port}/`)).message).toMatch(
      /^ADDRESS_REFUSED: http:\/\/evil\.test:\d+\/: evil\.test resolves to 127\.0\.0\.1, which is loopback\./,
    )
    const { run } = setup({ deps: { resolve: undefined } as Partial<WebFetchDeps> })
    expect((await failure(run({ url: `http://localhost:${victim.port}/` }))).message).toMatch(
      /^ADDRESS_REFUSED: http:\/\/localhost:\d+\/: localhost resolves to (127\.0\.0\.1|::1), which is loopback\./,
    )
    expect(victim.hits).toEqual([])
  })

  it('the allowed name is allowed; the same name without the allowance is refused', async () => {
    expect((await setup().run({ url: `${site.origin('site.test')}/data.json` })).output).toBe('{"ok":true}')
    expect(site.hits).toEqual(['/data.json'])
    const { run } = setup({ deps: { settings: { allowHosts: [] } } })
    expect((await failure(run({ url: `${site.origin('site.test')}/data.json` }))).message).toMatch(
      /^ADDRESS_REFUSED: http:\/\/site\.test:\d+\/data\.json: site\.test resolves to 127\.0\.0\.1, which is loopback\./,
    )
    expect(site.hits).toEqual(['/data.json'])
  })

  it.each([
    ['file:///etc/passwd', 'SCHEME_REFUSED: only http: and https: URLs can be fetched, not file:'],
    ['ftp://site.test/x', 'SCHEME_REFUSED: only http: and https: URLs can be fetched, not ftp:'],
    ['data:text/html,<h1>hi</h1>', 'SCHEME_REFUSED: only http: and https: URLs can be fetched, not data:'],
    ['gopher://site.test:70/_GET', 'SCHEME_REFUSED: only http: and https: URLs can be fetched, not gopher:'],
  ])('%s: not http', async (url, message) => {
    expect(await refused(url)).toEqual({ kind: 'failed', message })
  })

  it('user-info that makes the URL look like another host', async () => {
    expect(await refused(`http://example.com@127.0.0.1:${0}/`.replace(':0', `:${victim.port}`))).toEqual({
      kind: 'failed',
      message:
        'URL_CREDENTIALS: a URL with user-info (user:password@ before the host) is refused: it names 127.0.0.1, whatever comes before the @',
    })
  })

  describe('a page on the allowed host that redirects inward', () => {
    const inward: [string, (p: number) => string, string][] = [
      ['127.0.0.1', (p) => `http://127.0.0.1:${p}/`, '127.0.0.1 is loopback'],
      [
        'the metadata address',
        () => 'http://169.254.169.254/latest/meta-data/',
        '169.254.169.254 is the cloud metadata address',
      ],
      ['10.x', () => 'http://10.1.2.3/', '10.1.2.3 is private (RFC 1918)'],
      ['[::1]', (p) => `http://[::1]:${p}/`, '::1 is loopback'],
      [
        '[::ffff:127.0.0.1]',
        (p) => `http://[::ffff:127.0.0.1]:${p}/`,
        '::ffff:7f00:1 is an IPv6 form of 127.0.0.1 (loopback), which is not connected to as such',
      ],
      [
        'a name resolving to loopback',
        (p) => `http://evil.test:${p}/`,
        'evil.test resolves to 127.0.0.1, which is loopback',
      ],
    ]
    it.each(inward)('to %s', async (_name, location, why) => {
      const target = location(victim.port)
      const hop = await startWebServer({ '/go': redirect(target) })
      try {
        const { run } = setup()
        const result = await failure(run({ url: `${hop.origin('site.test')}/go` }))
        expect(result.message).toBe(
          `ADDRESS_REFUSED: ${new URL(target).href}: ${why.startsWith('evil') ? why : why}. Only public addresses can be fetched (a host on the user's network must be allowed by name in the server's config: webfetch.allowHosts).`,
        )
        expect(hop.hits).toEqual(['/go'])
        expect(victim.hits).toEqual([])
      } finally {
        await hop.close()
      }
    })
  })

  it.each([
    ['file:///etc/passwd', 'SCHEME_REFUSED: only http: and https: URLs can be fetched, not file:'],
    [
      'http://example.com@127.0.0.1/',
      'URL_CREDENTIALS: a URL with user-info (user:password@ before the host) is refused: it names 127.0.0.1, whatever comes before the @',
    ],
  ])('a redirect to %s is refused like the URL itself', async (location, message) => {
    const hop = await startWebServer({ '/go': redirect(location) })
    try {
      const { run } = setup()
      expect(await failure(run({ url: `${hop.origin('site.test')}/go` }))).toEqual({ kind: 'failed', message })
      expect(victim.hits).toEqual([])
    } finally {
      await hop.close()
    }
  })

  it('DNS rebinding: a name answering a public address to the check and loopback after — the connection goes to the address checked', async () => {
    // `public` stands for a host on the internet: the connector takes the address the fetcher hands it
    // to a local stand-in, so no test reaches beyond this machine; any other address is connected to as given
    const standIn = await startWebServer({ '/': page('text/plain', 'the public page') })
    const answers = ['93.184.215.14', '127.0.0.1', '127.0.0.1']
    const asked: string[] = []
    const rebinding: Resolver = async (hostname) => {
      asked.push(hostname)
      return [{ address: answers.shift() as string, family: 4 }]
    }
    const connected: string[] = []
    const connector: Connector = ({ address, family, port }) => {
      connected.push(`${address}:${port}`)
      return address === '93.184.215.14'
        ? connect({ host: '127.0.0.1', port: standIn.port })
        : connect({ host: address, family, port })
    }
    try {
      const { run } = setup({ deps: { resolve: rebinding, connector } })
      const result = await run({ url: `http://rebind.test:${victim.port}/` })
      expect(result.output).toBe('the public page')
      expect(asked).toEqual(['rebind.test'])
      expect(connected).toEqual([`93.184.215.14:${victim.port}`])
      expect(victim.hits).toEqual([])
      expect(result.metadata?.hops).toEqual([
        { url: `http://rebind.test:${victim.port}/`, address: '93.184.215.14', status: 200 },
      ])
    } finally {
      await standIn.close()
    }
  })

  it("this server's own port is refused on this machine, even for an allowed host", async () => {
    const { run } = setup({ deps: { ownPorts: () => [site.port] } })
    expect(await failure(run({ url: `${site.origin('site.test')}/data.json` }))).toEqual({
      kind: 'failed',
      message: `OWN_SERVER: ${site.origin('site.test')}/data.json is this Chronicle server itself (port ${site.port})`,
    })
    expect(site.hits).toEqual([])
  })
})

describe('webfetch: https', () => {
  it('TLS goes over the pinned connection with the name as SNI, and an untrusted certificate is refused', async () => {
    // a self-signed certificate for site.test, made for this test
    const key = join(temp.dir, 'key.pem')
    const cert = join(temp.dir, 'cert.pem')
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        key,
        '-out',
        cert,
        '-days',
        '1',
        '-subj',
        '/CN=site.test',
        '-addext',
        'subjectAltName=DNS:site.test',
      ],
      { stdio: 'ignore' },
    )
    const names: string[] = []
    const context = createSecureContext({ key: readFileSync(key), cert: readFileSync(cert) })
    const tls = createTlsServer(
      {
        SNICallback: (servername, done) => {
          names.push(servername)
          done(null, context)
        },
      },
      (_req, res) => res.end('secret'),
    )
    await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve))
    const { port } = tls.address() as AddressInfo
    try {
      const { run } = setup()
      const result = await failure(run({ url: `https://site.test:${port}/` }))
      expect(result.kind).toBe('failed')
      expect(result.message).toBe(`FETCH_FAILED: https://site.test:${port}/: DEPTH_ZERO_SELF_SIGNED_CERT`)
      expect(names).toEqual(['site.test'])
    } finally {
      tls.closeAllConnections()
      await new Promise((resolve) => tls.close(resolve))
    }
  })
})

describe('webfetch: permission', () => {
  const reply = async (f: Fixture, requestId: string, answer: 'once' | 'reject') =>
    execute(
      sqlitePorts(f.store),
      f.sessionId,
      (s) => decidePermission({ type: 'reply', requestId, reply: answer }, s, f.sessionId, f.ids),
      {
        meta: { actor: 'user', request: requestId },
        durability: 'full',
      },
    )
  const nextRequest = async (f: Fixture, count: number) => {
    for (let i = 0; i < 200 && f.requested().length < count; i++) await new Promise((r) => setTimeout(r, 5))
    return f.requested()[count - 1]
  }

  it('asks webfetch with the host by default; a reject fails the call denied and nothing is fetched', async () => {
    const { f, run } = setup({ rules: [] })
    const call = run({ url: `${site.origin('site.test')}/data.json` })
    const asked = await nextRequest(f, 1)
    expect(asked).toMatchObject({
      permission: 'webfetch',
      patterns: ['site.test'],
      metadata: { url: `${site.origin('site.test')}/data.json`, format: 'markdown' },
    })
    await reply(f, asked?.requestId as string, 'reject')
    expect((await failure(call)).kind).toBe('denied')
    expect(site.hits).toEqual([])
  })

  it('once: the page is fetched', async () => {
    const { f, run } = setup({ rules: [] })
    const call = run({ url: `${site.origin('site.test')}/data.json` })
    await reply(f, (await nextRequest(f, 1))?.requestId as string, 'once')
    expect((await call).output).toBe('{"ok":true}')
  })

  it('a rule allowing the host asks nothing; a redirect to another host asks for that host', async () => {
    const hop = await startWebServer({ '/go': redirect(`${site.origin('other.test')}/data.json`) })
    try {
      const { f, run } = setup({ rules: [{ permission: 'webfetch', pattern: 'site.test', action: 'allow' }] })
      const call = run({ url: `${hop.origin('site.test')}/go` })
      const asked = await nextRequest(f, 1)
      expect(asked).toMatchObject({ permission: 'webfetch', patterns: ['other.test'] })
      expect(site.hits).toEqual([])
      await reply(f, asked?.requestId as string, 'once')
      expect((await call).output).toBe('{"ok":true}')
      expect(f.requested()).toHaveLength(1)
    } finally {
      await hop.close()
    }
  })
})

describe('webfetch: the data directory', () => {
  it('saves nothing for a page under the output caps', async () => {
    const { run } = setup({ deps: { dataDir: `${temp.dir}/quiet-data` } })
    const result = await run({ url: `${site.origin('site.test')}/data.json` })
    expect(result.metadata?.outputPath).toBeUndefined()
    expect(existsSync(`${temp.dir}/quiet-data`)).toBe(false)
  })
})
