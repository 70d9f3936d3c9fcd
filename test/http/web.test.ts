import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'
import { DEFAULT_WEB_ROOT } from '../../src/http/web-root.js'
import { createChronicle, type Chronicle } from '../../src/main.js'
import { capturedLogs, Client } from './helpers.js'
import { appendedHead } from '../events/fixtures/store.js'

/**
 * The web page's server side (docs/API.md "Web page", docs/SECURITY.md "The
 * web page"), over a real listening server, fetch and a real `ws` client:
 * the page's files under the security headers and nothing outside its root;
 * one-time login links traded for a cookie session that survives a restart,
 * authenticates HTTP and the WebSocket only with the page's Origin, ends
 * with a logout, with its token's revocation, or with the owner's token.
 */

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
const HEADERS = {
  'content-security-policy': CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
}
const INDEX = '<!doctype html><title>Chronicle</title><script type="module" src="/assets/app.js"></script>\n'
const APP_JS = 'console.log("the page")\n'
const SECRET = 'outside-the-root-SECRET-0123456789'
const CODE = /^http:\/\/127\.0\.0\.1:\d+\/login#([A-Za-z0-9_-]{43})$/
const DAY = 24 * 60 * 60 * 1000

interface Server {
  readonly chronicle: Chronicle
  readonly url: string
  readonly wsUrl: string
  readonly token: string
  readonly logs: string[]
  stop(): Promise<void>
}

let dir: string
let root: string
/** added to Date.now() by the web login's clock */
let offset = 0

/** A real server on `data`, serving the page from `web` (false: off), the web login on the shifted clock. */
async function serve(
  data: string,
  web: { root?: string } | false = { root },
  env: Record<string, string> = {},
): Promise<Server> {
  const { logs, sink } = capturedLogs()
  const base = loadConfig({
    env: { CHRONICLE_DATA_DIR: data, CHRONICLE_PORT: '0', CHRONICLE_LOG_LEVEL: 'info', ...env },
    cwd: dir,
    configPath: false,
  })
  const config = {
    ...base,
    titles: false,
    web: web ? { enabled: true, root: web.root } : { enabled: false, root: undefined },
  }
  const chronicle = await createChronicle(config, {
    logDestination: sink,
    directory: dir,
    web: { now: () => Date.now() + offset },
  })
  const url = await chronicle.start()
  return {
    chronicle,
    url,
    wsUrl: `${url.replace(/^http/, 'ws')}/ws`,
    token: chronicle.token.token,
    logs,
    stop: () => chronicle.stop(),
  }
}

/** The response's headers named in HEADERS. */
function securityHeaders(res: Response): Record<string, string | null> {
  return Object.fromEntries(Object.keys(HEADERS).map((name) => [name, res.headers.get(name)]))
}

/** A raw GET: the path goes out exactly as written (fetch would resolve `..` first). */
function rawGet(url: string, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/`, { path }, (res) => {
      let body = ''
      res.on('data', (chunk) => (body += String(chunk)))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

const post = (s: Server, path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${s.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })

/** Logs in with a code as the page does (its own Origin); the cookie pair to send back, and the raw Set-Cookie. */
async function login(s: Server, code: string): Promise<{ cookie: string; setCookie: string }> {
  const res = await post(s, '/login', { code }, { origin: s.url })
  expect(res.status).toBe(204)
  const setCookie = res.headers.get('set-cookie') ?? ''
  return { cookie: setCookie.split(';')[0] ?? '', setCookie }
}

const codeOf = (url: string) => CODE.exec(url)?.[1] ?? ''

async function mintLink(s: Server, token: string): Promise<{ url: string; expiresAt: string }> {
  const res = await post(s, '/login-links', {}, { authorization: `Bearer ${token}` })
  expect(res.status).toBe(201)
  return (await res.json()) as { url: string; expiresAt: string }
}

const whoami = (s: Server, headers: Record<string, string>) => fetch(`${s.url}/whoami`, { headers })

async function createToken(s: Server, name: string, role = 'operate'): Promise<{ token: string; tokenId: string }> {
  const res = await post(s, '/tokens', { name, role }, { authorization: `Bearer ${s.token}` })
  expect(res.status).toBe(201)
  return (await res.json()) as { token: string; tokenId: string }
}

let server: Server
let data: string

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'chronicle-web-'))
  root = join(dir, 'web')
  data = join(dir, 'data')
  mkdirSync(join(root, 'assets', 'fonts'), { recursive: true })
  writeFileSync(join(root, 'index.html'), INDEX)
  writeFileSync(join(root, 'assets', 'app.js'), APP_JS)
  writeFileSync(join(root, 'assets', 'app.css'), 'body { margin: 0 }\n')
  writeFileSync(join(root, 'assets', 'main-7ZIL2DW4.js'), APP_JS)
  writeFileSync(join(root, 'assets', 'main-ECV36LQZ.css'), 'body { margin: 0 }\n')
  writeFileSync(join(root, 'assets', 'main-7zil2dw4.js'), APP_JS)
  writeFileSync(join(root, 'assets', 'logo.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>\n')
  writeFileSync(join(root, 'assets', 'fonts', 'mono.woff2'), Buffer.from([0x77, 0x4f, 0x46, 0x32]))
  writeFileSync(join(root, 'assets', '.hidden.js'), SECRET)
  // what a traversal would reach: beside the root, and through symlinks out of it
  writeFileSync(join(dir, 'secret.txt'), SECRET)
  symlinkSync(join(dir, 'secret.txt'), join(root, 'assets', 'link.js'))
  symlinkSync(dir, join(root, 'assets', 'outside'))
  server = await serve(data)
})
afterAll(async () => {
  await server.stop()
  rmSync(dir, { recursive: true, force: true })
})

describe('the page', () => {
  it('/ and /login answer index.html without a token, under the security headers, revalidated (no-cache)', async () => {
    for (const path of ['/', '/login', '/login?next=x']) {
      const res = await fetch(`${server.url}${path}`)
      expect([path, res.status, res.headers.get('content-type'), res.headers.get('cache-control')]).toEqual([
        path,
        200,
        'text/html; charset=utf-8',
        'no-cache',
      ])
      expect(securityHeaders(res)).toEqual(HEADERS)
      expect(await res.text()).toBe(INDEX)
    }
  })

  it('/assets/<file> answers built files with their content types', async () => {
    const cases = [
      ['/assets/app.js', 'text/javascript; charset=utf-8', APP_JS],
      ['/assets/app.css', 'text/css; charset=utf-8', 'body { margin: 0 }\n'],
      ['/assets/logo.svg', 'image/svg+xml', '<svg xmlns="http://www.w3.org/2000/svg"/>\n'],
      ['/assets/fonts/mono.woff2', 'font/woff2', 'wOF2'],
    ]
    for (const [path, type, body] of cases) {
      const res = await fetch(`${server.url}${path}`)
      expect([path, res.status, res.headers.get('content-type'), res.headers.get('cache-control')]).toEqual([
        path,
        200,
        type,
        'no-cache',
      ])
      expect(securityHeaders(res)).toEqual(HEADERS)
      expect(await res.text()).toBe(body)
    }
  })

  it('a script or stylesheet named by its content (the build’s main-<HASH>.js) is kept for a year; any other file is revalidated', async () => {
    const cases = [
      ['/assets/main-7ZIL2DW4.js', 'public, max-age=31536000, immutable'],
      ['/assets/main-ECV36LQZ.css', 'public, max-age=31536000, immutable'],
      ['/assets/app.js', 'no-cache'],
      ['/assets/main-7zil2dw4.js', 'no-cache'], // not the build's spelling of a hash
      ['/assets/logo.svg', 'no-cache'],
      ['/', 'no-cache'],
    ]
    const answers = []
    for (const [path] of cases) {
      const res = await fetch(`${server.url}${path}`)
      answers.push([path, res.status, res.headers.get('cache-control')])
    }
    expect(answers).toEqual(cases.map(([path, cache]) => [path, 200, cache]))
  })

  it('an unchanged file is answered 304 to its ETag; HEAD answers the headers only', async () => {
    const first = await fetch(`${server.url}/assets/app.js`)
    const etag = first.headers.get('etag') ?? ''
    expect(etag).toMatch(/^W\/"[0-9a-z]+-[0-9a-z]+"$/)
    const again = await fetch(`${server.url}/assets/app.js`, { headers: { 'if-none-match': etag } })
    expect([again.status, await again.text()]).toEqual([304, ''])
    const head = await fetch(`${server.url}/`, { method: 'HEAD' })
    expect([head.status, head.headers.get('content-type'), await head.text()]).toEqual([
      200,
      'text/html; charset=utf-8',
      '',
    ])
  })

  it('every other response carries the security headers too: the API, refusals, unknown assets', async () => {
    for (const res of [
      await fetch(`${server.url}/health`),
      await fetch(`${server.url}/sessions`),
      await fetch(`${server.url}/assets/none.js`),
      await fetch(`${server.url}/`, { headers: { origin: 'https://evil.example' } }),
    ])
      expect(securityHeaders(res)).toEqual(HEADERS)
    expect((await fetch(`${server.url}/assets/none.js`)).status).toBe(404)
  })

  it('the page, its files and the login refuse a foreign Origin or Host like every route (403)', async () => {
    for (const path of ['/', '/login', '/assets/app.js'])
      expect((await fetch(`${server.url}${path}`, { headers: { origin: 'https://evil.example' } })).status).toBe(403)
    expect((await post(server, '/login', { code: 'x' }, { origin: 'https://evil.example' })).status).toBe(403)
    const host = await new Promise<number>((resolve, reject) => {
      const req = request(`${server.url}/`, { headers: { host: 'evil.example' } }, (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      req.on('error', reject)
      req.end()
    })
    expect(host).toBe(403)
  })

  it('no path reaches outside the root: .., encoded dots and slashes, backslashes, hidden files, symlinks out', async () => {
    const attempts = [
      '/assets/../../secret.txt',
      '/assets/../../package.json',
      '/assets/%2e%2e/%2e%2e/package.json',
      '/assets/../index.html',
      '/assets/%2e%2e/%2e%2e/secret.txt',
      '/assets/%2E%2E%2F%2E%2E%2Fsecret.txt',
      '/assets/..%2f..%2fsecret.txt',
      '/assets/..%5c..%5csecret.txt',
      '/assets/..\\..\\secret.txt',
      '/assets/%252e%252e/secret.txt',
      '/assets//etc/passwd',
      '/assets/%2fetc%2fpasswd',
      '/assets/.hidden.js',
      '/assets/./app.js',
      '/assets/app.js%00.png',
      '/assets/link.js',
      '/assets/outside/secret.txt',
      '/assets/outside/data/token',
      '/assets/',
      '/assets/fonts',
    ]
    for (const path of attempts) {
      const res = await rawGet(server.url, path)
      expect([path, res.status]).toEqual([path, 404])
      expect(res.body).not.toContain(SECRET)
      expect(res.body).not.toContain(server.token)
      expect(res.body).not.toContain('<!doctype')
    }
    // a spelling the router does not send to /assets/* needs a token, like any path
    const elsewhere = await rawGet(server.url, '/%2e%2e/secret.txt')
    expect([elsewhere.status, elsewhere.body.includes(SECRET)]).toEqual([401, false])
  })

  it('a root without index.html answers a plain page saying to build it, under the CSP; never a crash', async () => {
    const empty = join(dir, 'empty-web')
    mkdirSync(empty)
    const unbuilt = await serve(join(dir, 'data-unbuilt'), { root: empty })
    const missing = await serve(join(dir, 'data-missing'), { root: join(dir, 'no-such-dir') })
    try {
      for (const s of [unbuilt, missing]) {
        const res = await fetch(`${s.url}/`)
        expect([res.status, res.headers.get('content-type'), res.headers.get('cache-control')]).toEqual([
          503,
          'text/html; charset=utf-8',
          'no-store',
        ])
        expect(securityHeaders(res)).toEqual(HEADERS)
        const page = await res.text()
        expect(page).toContain('npm run build')
        expect(page).not.toMatch(/<script|<style|style=|on\w+=/i)
        expect((await fetch(`${s.url}/assets/app.js`)).status).toBe(404)
        expect((await fetch(`${s.url}/health`)).status).toBe(200)
      }
      expect(unbuilt.logs.join('')).toContain('the web page is not built')
    } finally {
      await unbuilt.stop()
      await missing.stop()
    }
  })

  it('by default the root is the package’s dist/web', () => {
    expect(DEFAULT_WEB_ROOT).toBe(join(process.cwd(), 'dist', 'web'))
    expect(loadConfig({ env: {}, configPath: false }).web).toEqual({ enabled: true, root: undefined })
  })
})

describe('login', () => {
  it('a link minted with a token → the cookie → whoami, the API and a WebSocket with the page’s Origin', async () => {
    const before = Date.now()
    const link = await mintLink(server, server.token)
    expect(link.url).toMatch(CODE)
    expect(new URL(link.url).origin).toBe(server.url)
    expect(Date.parse(link.expiresAt) - before).toBeGreaterThanOrEqual(10 * 60 * 1000 - 1000)
    expect(Date.parse(link.expiresAt) - before).toBeLessThanOrEqual(10 * 60 * 1000 + 1000)

    const { cookie, setCookie } = await login(server, codeOf(link.url))
    expect(setCookie).toMatch(
      /^chronicle_session=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/; Max-Age=2592000$/,
    )
    expect(await (await whoami(server, { cookie })).json()).toEqual({ id: 'owner', name: 'owner', role: 'admin' })
    const list = await fetch(`${server.url}/sessions`, { headers: { cookie } }) // a GET may come without Origin
    expect(list.status).toBe(200)

    const ws = await Client.connect(server.wsUrl, undefined, { origin: server.url, headers: { cookie } })
    expect((await ws.call('hello', { protocol: 1 })).result).toMatchObject({ protocol: 1 })
    expect((await ws.call('whoami', {})).result).toEqual({ id: 'owner', name: 'owner', role: 'admin' })
    ws.close()
  })

  it('the cookie’s WebSocket upgrade and its writes need the page’s Origin: none or a foreign one is refused', async () => {
    const { cookie } = await login(server, codeOf((await mintLink(server, server.token)).url))
    await expect(Client.connect(server.wsUrl, undefined, { headers: { cookie } })).rejects.toThrow(
      'Unexpected server response: 403',
    )
    await expect(
      Client.connect(server.wsUrl, undefined, { origin: 'https://evil.example', headers: { cookie } }),
    ).rejects.toThrow('Unexpected server response: 403')
    await expect(
      Client.connect(server.wsUrl, undefined, { origin: 'http://localhost:1', headers: { cookie } }),
    ).rejects.toThrow('Unexpected server response: 403')

    const head = server.chronicle.store.head()
    const bare = await post(server, '/sessions', {}, { cookie })
    expect([bare.status, ((await bare.json()) as { code: string }).code]).toEqual([403, 'FORBIDDEN'])
    const foreign = await post(server, '/sessions', {}, { cookie, origin: 'https://evil.example' })
    expect(foreign.status).toBe(403)
    expect(appendedHead(server.chronicle.store)).toBe(head)
    const own = await post(server, '/sessions', {}, { cookie, origin: server.url })
    expect(own.status).toBe(201)
  })

  it('what a cookie request causes is attributed to its principal (meta.by)', async () => {
    const { token, tokenId } = await createToken(server, 'webby')
    const { cookie } = await login(server, codeOf((await mintLink(server, token)).url))
    expect(await (await whoami(server, { cookie })).json()).toEqual({ id: tokenId, name: 'webby', role: 'operate' })
    const res = await post(server, '/sessions', {}, { cookie, origin: server.url })
    const { session } = (await res.json()) as { session: { id: string } }
    const [created] = server.chronicle.store.readSession(session.id)
    expect(created?.meta.by).toEqual({ id: tokenId, name: 'webby' })

    const ws = await Client.connect(server.wsUrl, undefined, { origin: server.url, headers: { cookie } })
    const reply = await ws.call('session.create', {})
    const id = (reply.result as { session: { id: string } }).session.id
    expect(server.chronicle.store.readSession(id)[0]?.meta.by).toEqual({ id: tokenId, name: 'webby' })
    ws.close()
  })

  it('a bearer token wins over the cookie: a wrong one is refused, another one speaks for its own principal', async () => {
    const { cookie } = await login(server, codeOf((await mintLink(server, server.token)).url))
    const wrong = await whoami(server, { cookie, authorization: 'Bearer wrong-token-wrong-token' })
    expect(wrong.status).toBe(401)
    const { token, tokenId } = await createToken(server, 'reader', 'audit')
    const other = await whoami(server, { cookie, authorization: `Bearer ${token}` })
    expect(((await other.json()) as { id: string }).id).toBe(tokenId)
  })

  it('a code is single use; a wrong or expired code is LOGIN_INVALID (401) with no cookie', async () => {
    const code = codeOf((await mintLink(server, server.token)).url)
    await login(server, code)
    const late = server.chronicle.loginLink()
    offset = 10 * 60 * 1000 + 1
    try {
      for (const attempt of [code, 'not-a-code', codeOf(late.url)]) {
        const res = await post(server, '/login', { code: attempt }, { origin: server.url })
        expect(res.status).toBe(401)
        expect(res.headers.get('set-cookie')).toBeNull()
        expect(res.headers.get('content-type')).toBe('application/problem+json; charset=utf-8')
        expect(await res.json()).toMatchObject({ status: 401, code: 'LOGIN_INVALID', title: 'LOGIN_INVALID' })
      }
    } finally {
      offset = 0
    }
  })

  it('a body that is not {code} is refused: 400 for bad JSON or a missing code, 415 for another content type', async () => {
    for (const body of ['{"code":', '{}', '{"code":""}', '[]', '{"code":42}'])
      expect([body, (await post(server, '/login', body, { origin: server.url })).status]).toEqual([body, 400])
    const empty = await fetch(`${server.url}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
    })
    expect(empty.status).toBe(400)
    const text = await fetch(`${server.url}/login`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: '{"code":"x"}',
    })
    expect(text.status).toBe(415)
  })

  it('Chronicle.loginLink() mints the owner’s link, as the start line prints it', async () => {
    const link = server.chronicle.loginLink()
    expect(link.url).toBe(`${server.url}/login#${link.code}`)
    expect(link.url).toMatch(CODE)
    const { cookie } = await login(server, link.code)
    expect(((await (await whoami(server, { cookie })).json()) as { id: string }).id).toBe('owner')
  })

  it('a web session cannot mint login links (403): a link is minted with a token', async () => {
    const { cookie } = await login(server, codeOf((await mintLink(server, server.token)).url))
    const res = await post(server, '/login-links', {}, { cookie, origin: server.url })
    expect([res.status, ((await res.json()) as { code: string }).code]).toEqual([403, 'FORBIDDEN'])
    expect((await post(server, '/login-links', {})).status).toBe(401)
    expect((await post(server, '/login-links', { x: 1 }, { authorization: `Bearer ${server.token}` })).status).toBe(400)
  })

  it('keeps sessions as HMACs only, in a 0600 file; neither codes nor cookies reach the log', async () => {
    const link = await mintLink(server, server.token)
    const { cookie } = await login(server, codeOf(link.url))
    const file = join(data, 'web-sessions.json')
    expect(statSync(file).mode & 0o777).toBe(0o600)
    const stored = readFileSync(file, 'utf8')
    const secret = cookie.split('=')[1] ?? ''
    expect(stored).not.toContain(secret)
    expect(JSON.parse(stored)).toMatchObject({ version: 1, sessions: expect.any(Array) })
    server.chronicle.logger.flush()
    await new Promise((r) => setTimeout(r, 50))
    const logs = server.logs.join('')
    expect(logs).toContain('web session started')
    expect(logs).not.toContain(codeOf(link.url))
    expect(logs).not.toContain(secret)
  })
})

describe('a web session ends', () => {
  it('with logout: 204, the cookie cleared, its sockets closed (4401), the cookie refused after', async () => {
    const { cookie } = await login(server, codeOf((await mintLink(server, server.token)).url))
    const ws = await Client.connect(server.wsUrl, undefined, { origin: server.url, headers: { cookie } })
    const other = await login(server, codeOf((await mintLink(server, server.token)).url))
    const untouched = await Client.connect(server.wsUrl, undefined, {
      origin: server.url,
      headers: { cookie: other.cookie },
    })

    expect((await post(server, '/logout', '', { cookie })).status).toBe(403) // no Origin: not from the page
    const res = await post(server, '/logout', '', { cookie, origin: server.url })
    expect(res.status).toBe(204)
    expect(res.headers.get('set-cookie')).toBe('chronicle_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0')
    expect(await ws.whenClosed).toBe(4401)
    expect(ws.frames.at(-1)).toMatchObject({ type: 'closing', reason: 'revoked' })
    const after = await whoami(server, { cookie })
    expect([after.status, ((await after.json()) as { code: string }).code]).toEqual([401, 'UNAUTHORIZED'])
    expect((await post(server, '/logout', '', { cookie, origin: server.url })).status).toBe(401)

    expect((await untouched.call('hello', { protocol: 1 })).result).toMatchObject({ protocol: 1 })
    expect((await whoami(server, { cookie: other.cookie })).status).toBe(200)
    untouched.close()
  })

  it('when its principal’s token is revoked: 401, and its sockets close with 4401', async () => {
    const { token, tokenId } = await createToken(server, 'leaver')
    const { cookie } = await login(server, codeOf((await mintLink(server, token)).url))
    const ws = await Client.connect(server.wsUrl, undefined, { origin: server.url, headers: { cookie } })
    const revoked = await fetch(`${server.url}/tokens/${tokenId}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${server.token}` },
    })
    expect(revoked.status).toBe(200)
    expect(await ws.whenClosed).toBe(4401)
    expect((await whoami(server, { cookie })).status).toBe(401)
    const stored = JSON.parse(readFileSync(join(data, 'web-sessions.json'), 'utf8')) as {
      sessions: { principal: string }[]
    }
    expect(stored.sessions.filter((s) => s.principal === tokenId)).toEqual([])
  })

  it('after 30 days', async () => {
    const { cookie } = await login(server, codeOf((await mintLink(server, server.token)).url))
    offset = 30 * DAY - 60_000
    expect((await whoami(server, { cookie })).status).toBe(200)
    offset = 30 * DAY + 1
    try {
      expect((await whoami(server, { cookie })).status).toBe(401)
    } finally {
      offset = 0
    }
  })
})

describe('across restarts', () => {
  it('a cookie survives a restart on the same data dir (HTTP and WebSocket); unused links do not', async () => {
    const own = join(dir, 'data-restart')
    const first = await serve(own)
    const { cookie } = await login(first, codeOf((await mintLink(first, first.token)).url))
    const unused = codeOf((await mintLink(first, first.token)).url)
    await first.stop()

    const second = await serve(own)
    try {
      expect(await (await whoami(second, { cookie })).json()).toEqual({ id: 'owner', name: 'owner', role: 'admin' })
      const ws = await Client.connect(second.wsUrl, undefined, { origin: second.url, headers: { cookie } })
      expect((await ws.call('hello', { protocol: 1 })).result).toMatchObject({ protocol: 1 })
      ws.close()
      const res = await post(second, '/login', { code: unused }, { origin: second.url })
      expect(res.status).toBe(401)
    } finally {
      await second.stop()
    }
  })

  it('a sessions file that is a symlink is refused at start; one that cannot be read is set aside with a warning', async () => {
    const linked = join(dir, 'data-linked')
    mkdirSync(linked, { recursive: true, mode: 0o700 })
    symlinkSync(join(dir, 'secret.txt'), join(linked, 'web-sessions.json'))
    await expect(serve(linked)).rejects.toThrow(/web-sessions\.json is not a regular file/)

    const garbled = join(dir, 'data-garbled')
    mkdirSync(garbled, { recursive: true, mode: 0o700 })
    writeFileSync(join(garbled, 'web-sessions.json'), '{"version":1,"sessions":[{"id":', { mode: 0o644 })
    const s = await serve(garbled)
    try {
      s.chronicle.logger.flush()
      await new Promise((r) => setTimeout(r, 50))
      expect(s.logs.join('')).toContain('holds no web sessions this server can read')
      expect(statSync(join(garbled, 'web-sessions.json')).mode & 0o777).toBe(0o600)
      const { cookie } = await login(s, codeOf((await mintLink(s, s.token)).url))
      expect((await whoami(s, { cookie })).status).toBe(200)
    } finally {
      await s.stop()
    }
  })

  it('replacing the owner’s token ends every web session', async () => {
    const own = join(dir, 'data-rotate')
    const first = await serve(own, { root }, { CHRONICLE_TOKEN: 'first-owner-token-0123456789' })
    const { cookie } = await login(first, codeOf((await mintLink(first, first.token)).url))
    await first.stop()
    const second = await serve(own, { root }, { CHRONICLE_TOKEN: 'second-owner-token-0123456789' })
    try {
      expect((await whoami(second, { cookie })).status).toBe(401)
    } finally {
      await second.stop()
    }
  })
})

describe('limits and switches', () => {
  it('failed logins are rate limited per address: past 20 a minute, 429 RATE_LIMITED, even for a good code', async () => {
    const s = await serve(join(dir, 'data-limit'))
    try {
      for (let i = 0; i < 20; i++)
        expect((await post(s, '/login', { code: `wrong-${i}` }, { origin: s.url })).status).toBe(401)
      const good = codeOf((await mintLink(s, s.token)).url)
      const res = await post(s, '/login', { code: good }, { origin: s.url })
      expect([res.status, ((await res.json()) as { code: string }).code]).toEqual([429, 'RATE_LIMITED'])
      expect(res.headers.get('set-cookie')).toBeNull()
    } finally {
      await s.stop()
    }
  })

  it('web: false serves no page and no login, and accepts no cookie', async () => {
    const off = await serve(join(dir, 'data-off'), false)
    try {
      const auth = { authorization: `Bearer ${off.token}` }
      expect((await fetch(`${off.url}/`)).status).toBe(401)
      expect((await fetch(`${off.url}/`, { headers: auth })).status).toBe(404)
      expect((await fetch(`${off.url}/assets/app.js`, { headers: auth })).status).toBe(404)
      expect((await post(off, '/login', { code: 'x' })).status).toBe(401)
      expect((await post(off, '/login-links', {}, auth)).status).toBe(404)
      expect(() => off.chronicle.loginLink()).toThrow(/web page is off/)
      // a cookie from the server's past (or another server on this host) is not a credential here
      const { cookie } = await login(server, codeOf((await mintLink(server, server.token)).url))
      expect((await whoami(off, { cookie })).status).toBe(401)
    } finally {
      await off.stop()
    }
  })
})
