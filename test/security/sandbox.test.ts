import { existsSync, readFileSync } from 'node:fs'
import { type AddressInfo, createServer } from 'node:net'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { calls, results, startHostile, type HostileServer } from './hostile-server.js'

/**
 * Findings 4 and 6 (docs/SECURITY.md), through a real server: a hostile model
 * runs shell commands that the user's rules allow (`bash * allow`), and the
 * sandbox, the environment allow-list and the redaction of the server's own
 * secrets are what stop it. Each row asserts the side effect is absent and no
 * secret value reaches the log: neither the raw bytes of the database nor an
 * export.
 */

const API_KEY = 'sk-test-server-api-key-0123456789'
const DB_PASSWORD = 'hunter2-database-password'
const ENV = { OPENAI_API_KEY: API_KEY, DATABASE_URL: `postgres://app:${DB_PASSWORD}@db.example:5432/app` }
/** The user allows every command and path: the rules stop nothing, so what holds is the sandbox's doing. */
const ALLOW_BASH = {
  permission: [
    { permission: 'bash', pattern: '*', action: 'allow' },
    { permission: 'external_directory', pattern: '*', action: 'allow' },
  ],
}

let server: HostileServer | undefined
afterEach(async () => {
  await server?.stop().catch(() => undefined)
  server = undefined
})

const bash = (command: string) => ({ name: 'bash', input: { command } })

async function runBash(commands: string[], files: Record<string, string> = {}) {
  server = await startHostile({ steps: calls(...commands.map(bash)), config: ALLOW_BASH, env: ENV, files })
  const session = await server.prompt('go')
  const events = await server.events(session)
  return { session, events, outputs: results(events) }
}

/** No server secret anywhere in what was logged. */
async function expectNoSecrets(s: HostileServer) {
  const { bytes, exported } = await s.stop()
  for (const secret of [API_KEY, DB_PASSWORD, s.token]) {
    expect(bytes.includes(Buffer.from(secret))).toBe(false)
    expect(exported).not.toContain(secret)
  }
}

describe('the sandbox keeps a command away from the server', () => {
  it("cannot read the server's environment through /proc ($PPID, PID 1, every pid)", async () => {
    const { outputs } = await runBash(['cat /proc/$PPID/environ | tr "\\0" "\\n"; cat /proc/1/environ | tr "\\0" "\\n"; cat /proc/[0-9]*/environ 2>/dev/null | tr "\\0" "\\n" | sort -u'])
    expect(outputs[0]).not.toMatch(/OPENAI_API_KEY|DATABASE_URL|CHRONICLE_/)
    await expectNoSecrets(server as HostileServer)
  })

  it('sees only its own processes', async () => {
    const { outputs } = await runBash(['ps -eo pid,comm --no-headers'])
    expect(outputs[0]).not.toMatch(/node/)
    expect(outputs[0]).toMatch(/^\s*1 /m) // its own PID namespace
  })

  it("cannot read the token or the database in the data directory, nor the user's config", async () => {
    const h = await startHostile({ steps: [], config: ALLOW_BASH })
    const dataDir = h.dataDir
    await h.stop()
    const { outputs } = await runBash([`cat ${join(dataDir, 'token')}; ls -la ${dataDir}; cat ~/.config/chronicle/chronicle.json`])
    const s = server as HostileServer
    expect(outputs[0]).toMatch(/No such file or directory/)
    expect(outputs[0]).not.toContain(s.token)
    expect(outputs[0]).not.toContain('"permission"')
    await expectNoSecrets(s)
  })

  it('writes only inside the session directory and a private /tmp', async () => {
    const { outputs } = await runBash(['touch ~/pwned-home; touch /var/tmp/pwned-var; echo ok > inside.txt; echo private > /tmp/scratch && cat /tmp/scratch'])
    const s = server as HostileServer
    expect(existsSync(join(s.home, 'pwned-home'))).toBe(false)
    expect(existsSync('/var/tmp/pwned-var')).toBe(false)
    expect(readFileSync(join(s.workspace, 'inside.txt'), 'utf8')).toBe('ok\n')
    expect(outputs[0]).toMatch(/Read-only file system/)
    expect(outputs[0]).toContain('private')
  })

  it('has no network, not even loopback: a listener on this machine never hears from it', async () => {
    const listener = createServer()
    let connections = 0
    listener.on('connection', (socket) => {
      connections++
      socket.destroy()
    })
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve))
    const { port } = listener.address() as AddressInfo
    try {
      const { outputs } = await runBash([`(echo hi > /dev/tcp/127.0.0.1/${port}) 2>&1 && echo CONNECTED || echo REFUSED`])
      expect(outputs[0]).toContain('REFUSED')
      expect(connections).toBe(0)
    } finally {
      listener.close()
    }
  })

  it('gets an allow-listed environment: no API key, no DATABASE_URL, no token', async () => {
    const { outputs } = await runBash(['env'])
    expect(outputs[0]).toMatch(/^PATH=/m)
    expect(outputs[0]).not.toMatch(/OPENAI_API_KEY|DATABASE_URL|CHRONICLE_/)
    await expectNoSecrets(server as HostileServer)
  })
})

describe("the server's secrets never enter the log", () => {
  const leaky = { 'leak.txt': `key=${API_KEY}\ndb=${DB_PASSWORD}\n` }

  it('a command printing a secret it found is redacted, in the output and the live progress', async () => {
    const { events, outputs } = await runBash(['cat leak.txt; sleep 0.3; cat leak.txt'], leaky)
    expect(outputs[0]).toContain('key=[redacted:OPENAI_API_KEY]')
    expect(outputs[0]).toContain('db=[redacted:DATABASE_URL:password]')
    const progressed = events.filter((e) => e.type === 'tool.progressed').map((e) => String(e.data.metadata && (e.data.metadata as { output: string }).output))
    expect(progressed.join('')).toContain('[redacted:OPENAI_API_KEY]')
    await expectNoSecrets(server as HostileServer)
  })

  it('a secret split across output chunks is still caught', async () => {
    // the model does not know the key: it prints the two halves of the file's line with a pause between
    const { outputs } = await runBash(["head -c 20 leak.txt; sleep 0.4; tail -c +21 leak.txt | head -1"], leaky)
    expect(outputs[0]).toContain('[redacted:OPENAI_API_KEY]')
    await expectNoSecrets(server as HostileServer)
  })

  it('read, grep and a long output (deflated in the log) are redacted too', async () => {
    server = await startHostile({
      steps: calls(
        { name: 'read', input: { filePath: 'leak.txt' } },
        { name: 'grep', input: { pattern: 'key=' } },
        bash('for i in $(seq 1 400); do echo "line $i $(head -1 leak.txt)"; done'),
      ),
      config: ALLOW_BASH,
      env: ENV,
      files: leaky,
    })
    const session = await server.prompt('go')
    const outputs = results(await server.events(session))
    expect(outputs).toHaveLength(3)
    for (const output of outputs) expect(output).toContain('[redacted:OPENAI_API_KEY]')
    await expectNoSecrets(server)
  })
})
