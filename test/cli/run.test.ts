import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { spawn } from 'node:child_process'
import { cliArgs, run, runInProcess, runToEnd, type ScriptedServer, serveScripted } from './helpers.js'

/**
 * `chronicle run`: one prompt, headless, against a real server process with
 * the scripted model. The answer on stdout, the exit status saying how the
 * run ended, permissions by --allow / --deny and refused otherwise.
 */

const SLOW = 90_000

const SCRIPT = {
  chunkSize: 8,
  steps: [
    { when: { userContains: 'say hello' }, text: 'Hello from the script, in several small deltas.' },
    {
      when: { afterToolResult: false, userContains: 'list files' },
      toolCalls: [{ id: 'call_ls', name: 'bash', input: { command: 'ls', description: 'list' } }],
    },
    { when: { afterToolResult: true, userContains: 'list files' }, text: 'Listed.' },
    { when: { userContains: 'break please' }, error: { status: 400, message: 'the provider refused' } },
    { when: { userContains: 'escape' }, text: 'hi\u001b[2J\u001b]0;owned\u0007 there' },
    {
      when: { userContains: 'sneak', afterToolResult: false },
      toolCalls: [{ id: 'call_sneak', name: 'bash', input: { command: 'ls && touch pwned', description: 'list' } }],
    },
    { when: { userContains: 'sneak', afterToolResult: true }, text: 'Done.' },
    { when: { userContains: 'slowly' }, text: 'one delta after another, '.repeat(12), delayMs: 40 },
  ],
}

let dir: string
let env: Record<string, string>
let served: ScriptedServer

beforeAll(async () => {
  served = await serveScripted('run', SCRIPT)
  ;({ dir, env } = served)
}, SLOW)

afterAll(() => served.stop())

const jsonLines = (text: string) =>
  text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { seq: number; session: string; type: string; data: Record<string, unknown> })

describe('chronicle run', () => {
  it(
    'prints the answer and exits 0 when the run ends normally (a real child process)',
    async () => {
      const r = await runToEnd(['run', '--directory', dir, 'say hello'], env)
      expect(r).toMatchObject({ code: 0, stdout: 'Hello from the script, in several small deltas.\n' })
    },
    SLOW,
  )

  it(
    'takes the prompt from stdin (a real pipe into a child process)',
    async () => {
      const child = run(['run', '--directory', dir], env, dir)
      child.child.stdin.end('please say hello\n')
      expect(await child.exited).toBe(0)
      expect(child.stdout).toBe('Hello from the script, in several small deltas.\n')
    },
    SLOW,
  )

  it('--format json streams the session’s events from the prompt on, one object per line, in seq order', async () => {
    const r = await runToEnd(['run', '--format', 'json', '--directory', dir, 'say hello'], env)
    expect(r.code).toBe(0)
    const events = jsonLines(r.stdout)
    const types = events.map((e) => e.type)
    expect(types[0]).toBe('input.accepted')
    expect(types.at(-1)).toBe('run.finished')
    expect(types).toContain('text.delta')
    expect(new Set(events.map((e) => e.session)).size).toBe(1)
    const seqs = events.map((e) => e.seq)
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b))
    expect(new Set(seqs).size).toBe(seqs.length)
    const text = events.filter((e) => e.type === 'text.delta').map((e) => e.data.text)
    expect(text.join('')).toBe('Hello from the script, in several small deltas.')
  })

  it('--continue goes on in the most recent session', async () => {
    const first = jsonLines(
      (await runInProcess(['run', '--format', 'json', '--directory', dir, 'say hello'], env)).stdout,
    )
    // "most recent" is by last event, and titles are written after a run: let the earlier tests' titles land first
    for (let i = 0; i < 100; i++) {
      const listed = await runInProcess(['sessions'], env)
      if (listed.stdout.startsWith(first[0]?.session as string)) break
      await new Promise((r) => setTimeout(r, 50))
    }
    const again = await runInProcess(['run', '--continue', '--format', 'json', 'say hello once more'], env)
    expect(again.code).toBe(0)
    expect(jsonLines(again.stdout)[0]?.session).toBe(first[0]?.session)
  })

  it('fails closed: a permission no --allow covers is refused, said on stderr, exit 3', async () => {
    const r = await runInProcess(['run', '--format', 'json', '--directory', dir, 'list files'], env)
    expect(r.code).toBe(3)
    expect(r.stderr).toContain(
      "chronicle: refused bash ls: no --allow covers ls (a headless run fails closed; allow it with --allow 'bash:ls')",
    )
    const replied = jsonLines(r.stdout).find((e) => e.type === 'permission.replied')
    expect(replied?.data).toMatchObject({ reply: 'reject' })
    expect(jsonLines(r.stdout).some((e) => e.type === 'tool.completed')).toBe(false)
  })

  it('--allow lets the covered call run', async () => {
    const r = await runInProcess(
      ['run', '--allow', 'read', '--allow', 'bash:ls*', '--directory', dir, 'list files'],
      env,
    )
    expect(r).toMatchObject({ code: 0, stdout: 'Listed.\n' })
    expect(r.stderr).toContain('✓ bash — completed')
  })

  it('a hostile model cannot ride an allowed command: each command of a compound one needs its own --allow', async () => {
    const r = await runInProcess(['run', '--allow', 'bash:ls*', '--directory', dir, 'sneak a file in'], env)
    expect(r.code).toBe(3)
    expect(r.stderr).toContain('no --allow covers touch pwned')
    expect(existsSync(join(dir, 'pwned'))).toBe(false)
  })

  it('a command whose programs cannot all be read is never allowed by a pattern', async () => {
    const { decide } = await import('../../src/cli/run.js')
    const allow = [{ permission: 'bash', pattern: 'ls*', source: 'bash:ls*' }]
    for (const command of ['ls; $cmd', 'ls $(touch pwned)', 'eval "$script"'])
      expect(decide({ permission: 'bash', patterns: [command] }, allow, [])).toMatchObject({ reply: 'reject' })
    expect(decide({ permission: 'bash', patterns: ['ls -la'] }, allow, [])).toMatchObject({ reply: 'once' })
  })

  it('--deny wins over --allow', async () => {
    const r = await runInProcess(['run', '--allow', 'bash', '--deny', 'bash:ls', '--directory', dir, 'list files'], env)
    expect(r.stderr).toContain('chronicle: denied bash ls (--deny)')
    expect(r.stderr).not.toContain('✓ bash')
  })

  it('a hostile answer’s terminal escapes are shown on a terminal, and passed through to a pipe', async () => {
    const { main } = await import('../../src/cli.js')
    const { textTerminal } = await import('./helpers.js')
    const { Readable } = await import('node:stream')
    const saved = { ...process.env }
    Object.assign(process.env, env)
    try {
      let shown = ''
      const terminal = { ...textTerminal((t) => void (shown += t)), width: 200 }
      const io = { stdout: terminal, stderr: textTerminal(() => {}), stdin: Readable.from([]) }
      expect(await main(['run', '--directory', dir, 'escape please'], io)).toBe(0)
      expect(shown).toBe('hi\\x1b[2J\\x1b]0;owned\\x07 there\n')
    } finally {
      process.env = saved
    }
    const piped = await runInProcess(['run', '--directory', dir, 'escape please'], env)
    expect(piped.stdout).toBe('hi\u001b[2J\u001b]0;owned\u0007 there\n')
  })

  it('a run that fails exits 1 and says why', async () => {
    const r = await runInProcess(['run', '--directory', dir, 'break please'], env)
    expect(r.code).toBe(1)
    expect(r.stderr).toContain('the provider refused')
  })

  it.each([
    [['run', '--format', 'xml', 'x'], 'chronicle: --format is text or json'],
    [
      ['run', '--allow', ':x', 'x'],
      "chronicle: --allow/--deny take permission[:pattern], e.g. read or 'bash:git *' (got :x)",
    ],
    [['run', '--session', 's', '--continue', 'x'], 'chronicle: --session or --continue, not both'],
    [['run'], 'chronicle: run needs a prompt: stdin was empty'],
  ])('bad input %j is one line and exit 2', async (args, line) => {
    const r = await runInProcess(args, env)
    expect(r.code).toBe(2)
    expect(r.stderr.split('\n')[0]).toBe(line)
  })

  it('an unknown session is one line and exit 1', async () => {
    const r = await runInProcess(['run', '--session', 'ses_nope', 'hi'], env)
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/^chronicle: SESSION_NOT_FOUND: /)
  })

  it('the token from the data dir is the one the server wrote', () => {
    expect(readFileSync(join(dir, 'data', 'token'), 'utf8').trim().length).toBeGreaterThan(16)
  })
})

describe('chronicle run into a pipe that closes', () => {
  it(
    '`| head -3` ends it quietly with status 0 once head is gone, as `git log | head` does (a real shell pipe)',
    async () => {
      // bash runs the real pipe; PIPESTATUS[0] is chronicle's own status, said on fd 3
      const line = `"${process.execPath}" ${cliArgs(['run', '--format', 'json', '--directory', dir, 'write slowly'])
        .map((a) => `'${a}'`)
        .join(' ')} | head -3; echo "chronicle exited \${PIPESTATUS[0]}" >&3`
      const shell = spawn('bash', ['-c', line], {
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', CHRONICLE_CLI: '1', ...env },
        stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      })
      let stdout = ''
      let stderr = ''
      let status = ''
      shell.stdout?.on('data', (d: Buffer) => (stdout += d))
      shell.stderr?.on('data', (d: Buffer) => (stderr += d))
      shell.stdio[3]?.on('data', (d: Buffer) => (status += d))
      const code = await new Promise<number | null>((resolve) => shell.on('close', resolve))
      expect(code).toBe(0)
      expect(
        stdout
          .trim()
          .split('\n')
          .map((l) => (JSON.parse(l) as { type: string }).type)[0],
      ).toBe('input.accepted')
      expect(stdout.trim().split('\n')).toHaveLength(3)
      expect(stderr).toBe('')
      expect(status).toBe('chronicle exited 0\n')
    },
    SLOW,
  )
})
