import { hostname } from 'node:os'
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { DEFAULT_LIMITS, loadConfig } from '../../src/config.js'
import { createChronicle } from '../../src/main.js'
import { startServer } from './helpers.js'

/** Configuration: environment variables (README "Configuration"), overridden by a validated chronicle.json. */

const dir = () => mkdtempSync(join(tmpdir(), 'chronicle-config-'))

describe('loadConfig', () => {
  it('has defaults that need nothing set: a per-user data directory, never one under the current directory', () => {
    const cwd = dir()
    const home = dir()
    const config = loadConfig({ env: { HOME: home }, cwd })
    expect(config).toMatchObject({
      dataDir: join(home, '.local', 'share', 'chronicle'),
      sandbox: { mode: 'auto', network: false, env: {}, passEnv: [] },
      tokenSource: undefined,
      host: '127.0.0.1',
      port: 4780,
      token: undefined,
      model: undefined,
      logLevel: 'info',
      mcp: [],
      limits: DEFAULT_LIMITS,
      configFile: undefined,
      store: { url: undefined }, // SQLite in the data directory
    })
  })

  it('joins a cluster only when asked, on PostgreSQL, with a TTL of at least three heartbeats (docs/CLUSTER.md)', () => {
    const home = dir()
    const url = 'postgres://chronicle@127.0.0.1:5432/chronicle'
    expect(loadConfig({ env: { HOME: home, CHRONICLE_DATABASE_URL: url }, cwd: home }).cluster).toBeUndefined()
    const env = { HOME: home, CHRONICLE_DATABASE_URL: url, CHRONICLE_CLUSTER_NODE: 'node-a' }
    expect(loadConfig({ env, cwd: home }).cluster).toEqual({
      node: 'node-a',
      address: undefined,
      heartbeatMs: 1000,
      ttlMs: 5000,
      host: hostname(),
      sharedDirectories: [],
    })
    expect(
      loadConfig({ env: { ...env, CHRONICLE_CLUSTER_SHARED: '/srv/shared/:/mnt/nfs' }, cwd: home }).cluster
        ?.sharedDirectories,
    ).toEqual(['/srv/shared', '/mnt/nfs'])
    expect(() => loadConfig({ env: { ...env, CHRONICLE_CLUSTER_SHARED: 'relative/dir' }, cwd: home })).toThrow(
      /relative\/dir is not an absolute path/,
    )
    expect(
      loadConfig({ env: { ...env, CHRONICLE_CLUSTER_TTL_MS: '900', CHRONICLE_CLUSTER_HEARTBEAT_MS: '300' }, cwd: home })
        .cluster,
    ).toMatchObject({ heartbeatMs: 300, ttlMs: 900 })
    expect(() => loadConfig({ env: { HOME: home, CHRONICLE_CLUSTER_NODE: 'node-a' }, cwd: home })).toThrow(
      /a cluster runs on PostgreSQL/,
    )
    expect(() => loadConfig({ env: { ...env, CHRONICLE_CLUSTER_TTL_MS: '2000' }, cwd: home })).toThrow(
      /at least three heartbeats/,
    )
    expect(() => loadConfig({ env: { ...env, CHRONICLE_CLUSTER_NODE: 'a b/../c' }, cwd: home })).toThrow(
      /cluster node name/,
    )
  })

  it('follows XDG: the data home, then the config home before the data dir for chronicle.json', () => {
    const home = dir()
    const data = join(home, 'xdg-data')
    const conf = join(home, 'xdg-config')
    mkdirSync(join(conf, 'chronicle'), { recursive: true })
    mkdirSync(join(data, 'chronicle'), { recursive: true })
    writeFileSync(join(data, 'chronicle', 'chronicle.json'), JSON.stringify({ port: 1111 }))
    const env = { HOME: home, XDG_DATA_HOME: data, XDG_CONFIG_HOME: conf }
    expect(loadConfig({ env })).toMatchObject({
      dataDir: join(data, 'chronicle'),
      configFile: join(data, 'chronicle', 'chronicle.json'),
      port: 1111,
    })
    writeFileSync(
      join(conf, 'chronicle', 'chronicle.json'),
      JSON.stringify({ port: 2222, token: 'from-the-config-file', sandbox: 'off' }),
    )
    expect(loadConfig({ env })).toMatchObject({
      configFile: join(conf, 'chronicle', 'chronicle.json'),
      port: 2222,
      tokenSource: 'config',
      sandbox: { mode: 'off', network: false },
    })
    expect(loadConfig({ env, configPath: false }).configFile).toBeUndefined()
    // relative XDG paths are ignored, as the XDG spec says
    expect(loadConfig({ env: { HOME: home, XDG_DATA_HOME: 'rel' } }).dataDir).toBe(
      join(home, '.local', 'share', 'chronicle'),
    )
  })

  it('reads the environment contract', () => {
    const config = loadConfig({
      cwd: '/srv',
      env: {
        CHRONICLE_DATA_DIR: 'data',
        CHRONICLE_HOST: '::1',
        CHRONICLE_PORT: '0',
        CHRONICLE_TOKEN: 'a-long-enough-token',
        CHRONICLE_MODEL: 'compatible:qwen',
        CHRONICLE_BASE_URL: 'http://127.0.0.1:11434/v1',
        CHRONICLE_API_KEY: 'k1',
        OPENAI_API_KEY: 'k2',
        OPENAI_BASE_URL: 'http://127.0.0.1:9999/v1',
        CHRONICLE_LOG_LEVEL: 'debug',
        CHRONICLE_EMPTY: '',
      },
    })
    expect(config).toMatchObject({
      dataDir: '/srv/data',
      host: '::1',
      port: 0,
      token: 'a-long-enough-token',
      model: 'compatible:qwen',
      provider: {
        baseURL: 'http://127.0.0.1:11434/v1',
        apiKey: 'k1',
        openaiApiKey: 'k2',
        openaiBaseURL: 'http://127.0.0.1:9999/v1',
      },
      logLevel: 'debug',
    })
  })

  it('takes chronicle.json from the data dir: both MCP shapes, agents, rules and limits', () => {
    const data = dir()
    writeFileSync(
      join(data, 'chronicle.json'),
      JSON.stringify({
        model: 'scripted:demo.json',
        mcp: {
          everything: {
            type: 'local',
            command: ['npx', '@modelcontextprotocol/server-everything'],
            environment: { A: '1' },
          },
          off: { type: 'local', command: ['x'], enabled: false },
          docs: { type: 'remote', url: 'http://127.0.0.1:3001/mcp' },
        },
        mcpServers: {
          fs: { command: 'npx', args: ['@modelcontextprotocol/server-filesystem', '/srv/repo'], env: { B: '2' } },
        },
        agents: { review: { description: 'reviewer', rules: [{ permission: 'edit', pattern: '*', action: 'deny' }] } },
        permission: [{ permission: 'bash', pattern: 'git status*', action: 'allow' }],
        limits: { frameBytes: 2048 },
      }),
    )
    const config = loadConfig({
      env: { CHRONICLE_DATA_DIR: data, CHRONICLE_MODEL: 'openai:gpt-4.1', CHRONICLE_PORT: '4999' },
    })
    expect(config.configFile).toBe(join(data, 'chronicle.json'))
    expect(config.model).toBe('scripted:demo.json') // what the file sets overrides the environment (README "Configuration")…
    expect(config.port).toBe(4999) // …and the environment supplies what it does not
    expect(config.mcp).toEqual([
      {
        name: 'everything',
        type: 'local',
        command: ['npx', '@modelcontextprotocol/server-everything'],
        environment: { A: '1' },
      },
      { name: 'docs', type: 'remote', url: 'http://127.0.0.1:3001/mcp', headers: {} },
      {
        name: 'fs',
        type: 'local',
        command: ['npx', '@modelcontextprotocol/server-filesystem', '/srv/repo'],
        environment: { B: '2' },
      },
    ])
    expect(config.agents).toEqual([
      { name: 'review', description: 'reviewer', rules: [{ permission: 'edit', pattern: '*', action: 'deny' }] },
    ])
    expect(config.rules).toEqual([{ permission: 'bash', pattern: 'git status*', action: 'allow' }])
    expect(config.limits).toEqual({ ...DEFAULT_LIMITS, frameBytes: 2048 })
  })

  it('reports a bad file with the offending paths', () => {
    const data = dir()
    const file = join(data, 'custom.json')
    writeFileSync(file, JSON.stringify({ port: 'x', mcp: { a: { type: 'local', command: [] } }, surprise: true }))
    expect(() => loadConfig({ env: {}, configPath: file })).toThrow(
      new RegExp(
        `invalid config file ${file}:[\\s\\S]*port: [\\s\\S]*mcp\\.a\\.command: [\\s\\S]*Unrecognized key: "surprise"`,
      ),
    )
    writeFileSync(file, '{ not json')
    expect(() => loadConfig({ env: {}, configPath: file })).toThrow(/is not valid JSON/)
    expect(() => loadConfig({ env: { CHRONICLE_PORT: '99999' } })).toThrow(
      /invalid environment:\n {2}- CHRONICLE_PORT:/,
    )
    expect(() => loadConfig({ env: { CHRONICLE_TOKEN: 'short' } })).toThrow(
      /CHRONICLE_TOKEN must be at least 16 characters/,
    )
    // base64 (openssl rand -base64) has / + =, which a WebSocket subprotocol cannot carry
    expect(() => loadConfig({ env: { CHRONICLE_TOKEN: 'q4/Zm9vYmFyYmF6cXV4+w==' } })).toThrow(
      /CHRONICLE_TOKEN may hold only letters, digits and - \. _ ~/,
    )
    expect(loadConfig({ env: { CHRONICLE_TOKEN: 'c0ffee-c0ffee_c0ffee.c0ffee~' } }).token).toBe(
      'c0ffee-c0ffee_c0ffee.c0ffee~',
    )
  })
})

describe('webfetch settings', () => {
  it('default to public hosts only, 5 MiB, 30 s (at most 120) and 5 redirects; the file sets each', () => {
    expect(loadConfig({ env: {}, configPath: false }).webfetch).toEqual({
      allowHosts: [],
      maxBytes: 5 * 1024 * 1024,
      defaultTimeoutSeconds: 30,
      maxTimeoutSeconds: 120,
      maxRedirects: 5,
    })
    const file = join(dir(), 'chronicle.json')
    writeFileSync(
      file,
      JSON.stringify({
        webfetch: {
          allowHosts: ['wiki.corp'],
          maxBytes: 1000,
          timeoutSeconds: 90,
          maxTimeoutSeconds: 60,
          maxRedirects: 0,
        },
      }),
    )
    // a default wait above the maximum is held to the maximum
    expect(loadConfig({ env: {}, configPath: file }).webfetch).toEqual({
      allowHosts: ['wiki.corp'],
      maxBytes: 1000,
      defaultTimeoutSeconds: 60,
      maxTimeoutSeconds: 60,
      maxRedirects: 0,
    })
  })

  it('are refused with the offending paths when they are not what they should be', () => {
    const file = join(dir(), 'chronicle.json')
    writeFileSync(file, JSON.stringify({ webfetch: { allowHosts: 'wiki.corp', maxBytes: -1, allowAll: true } }))
    expect(() => loadConfig({ env: {}, configPath: file })).toThrow(
      /webfetch\.allowHosts: [\s\S]*webfetch\.maxBytes: [\s\S]*Unrecognized key: "allowAll"/,
    )
  })
})

describe('sandbox.hide and sandbox.reveal (docs/SECURITY.md "What the sandbox hides")', () => {
  const load = (home: string, sandbox: unknown, env: Record<string, string> = {}) => {
    const file = join(home, 'chronicle.json')
    writeFileSync(file, JSON.stringify({ sandbox }))
    return loadConfig({ env: { HOME: home, ...env }, configPath: file })
  }

  it("hides the user's credentials under $HOME by default, under both ~/.config and $XDG_CONFIG_HOME", () => {
    const home = dir()
    const { hide, reveal } = loadConfig({ env: { HOME: home } }).sandbox
    expect(hide).toEqual(
      expect.arrayContaining([
        join(home, '.ssh'),
        join(home, '.aws'),
        join(home, '.cargo', 'credentials*'),
        join(home, '.config', 'gh'),
        join(home, '.local', 'share', 'keyrings'),
      ]),
    )
    expect(reveal).toEqual([])
    const xdg = loadConfig({ env: { HOME: home, XDG_CONFIG_HOME: '/xdg/config' } }).sandbox.hide
    expect(xdg).toEqual(expect.arrayContaining([join(home, '.config', 'gh'), '/xdg/config/gh']))
  })

  it("adds the user's entries, ~ expanded and slashes normalised, after the defaults", () => {
    const home = dir()
    const { hide, reveal } = load(home, {
      hide: ['~/.config/op', '/srv//vault/'],
      reveal: ['~/.ssh/known_hosts'],
    }).sandbox
    expect(hide.slice(-2)).toEqual([join(home, '.config', 'op'), '/srv/vault'])
    expect(reveal).toEqual([join(home, '.ssh', 'known_hosts')])
  })

  it('refuses an entry it cannot use: BAD_REQUEST naming the entry and why', () => {
    const home = dir()
    const cases: [string, RegExp][] = [
      ['relative/path', /sandbox\.hide\.0: "relative\/path" must be an absolute path or start with ~\//],
      ['~root/.ssh', /sandbox\.hide\.0: "~root\/.ssh" must be an absolute path or start with ~\//],
      ['~/../etc', /sandbox\.hide\.0: "~\/..\/etc" may not hold "." or ".." segments/],
      ['~/.aws/**', /sandbox\.hide\.0: "~\/.aws\/\*\*" "\*\*" is not supported/],
      ['/', /sandbox\.hide\.0: "\/" "\/" would hide the whole filesystem/],
      ['', /sandbox\.hide\.0: "" must be an absolute path/],
    ]
    for (const [entry, message] of cases) {
      expect(() => load(home, { hide: [entry] })).toThrow(
        expect.objectContaining({ code: 'BAD_REQUEST', message: expect.stringMatching(message) }),
      )
    }
    expect(() => load(home, { reveal: ['~/ok', 'nope'] })).toThrow(
      /sandbox\.reveal\.1: "nope" must be an absolute path/,
    )
  })

  it("never reveals Chronicle's own data directory or config file, by name or by glob", () => {
    const home = dir()
    for (const entry of ['~/.local/share/chronicle', '~/.local/share/chron*', '~/.local/share/chronicle/token']) {
      expect(() => load(home, { reveal: [entry] })).toThrow(
        expect.objectContaining({
          code: 'BAD_REQUEST',
          message: expect.stringMatching(
            /sandbox\.reveal\.0: .* would reveal Chronicle's own data directory or config file/,
          ),
        }),
      )
    }
    expect(() => load(home, { reveal: [join(home, 'chronicle.json')] })).toThrow(/would reveal Chronicle's own/)
    // a reveal of a parent is fine: the data dir, more specific, stays hidden (src/tools/sandbox-mounts.ts)
    expect(load(home, { reveal: ['~/.local/share'] }).sandbox.reveal).toEqual([join(home, '.local', 'share')])
  })
})

describe('sandbox.network (docs/SECURITY.md "The network by host")', () => {
  const load = (sandbox: unknown) => {
    const home = dir()
    const file = join(home, 'chronicle.json')
    writeFileSync(file, JSON.stringify({ sandbox }))
    return loadConfig({ env: { HOME: home }, configPath: file }).sandbox
  }

  it('is false by default, all or nothing as a boolean, and a list of hosts parsed into patterns', () => {
    expect(load({})).toMatchObject({ network: false, unlistedHosts: 'refuse' })
    expect(load({ network: true })).toMatchObject({ network: true, unlistedHosts: 'refuse' })
    expect(
      load({
        network: ['Registry.NPMjs.org', '*.pythonhosted.org', 'api.example.com:443', '[2001:db8::1]:8443', '10.0.0.5'],
        unlistedHosts: 'ask',
      }),
    ).toMatchObject({
      network: [
        { host: 'registry.npmjs.org' },
        { host: '*.pythonhosted.org' },
        { host: 'api.example.com', port: 443 },
        { host: '2001:db8::1', port: 8443 },
        { host: '10.0.0.5' },
      ],
      unlistedHosts: 'ask',
    })
  })

  it('refuses an entry it cannot use, and unlistedHosts without a list, naming each', () => {
    const cases: [unknown, RegExp][] = [
      [{ network: ['http://example.com'] }, /sandbox\.network\.0: "http:\/\/example.com" is a URL: name the host only/],
      [{ network: ['example.com:99999'] }, /sandbox\.network\.0: "example.com:99999" has a port outside 1-65535/],
      [{ network: ['a b'] }, /sandbox\.network\.0: "a b" is not a host name/],
      [{ network: ['ok.org', '*'] }, /sandbox\.network\.1: "\*" is not a host name/],
      [{ network: true, unlistedHosts: 'ask' }, /sandbox\.unlistedHosts: applies to a list of hosts only/],
    ]
    for (const [sandbox, message] of cases)
      expect(() => load(sandbox)).toThrow(
        expect.objectContaining({ code: 'BAD_REQUEST', message: expect.stringMatching(message) }),
      )
  })
})

describe('the store', () => {
  it('CHRONICLE_DATABASE_URL names a PostgreSQL database, store.url in the user’s file overrides it', () => {
    const home = dir()
    const url = 'postgres://chronicle:pw@db.internal:5432/chronicle'
    expect(loadConfig({ env: { HOME: home, CHRONICLE_DATABASE_URL: url } }).store).toEqual({ url })
    const file = join(home, 'chronicle.json')
    writeFileSync(file, JSON.stringify({ store: { url: 'postgresql://other/db' } }))
    expect(loadConfig({ env: { HOME: home, CHRONICLE_DATABASE_URL: url }, configPath: file }).store).toEqual({
      url: 'postgresql://other/db',
    })
  })

  it('anything but a postgres:// URL is refused without echoing it (it may hold a password)', () => {
    const env = { HOME: dir(), CHRONICLE_DATABASE_URL: 'mysql://root:hunter2@db/chronicle' }
    let err: unknown
    try {
      loadConfig({ env })
    } catch (e) {
      err = e
    }
    expect(err).toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('postgres://') })
    expect(String((err as Error).message)).not.toContain('hunter2')
  })

  it('a server told to use a PostgreSQL it cannot reach refuses to start, naming it without its password, and writes nothing', async () => {
    const home = dir()
    const dataDir = join(home, 'data')
    const config = loadConfig({
      env: { HOME: home, CHRONICLE_DATA_DIR: dataDir, CHRONICLE_DATABASE_URL: 'postgres://u:hunter2@127.0.0.1:9/db' },
      configPath: false,
    })
    const started = createChronicle(config)
    await expect(started).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: expect.stringContaining('postgres://u:***@127.0.0.1:9/db'),
    })
    await expect(started).rejects.not.toMatchObject({ message: expect.stringContaining('hunter2') })
    expect(existsSync(dataDir)).toBe(false)
  })
})

describe('a default model the server cannot build', () => {
  it.each([
    ['gpt-4', /unknown model "gpt-4": expected openai:<id>/],
    ['compatible:llama', /needs a base URL/],
  ])('CHRONICLE_MODEL=%s: the server says so at start, with the reason', async (model, reason) => {
    const s = await startServer({ CHRONICLE_MODEL: model, CHRONICLE_LOG_LEVEL: 'warn' })
    try {
      const warning = s.logs
        .map((l) => JSON.parse(l) as { level: number; msg: string; code?: string })
        .find((l) => l.msg.startsWith('the default model cannot be used'))
      expect(warning).toMatchObject({ level: 40, code: 'UNKNOWN_MODEL', msg: expect.stringMatching(reason) })
    } finally {
      await s.close()
    }
  })
})

describe('request logs', () => {
  it('a /health probe is not logged: the other requests are', async () => {
    const s = await startServer({ CHRONICLE_LOG_LEVEL: 'info' }, { listen: false })
    try {
      const headers = { authorization: `Bearer ${s.token}` }
      expect((await s.chronicle.app.inject({ method: 'GET', url: '/health' })).statusCode).toBe(200)
      expect((await s.chronicle.app.inject({ method: 'GET', url: '/sessions', headers })).statusCode).toBe(200)
      const urls = s.logs
        .map((l) => JSON.parse(l) as { req?: { url?: string } })
        .flatMap((l) => (l.req?.url ? [l.req.url] : []))
      expect(urls).toContain('/sessions')
      expect(urls).not.toContain('/health')
    } finally {
      await s.close()
    }
  })
})
