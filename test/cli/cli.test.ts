import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { run, runInProcess, runToEnd, type Proc } from './helpers.js'

/** Real processes start in these tests: a generous timeout for a loaded 2-core CI machine. */
const SLOW = 90_000

/** The `chronicle` CLI as a user runs it: real processes, a real server, a real data directory. */

let dir: string
let data: string
let env: Record<string, string>
let server: Proc
let url: string

const SCRIPT = {
  chunkSize: 32,
  steps: [
    { when: { userContains: 'slowly' }, delayMs: 50, text: 'z'.repeat(32 * 200) },
    {
      when: { afterToolResult: false, userContains: 'echo' },
      toolCalls: [{ id: 'call_1', name: 'bash', input: { command: 'echo cli-ok', description: 'echo' } }],
    },
    { when: { afterToolResult: true }, text: 'The command printed cli-ok.' },
  ],
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'chronicle-cli-'))
  data = join(dir, 'data')
  writeFileSync(join(dir, 'script.json'), JSON.stringify(SCRIPT))
  env = {
    CHRONICLE_DATA_DIR: data,
    CHRONICLE_PORT: '0',
    CHRONICLE_MODEL: `scripted:${join(dir, 'script.json')}`,
    CHRONICLE_LOG_LEVEL: 'warn',
  }
  server = run(['serve'], env, dir)
  const [, found] = await server.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+)/)
  url = found as string
  env = { ...env, CHRONICLE_URL: url }
}, SLOW)

afterAll(async () => {
  server.child.kill('SIGTERM')
  await server.exited
  rmSync(dir, { recursive: true, force: true })
})

describe('chronicle serve', () => {
  it('prints the URL and the token, stored 0600 in the data dir, shown only on the first start; then a working login link', async () => {
    const token = readFileSync(join(data, 'token'), 'utf8').trim()
    await server.waitFor(/^open \S+\n/m)
    const [first, second, ...rest] = server.stdout.trim().split('\n')
    expect([first, rest]).toEqual([
      `Chronicle 0.1.0 listening on ${url} — token (shown once) ${token} stored in ${join(data, 'token')}`,
      [],
    ])
    expect(statSync(join(data, 'token')).mode & 0o777).toBe(0o600)
    const [, link, code] = /^open (http:\/\/127\.0\.0\.1:\d+\/login)#([A-Za-z0-9_-]{43})$/.exec(second ?? '') ?? []
    expect(link).toBe(`${url}/login`)
    const login = await fetch(`${url}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: url },
      body: JSON.stringify({ code }),
    })
    expect([login.status, login.headers.get('set-cookie')]).toEqual([204, expect.stringMatching(/^chronicle_session=/)])
  })

  it(
    'refuses a non-loopback bind without an explicit token',
    async () => {
      const res = await runToEnd(['serve'], {
        CHRONICLE_DATA_DIR: join(dir, 'other'),
        CHRONICLE_HOST: '0.0.0.0',
        CHRONICLE_PORT: '0',
      })
      expect(res.code).toBe(1)
      expect(res.stderr).toContain('refusing to listen on 0.0.0.0')
    },
    SLOW,
  )
})

describe('client commands', () => {
  it(
    'chat: streams, asks permission, answers y, prints the answer; then sessions, show, events, fork',
    async () => {
      const chat = run(['chat', '--directory', dir], env, dir)
      const [, session] = await chat.waitFor(/session (ses_\w+)/)
      chat.child.stdin.write('please echo something\n')
      await chat.waitFor(/\? allow bash echo cli-ok — \[y\]es \/ \[n\]o \/ \[a\]lways: /)
      expect(chat.stdout).toContain('⚙ bash {"command":"echo cli-ok","description":"echo"} — running')
      chat.child.stdin.write('y\n')
      await chat.waitFor(/The command printed cli-ok\.\n/)
      expect(chat.stdout).toContain('✓ bash — completed: cli-ok')
      chat.child.stdin.end()
      expect(await chat.exited).toBe(0)

      const sessions = await runInProcess(['sessions'], env)
      expect(sessions.code).toBe(0)
      expect(sessions.stdout).toMatch(new RegExp(`^${session}  idle `))

      const events = await runInProcess(['events', session as string], env)
      const lines = events.stdout.trim().split('\n')
      expect(lines[0]).toMatch(/^1 {2}\S+ {2}session\.created/)
      const completed = lines.find((l) => / tool\.completed /.test(l)) as string
      const seq = Number(completed.trim().split(/\s+/)[0])

      const show = await runInProcess(['show', session as string, '--at', String(seq)], env)
      expect(show.stdout).toContain(`at seq ${seq}`)
      expect(show.stdout).toContain(
        '⚙ bash {"command":"echo cli-ok","description":"echo"} — completed (approved once by owner): cli-ok',
      )
      expect(show.stdout).not.toContain('The command printed cli-ok.')

      const fork = await runInProcess(['fork', session as string, '--at', String(seq)], env)
      expect(fork.stdout).toMatch(new RegExp(`^forked ${session} at seq ${seq} → ses_\\w+\\n$`))
      const elsewhere = join(dir, 'elsewhere')
      mkdirSync(elsewhere)
      const into = await runInProcess(['fork', session as string, '--at', String(seq), '--dir', elsewhere], env)
      const child = new RegExp(`^forked ${session} at seq ${seq} → (ses_\\w+) in ${elsewhere}\\n$`).exec(
        into.stdout,
      )?.[1]
      const token = readFileSync(join(data, 'token'), 'utf8').trim()
      const got = await fetch(`${url}/sessions/${child}`, { headers: { authorization: `Bearer ${token}` } })
      expect(((await got.json()) as { session: { directory: string } }).session.directory).toBe(elsewhere)

      const missing = await runInProcess(['show', 'ses_nope'], env)
      expect(missing.code).toBe(1)
      expect(missing.stderr).toBe('chronicle: SESSION_NOT_FOUND: no session ses_nope\n')
    },
    SLOW,
  )

  it(
    'chat: Ctrl-C cancels the running run, and the session stays usable',
    async () => {
      const chat = run(['chat', '--directory', dir], env, dir)
      await chat.waitFor(/session (ses_\w+)/)
      chat.child.stdin.write('answer slowly\n')
      await chat.waitFor(/< assistant[^\n]*\nzzzz/)
      chat.child.kill('SIGINT')
      await chat.waitFor(/\(cancelling — Ctrl-C again to quit\)/)
      await chat.waitFor(/\(run cancelled\)\n> $/)
      chat.child.stdin.write('/quit\n')
      expect(await chat.exited).toBe(0)
    },
    SLOW,
  )

  it(
    'events --follow prints the history, then live events with no gap, until Ctrl-C',
    async () => {
      const token = readFileSync(join(data, 'token'), 'utf8').trim()
      const post = (path: string, body: unknown) =>
        fetch(`${url}${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        }).then((r) => r.json() as Promise<Record<string, any>>)
      const session = (await post('/sessions', { directory: dir })).session.id as string
      const follow = run(['events', session, '--follow'], env, dir)
      await follow.waitFor(/^\s+\d+ {2}\S+ {2}session\.created/m)
      await post(`/sessions/${session}/inputs`, { parts: [{ type: 'text', text: 'please echo' }] })
      await follow.waitFor(/ permission\.requested /)
      follow.child.kill('SIGINT')
      expect(await follow.exited).toBe(0)
      const types = follow.stdout
        .trim()
        .split('\n')
        .map((l) => l.trim().split(/\s+/)[2])
      expect(types.slice(0, 4)).toEqual(['session.created', 'input.accepted', 'run.started', 'input.delivered'])
      const seqs = follow.stdout
        .trim()
        .split('\n')
        .map((l) => Number(l.trim().split(/\s+/)[0]))
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b))
      expect(new Set(seqs).size).toBe(seqs.length)
    },
    SLOW,
  )

  it(
    'a wrong token is a clear error',
    async () => {
      const res = await runInProcess(['sessions'], { ...env, CHRONICLE_TOKEN: 'wrong-token-wrong-token' })
      expect(res.code).toBe(1)
      expect(res.stderr).toContain('UNAUTHORIZED')
    },
    SLOW,
  )
})

describe('offline commands', () => {
  it(
    'verify and rebuild refuse while the server runs, in one line; verify --force checks anyway and passes on a healthy log',
    async () => {
      const refused = await runToEnd(['verify'], env)
      expect([refused.code, refused.stderr]).toEqual([
        1,
        `chronicle: a server is running at ${url}: stop it first (it is the log's only writer), or pass --force\n`,
      ])
      const verify = await runToEnd(['verify', '--force'], env)
      expect(verify.code).toBe(0)
      expect(verify.stdout).toMatch(
        /^chain intact: \d+ events; head \d+:[0-9a-f]{64}\n\d+ sessions checked, 0 differences\n(search index through seq \d+ of \d+: \d+ documents checked, 0 differences|no search index \(the server builds it when it starts\))\n$/,
      )
      expect(verify.stderr).toMatch(/verifying sessions \d+\/\d+\n$/)
      const rebuild = await runToEnd(['rebuild'], env)
      expect([rebuild.code, rebuild.stderr]).toEqual([1, refused.stderr])
    },
    SLOW,
  )
})

describe('tokens from the CLI', () => {
  it(
    'token create prints the secret once; whoami speaks for it; list shows no secret; revoke stops it',
    async () => {
      const created = await runInProcess(
        ['token', 'create', '--name', 'alice', '--role', 'operate', '--expires', '30d'],
        env,
      )
      expect(created.code).toBe(0)
      const token = created.stdout.trim()
      expect(token).toMatch(/^tok_\w+\.[\w-]{40,}$/)
      const tokenId = token.split('.')[0] as string

      const me = await runInProcess(['whoami'], { ...env, CHRONICLE_TOKEN: token })
      expect([me.code, me.stdout]).toEqual([0, `alice (${tokenId}): operate, all sessions\n`])
      const owner = await runInProcess(['whoami'], env)
      expect(owner.stdout).toBe('owner (owner): admin, all sessions\n')

      const list = await runInProcess(['token', 'list'], env)
      expect(list.stdout).toMatch(
        new RegExp(`^${tokenId}  alice  operate  all sessions  active until \\S+  by owner \\S+\\n$`),
      )
      expect(list.stdout).not.toContain(token.split('.')[1])

      // an operate token cannot make tokens
      const refused = await runInProcess(['token', 'create', '--name', 'mallory', '--role', 'admin'], {
        ...env,
        CHRONICLE_TOKEN: token,
      })
      expect([refused.code, refused.stderr]).toEqual([1, expect.stringContaining('FORBIDDEN')])

      const revoked = await runInProcess(['token', 'revoke', tokenId], env)
      expect(revoked.stdout).toMatch(new RegExp(`^revoked ${tokenId} \\(alice\\) at \\S+\\n$`))
      const gone = await runInProcess(['whoami'], { ...env, CHRONICLE_TOKEN: token })
      expect([gone.code, gone.stderr]).toEqual([1, expect.stringContaining('UNAUTHORIZED')])
    },
    SLOW,
  )

  it(
    'token revoke takes the name token list shows (a real child process); an unknown name is one line and exit 1',
    async () => {
      const created = await runToEnd(['token', 'create', '--name', 'ci-bot', '--role', 'audit'], env)
      const token = created.stdout.trim()
      const tokenId = token.split('.')[0] as string
      const revoked = await runToEnd(['token', 'revoke', 'ci-bot'], env)
      expect(revoked).toMatchObject({ code: 0, stderr: '' })
      expect(revoked.stdout).toMatch(new RegExp(`^revoked ${tokenId} \\(ci-bot\\) at \\S+\\n$`))
      const gone = await runToEnd(['whoami'], { ...env, CHRONICLE_TOKEN: token })
      expect([gone.code, gone.stderr]).toEqual([1, expect.stringContaining('UNAUTHORIZED')])

      const unknown = await runToEnd(['token', 'revoke', 'nobody-by-this-name'], env)
      expect(unknown).toMatchObject({ code: 1, stdout: '' })
      expect(unknown.stderr).toMatch(
        /^chronicle: no token named nobody-by-this-name or with that id \(chronicle token list\)\n$/,
      )
    },
    SLOW,
  )
})

describe('shares from the CLI', () => {
  it(
    'share prints the link once; list shows it without the link; revoke stops it; a bad role is a usage error',
    async () => {
      const token = readFileSync(join(data, 'token'), 'utf8').trim()
      const res = await fetch(`${url}/sessions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ directory: dir }),
      })
      const session = ((await res.json()) as { session: { id: string } }).session.id

      const created = await runInProcess(['share', session, '--role', 'operate', '--name', 'for bob'], env)
      expect(created.code).toBe(0)
      const link = created.stdout.trim()
      expect(link).toMatch(new RegExp(`^${url}/login#shr_\\w+\\.[\\w-]{43}$`))
      const shareId = /#(shr_\w+)\./.exec(link)?.[1] as string
      expect(created.stderr).toContain(`share ${shareId} (for bob, operate, until `)

      const list = await runInProcess(['share', 'list', '--session', session], env)
      expect(list.stdout).toMatch(
        new RegExp(`^${shareId}  ${session}  for bob  operate  active until \\S+  by owner \\S+\\n$`),
      )
      expect(list.stdout).not.toContain(link.split('#')[1]?.split('.')[1])

      const bad = await runInProcess(['share', session, '--role', 'admin'], env)
      expect([bad.code, bad.stderr]).toEqual([2, expect.stringContaining('share --role is audit or operate')])

      const revoked = await runInProcess(['share', 'revoke', shareId], env)
      expect(revoked.stdout).toMatch(
        new RegExp(`^revoked ${shareId} \\(for bob\\) at \\S+: its open pages were closed\\n$`),
      )
      const again = await runInProcess(['share', 'revoke', shareId], env)
      expect([again.code, again.stderr]).toEqual([1, expect.stringContaining('SHARE_REVOKED')])
    },
    SLOW,
  )
})
