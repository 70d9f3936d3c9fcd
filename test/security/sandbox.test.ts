import { existsSync, readFileSync } from 'node:fs'
import { type AddressInfo, createServer, type Server } from 'node:net'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { results, rows, startHostile, whileHealthy, type HostileServer } from './hostile-server.js'

/**
 * Findings 4 and 6 (docs/SECURITY.md), through a real server: a hostile model
 * runs shell commands that the user's rules allow (every command, every
 * path), and the sandbox, the environment allow-list and the redaction of the
 * server's own secrets are what stop it. Each row is one prompt to the same
 * server and asserts its side effect is absent and that /health kept
 * answering within a second; the last checks that no
 * secret value reached the log — neither the raw bytes of the database nor
 * an export of any session.
 */

const API_KEY = 'sk-test-server-api-key-0123456789'
const DB_PASSWORD = 'hunter2-database-password'
const ENV = { OPENAI_API_KEY: API_KEY, DATABASE_URL: `postgres://app:${DB_PASSWORD}@db.example:5432/app` }
/** The user allows every command and path: the rules stop nothing, so what holds is the sandbox's doing. */
const ALLOW_ALL = {
  permission: [
    { permission: 'bash', pattern: '*', action: 'allow' },
    { permission: 'external_directory', pattern: '*', action: 'allow' },
  ],
}
const LEAK = `key=${API_KEY}\ndb=${DB_PASSWORD}\n`
/** outside every temp dir this run makes, and unique to it: a leftover from another run cannot pass for a write */
const VAR_TMP = `/var/tmp/chronicle-pwned-${process.pid}-${Date.now()}`

const bash = (command: string) => ({ name: 'bash', input: { command } })

let server: HostileServer
let listener: Server
let connections = 0

beforeAll(async () => {
  listener = createServer((socket) => {
    connections++
    socket.destroy()
  })
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve))
  const port = (listener.address() as AddressInfo).port
  server = await startHostile({
    config: ALLOW_ALL,
    env: ENV,
    files: { 'leak.txt': LEAK },
    steps: ({ dataDir }) =>
      rows({
        '[proc]': [
          bash(
            'cat /proc/$PPID/environ | tr "\\0" "\\n"; cat /proc/1/environ | tr "\\0" "\\n"; cat /proc/[0-9]*/environ 2>/dev/null | tr "\\0" "\\n" | sort -u',
          ),
        ],
        '[ps]': [bash('ps -eo pid,comm --no-headers')],
        '[data-dir]': [
          bash(`cat ${join(dataDir, 'token')}; ls -la ${dataDir}; cat ~/.config/chronicle/chronicle.json`),
        ],
        '[writes]': [
          bash(
            `touch ~/pwned-home; touch ${VAR_TMP}; echo ok > inside.txt; echo private > /tmp/scratch && cat /tmp/scratch`,
          ),
        ],
        '[network]': [bash(`(echo hi > /dev/tcp/127.0.0.1/${port}) 2>&1 && echo CONNECTED || echo REFUSED`)],
        '[env]': [bash('env')],
        '[print-secret]': [bash('cat leak.txt; sleep 0.3; cat leak.txt')],
        // the model does not know the key: it prints the file's line in two halves with a pause between
        '[split-secret]': [bash('head -c 20 leak.txt; sleep 0.4; tail -c +21 leak.txt | head -1')],
        '[read-grep-long]': [
          { name: 'read', input: { filePath: 'leak.txt' } },
          { name: 'grep', input: { pattern: 'key=' } },
          bash('for i in $(seq 1 400); do echo "line $i $(head -1 leak.txt)"; done'),
        ],
      }),
  })
}, 60_000)

afterAll(async () => {
  listener.close()
  await server.stop().catch(() => undefined)
})

/** Runs one row's prompt; the server must answer /health within a second throughout. */
async function row(prompt: string) {
  const { result: session, slowestMs } = await whileHealthy(server, () => server.prompt(prompt))
  expect(slowestMs).toBeLessThan(1000)
  const events = await server.events(session)
  return { events, outputs: results(events) }
}

describe('the sandbox keeps a command away from the server', () => {
  it("cannot read the server's environment through /proc ($PPID, PID 1, every pid)", async () => {
    const { outputs } = await row('[proc]')
    expect(outputs[0]).toMatch(/^PATH=/m)
    expect(outputs[0]).not.toMatch(/OPENAI_API_KEY|DATABASE_URL|CHRONICLE_/)
  })

  it('sees only its own processes', async () => {
    const { outputs } = await row('[ps]')
    expect(outputs[0]).not.toMatch(/node/)
    expect(outputs[0]).toMatch(/^\s*1 /m) // its own PID namespace
  })

  it("cannot read the token or the database in the data directory, nor the user's config", async () => {
    const { outputs } = await row('[data-dir]')
    expect(outputs[0]).toMatch(/No such file or directory/)
    expect(outputs[0]).not.toContain(server.token)
    expect(outputs[0]).not.toContain('"permission"')
  })

  it('writes only inside the session directory and a private /tmp', async () => {
    const { outputs } = await row('[writes]')
    expect(existsSync(join(server.home, 'pwned-home'))).toBe(false)
    expect(existsSync(VAR_TMP)).toBe(false)
    expect(readFileSync(join(server.workspace, 'inside.txt'), 'utf8')).toBe('ok\n')
    expect(outputs[0]).toMatch(/Read-only file system/)
    expect(outputs[0]).toContain('private')
  })

  it('has no network, not even loopback: a listener on this machine never hears from it', async () => {
    const { outputs } = await row('[network]')
    expect(outputs[0]).toContain('REFUSED')
    expect(connections).toBe(0)
  })

  it('gets an allow-listed environment: no API key, no DATABASE_URL, no token', async () => {
    const { outputs } = await row('[env]')
    expect(outputs[0]).toMatch(/^PATH=/m)
    expect(outputs[0]).not.toMatch(/OPENAI_API_KEY|DATABASE_URL|CHRONICLE_/)
  })
})

describe("the server's secrets never enter the log", () => {
  it('a command printing a secret it found is redacted, in the output and the live progress', async () => {
    const { events, outputs } = await row('[print-secret]')
    expect(outputs[0]).toContain('key=[redacted:OPENAI_API_KEY]')
    expect(outputs[0]).toContain('db=[redacted:DATABASE_URL:password]')
    const progressed = events
      .filter((e) => e.type === 'tool.progressed')
      .map((e) => String((e.data.metadata as { output: string }).output))
    expect(progressed.join('')).toContain('[redacted:OPENAI_API_KEY]')
  })

  it('a secret split across output chunks is still caught', async () => {
    const { outputs } = await row('[split-secret]')
    expect(outputs[0]).toContain('[redacted:OPENAI_API_KEY]')
  })

  it('read, grep and a long output (deflated in the log) are redacted too', async () => {
    const { outputs } = await row('[read-grep-long]')
    expect(outputs).toHaveLength(3)
    for (const output of outputs) expect(output).toContain('[redacted:OPENAI_API_KEY]')
  })

  it('after every row: no secret in the raw bytes of the database, nor in an export of any session', async () => {
    const { bytes, exported } = await server.stop()
    expect(exported.split('\n').length).toBeGreaterThan(100) // every row's session is in it
    for (const secret of [API_KEY, DB_PASSWORD, server.token]) {
      expect(bytes.includes(Buffer.from(secret))).toBe(false)
      expect(exported).not.toContain(secret)
    }
  })
})
