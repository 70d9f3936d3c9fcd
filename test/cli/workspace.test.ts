import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { run, runInProcess, type Proc } from './helpers.js'

/**
 * `chronicle files`, `diff`, `revert` and `unrevert` as a user runs them
 * against a real server process: a scripted model writes a file in two runs,
 * and the CLI shows the files at each point, the diff between them, and
 * brings the directory back and forth.
 */

const SLOW = 90_000

let dir: string
let work: string
let env: Record<string, string>
let server: Proc
let token: string
let url: string

const SCRIPT = {
  steps: [
    {
      when: { afterToolResult: false, userContains: 'first' },
      toolCalls: [{ id: 'call_1', name: 'write', input: { filePath: 'notes.md', content: 'first draft\n' } }],
    },
    {
      when: { afterToolResult: false, userContains: 'second' },
      toolCalls: [{ id: 'call_2', name: 'write', input: { filePath: 'notes.md', content: 'second draft\n' } }],
    },
    { when: { afterToolResult: true }, text: 'Written.' },
  ],
}

beforeAll(async () => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'chronicle-cli-ws-')))
  work = join(dir, 'work')
  mkdirSync(work)
  writeFileSync(join(work, 'README.md'), '# project\n')
  writeFileSync(join(dir, 'script.json'), JSON.stringify(SCRIPT))
  writeFileSync(
    join(dir, 'chronicle.json'),
    JSON.stringify({ permission: [{ permission: 'edit', pattern: '*', action: 'allow' }] }),
  )
  env = {
    CHRONICLE_DATA_DIR: join(dir, 'data'),
    CHRONICLE_PORT: '0',
    CHRONICLE_MODEL: `scripted:${join(dir, 'script.json')}`,
    CHRONICLE_LOG_LEVEL: 'warn',
  }
  server = run(['serve', '--config', join(dir, 'chronicle.json')], env, dir)
  const [, found] = await server.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+)/)
  url = found as string
  token = readFileSync(join(dir, 'data', 'token'), 'utf8').trim()
  env = { CHRONICLE_URL: url, CHRONICLE_DATA_DIR: join(dir, 'data') }
}, SLOW)

afterAll(async () => {
  server.child.kill('SIGTERM')
  await server.exited
  rmSync(dir, { recursive: true, force: true })
})

async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  })
  return (await res.json()) as T
}

/** Sends a prompt and waits for the session to be idle again; returns the session's last seq. */
async function prompt(session: string, text: string): Promise<number> {
  await api('POST', `/sessions/${session}/inputs`, { parts: [{ type: 'text', text }] })
  for (;;) {
    const { session: s } = await api<{ session: { status: string; lastSeq: number; inbox: unknown[] } }>(
      'GET',
      `/sessions/${session}`,
    )
    if (s.status === 'idle' && s.inbox.length === 0) return s.lastSeq
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

describe('chronicle files / diff / revert / unrevert', () => {
  it(
    'shows the files at a seq, the diff between two, and brings the directory back and forth',
    async () => {
      const { session } = await api<{ session: { id: string } }>('POST', '/sessions', { directory: work })
      const first = await prompt(session.id, 'first')
      const second = await prompt(session.id, 'second')
      expect(readFileSync(join(work, 'notes.md'), 'utf8')).toBe('second draft\n')

      const listed = await runInProcess(['files', session.id, '--at', String(first)], env)
      expect(listed.code).toBe(0)
      expect(listed.stdout).toMatch(/^# workspace of ses_\w+ at seq \d+ \(snapshot of seq \d+, tree [0-9a-f]{12}\)\n/)
      expect(listed.stdout).toContain('  README.md\n')
      expect(listed.stdout).toContain('  notes.md\n')
      const content = await runInProcess(['files', session.id, '--at', String(first), '--path', 'notes.md'], env)
      expect(content.stdout).toBe('first draft\n')

      const diff = await runInProcess(['diff', session.id, '--from', String(first), '--to', String(second)], env)
      expect(diff.stdout).toContain('--- a/notes.md\n+++ b/notes.md\n@@ -1 +1 @@\n-first draft\n+second draft\n')

      const reverted = await runInProcess(['revert', session.id, '--to', String(first)], env)
      expect(reverted.stdout).toMatch(
        /^reverted ses_\w+ to seq \d+: 1 file\(s\) changed \(~notes\.md\), \d+ message\(s\) hidden/,
      )
      expect(readFileSync(join(work, 'notes.md'), 'utf8')).toBe('first draft\n')

      const unreverted = await runInProcess(['unrevert', session.id], env)
      expect(unreverted.code).toBe(0)
      expect(readFileSync(join(work, 'notes.md'), 'utf8')).toBe('second draft\n')

      writeFileSync(join(work, 'notes.md'), 'edited by hand\n')
      const refused = await runInProcess(['revert', session.id, '--to', String(first)], env)
      expect(refused.code).not.toBe(0)
      expect(refused.stderr).toContain('WORKSPACE_CONFLICT')
      expect(refused.stderr).toContain('notes.md')
      expect(readFileSync(join(work, 'notes.md'), 'utf8')).toBe('edited by hand\n')
      const forced = await runInProcess(['revert', session.id, '--to', String(first), '--force'], env)
      expect(forced.code).toBe(0)
      expect(readFileSync(join(work, 'notes.md'), 'utf8')).toBe('first draft\n')

      const usage = await runInProcess(['revert', session.id], env)
      expect(usage.code).toBe(2)
      expect(usage.stderr).toContain('revert needs --to <seq>')

      // a fork over HTTP gets its own directory with the files as they were at the fork point
      const forked = await api<{ session: { id: string; directory: string } }>('POST', `/sessions/${session.id}/fork`, {
        at: second,
      })
      expect(forked.session.directory).toBe(join(dir, 'data', 'forks', forked.session.id))
      expect(readFileSync(join(forked.session.directory, 'notes.md'), 'utf8')).toBe('second draft\n')
      expect(readFileSync(join(work, 'notes.md'), 'utf8')).toBe('first draft\n')
      // and no session may work elsewhere in the data dir
      const inDataDir = await api<{ code: string }>('POST', '/sessions', { directory: join(dir, 'data') })
      expect(inDataDir.code).toBe('DIRECTORY_FORBIDDEN')
    },
    SLOW,
  )
})
