import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { run, runInProcess, type ScriptedServer, serveScripted } from './helpers.js'

/** `chronicle chat` as a person (or a pipe) uses it: real processes, a real server, the scripted model. */

const SLOW = 90_000

const SCRIPT = {
  chunkSize: 16,
  steps: [
    { when: { userContains: 'say hello' }, text: 'Hello from chat.' },
    {
      when: { afterToolResult: false, userContains: 'list files' },
      toolCalls: [{ id: 'call_ls', name: 'bash', input: { command: 'ls', description: 'list' } }],
    },
    { when: { afterToolResult: true, userContains: 'list files' }, text: 'Listed.' },
  ],
}

let dir: string
let env: Record<string, string>
let url: string
let served: ScriptedServer

beforeAll(async () => {
  served = await serveScripted('chat', SCRIPT)
  ;({ dir, env, url } = served)
}, SLOW)

afterAll(() => served.stop())

const CLOSED = '(that question was answered or closed)'

describe('chronicle chat', () => {
  it(
    'piped input: waits for the answers to what it sent, then exits 0',
    async () => {
      const chat = run(['chat', '--directory', dir], env, dir)
      chat.child.stdin.end('say hello\n')
      expect(await chat.exited).toBe(0)
      expect(chat.stdout).toMatch(/^session ses_\w+\n/)
      expect(chat.stdout).toContain('Hello from chat.\n')
    },
    SLOW,
  )

  it(
    '--continue opens the most recent session and shows its transcript',
    async () => {
      const listed = await runInProcess(['sessions'], env)
      const latest = listed.stdout.split(/\s/)[0] as string
      const chat = run(['chat', '--continue'], env, dir)
      chat.child.stdin.end()
      expect(await chat.exited).toBe(0)
      expect(chat.stdout.split('\n')[0]).toMatch(new RegExp(`^# .* \\(${latest}\\) at seq \\d+ — idle$`))
    },
    SLOW,
  )

  it(
    'a cancel while a question is open drops the question and gives the prompt back',
    async () => {
      const chat = run(['chat', '--directory', dir], env, dir)
      await chat.waitFor(/session ses_\w+/)
      chat.child.stdin.write('list files\n')
      await chat.waitFor(/\? allow bash ls — \[y\]es \/ \[n\]o \/ \[a\]lways: /)
      chat.child.kill('SIGINT')
      await chat.waitFor(/\(run cancelled\)\n/)
      expect(chat.stdout).toContain(CLOSED)
      await chat.waitFor(/\(run cancelled\)\n> $/)
      chat.child.stdin.end()
      expect(await chat.exited).toBe(0)
      expect(chat.stdout + chat.stderr).not.toContain('PERMISSION_REQUEST_NOT_FOUND')
    },
    SLOW,
  )

  it(
    'answering n rejects the call and stops the run: the model is not asked again',
    async () => {
      const chat = run(['chat', '--directory', dir], env, dir)
      await chat.waitFor(/session ses_\w+/)
      chat.child.stdin.write('list files\n')
      await chat.waitFor(/\? allow bash ls/)
      chat.child.stdin.write('n\n')
      await chat.waitFor(/\(run rejected\)\n> $/)
      expect(chat.stdout).toContain('✗ bash — denied')
      expect(chat.stdout).not.toContain('Listed.')
      chat.child.stdin.end()
      expect(await chat.exited).toBe(0)
    },
    SLOW,
  )

  it(
    'a question answered by another client disappears, and the run goes on',
    async () => {
      const chat = run(['chat', '--directory', dir], env, dir)
      const session = (await chat.waitFor(/session (ses_\w+)/))[1] as string
      chat.child.stdin.write('list files\n')
      await chat.waitFor(/\? allow bash ls/)
      const token = readFileSync(join(dir, 'data', 'token'), 'utf8').trim()
      const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
      const state = (await (await fetch(`${url}/sessions/${session}`, { headers })).json()) as {
        session: { pendingPermissions: { requestId: string }[] }
      }
      const requestId = state.session.pendingPermissions[0]?.requestId
      const replied = await fetch(`${url}/sessions/${session}/permissions/${requestId}`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ reply: 'once' }),
      })
      expect(replied.status).toBe(200)
      await chat.waitFor(/Listed\.\n/)
      expect(chat.stdout).toContain(CLOSED)
      chat.child.stdin.end()
      expect(await chat.exited).toBe(0)
    },
    SLOW,
  )
})
