import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { basename, join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, onTestFinished } from 'vitest'
import { buildSystemPrompt } from '../../src/runtime/loop/system-prompt.js'
import { DEFAULT_AGENTS } from '../../src/tools/agents.js'
import { createBuiltinTools } from '../../src/tools/builtin/index.js'
import { createRedactor, secretsOf } from '../../src/tools/redact.js'
import type { Tool } from '../../src/tools/tool.js'
import { truncateOutput } from '../../src/tools/truncate.js'
import { type Fixture, fixture, tempDir } from '../tools/helpers.js'

/**
 * Finding 4 (docs/SECURITY.md), the parts a single tool call plays: the data
 * directory is closed to every tool even inside the session directory, a
 * session reads only its own saved outputs, a symlinked AGENTS.md cannot
 * pull a file from outside the repository into the system prompt, and the
 * secrets the server knows are recognised wherever they hide in its
 * environment.
 */

const allowAll = [{ permission: '*', pattern: '*', action: 'allow' as const }]

describe('the data directory is closed to every tool', () => {
  let tmp: ReturnType<typeof tempDir>
  let f: Fixture
  let tools: Map<string, Tool>
  let dataDir: string
  beforeEach(() => {
    tmp = tempDir()
    dataDir = join(tmp.dir, '.chronicle') // the old default: inside the workspace
    mkdirSync(join(dataDir, 'tool-output', 'ses_other'), { recursive: true })
    writeFileSync(join(dataDir, 'token'), 'the-server-token-0123456789\n')
    writeFileSync(join(dataDir, 'tool-output', 'ses_other', 'bash_prt_9.txt'), 'another session saw this\n')
    f = fixture({ directory: tmp.dir, agentRules: allowAll }) // the rules allow everything: confinement is what holds
    tools = new Map(createBuiltinTools({ dataDir, updateTodos: () => undefined }).map((t) => [t.id, t]))
  })
  afterEach(() => {
    f.gate.close()
    f.store.close()
    tmp.cleanup()
  })

  const attempts: [string, Record<string, unknown>][] = [
    ['read', { filePath: '.chronicle/token' }],
    ['read', { filePath: '.chronicle/tool-output/ses_other/bash_prt_9.txt' }],
    ['write', { filePath: '.chronicle/token', content: 'mine-now-0123456789' }],
    ['edit', { filePath: '.chronicle/chronicle.json', oldString: '', newString: '{}' }],
    ['list', { path: '.chronicle' }],
    ['glob', { pattern: '*', path: '.chronicle' }],
    ['grep', { pattern: 'token', path: '.chronicle' }],
    ['bash', { command: 'pwd', workdir: '.chronicle' }],
  ]
  it.each(attempts)('%s %j is denied, whatever the rules say', async (id, args) => {
    await expect(tools.get(id)?.execute(args as never, f.ctx())).rejects.toMatchObject({
      kind: 'denied',
      message: expect.stringContaining("Chronicle's own data"),
    })
  })

  // Another session's bash (the same directory, its own sandbox) can swap a name on the real path a
  // tool checked, before the tool opens it: the descriptor must be the file the path named.
  it.each([
    ['read', 'notes.txt', { filePath: 'notes.txt' }],
    ['read', 'dir/notes.txt', { filePath: 'dir/notes.txt' }],
    ['grep', 'notes.txt', { pattern: 'MARKER|server-token' }],
    ['grep', 'dir/notes.txt', { pattern: 'MARKER|server-token' }],
  ])('%s of %s while it is swapped for a link to the token never gives the token', async (id, name, args) => {
    // what the swapper moves in, kept out of the workspace (grep finds the good text only through the name)
    const aside = join(tmp.dir, '..', `${basename(tmp.dir)}-aside`)
    mkdirSync(join(aside, 'dir'), { recursive: true })
    writeFileSync(join(aside, 'good.txt'), 'GOOD-MARKER\n')
    writeFileSync(join(aside, 'dir', 'notes.txt'), 'GOOD-MARKER\n')
    mkdirSync(join(dataDir, 'notes-dir'))
    writeFileSync(join(dataDir, 'notes-dir', 'notes.txt'), 'the-server-token-0123456789\n')
    // the file itself swapped for a link to the token, or the directory it is in swapped for a link to
    // a directory of the data dir (with a file of the same name); each held up to 400 µs, so that a
    // slow (loaded) machine's tool still sees the good file whole at times
    const swap =
      name === 'notes.txt'
        ? [join(tmp.dir, 'notes.txt'), `hard:${join(aside, 'good.txt')}`, `link:${join(dataDir, 'token')}`, '400']
        : [join(tmp.dir, 'dir'), `dir:${join(aside, 'dir')}`, `link:${join(dataDir, 'notes-dir')}`, '400']
    const attacker = await swapper([swap[0] as string, '1500', ...swap.slice(1)])
    onTestFinished(() => rmSync(aside, { recursive: true, force: true }))
    const tool = tools.get(id) as Tool
    let good = 0
    let leaked = 0
    for (const until = performance.now() + 1000; performance.now() < until; ) {
      const output = await tool.execute(args, f.ctx()).then(
        (r) => r.output,
        (err: Error) => err.message, // refused, not found, replaced: anything but the token
      )
      if (output.includes('GOOD-MARKER')) good++
      if (output.includes('server-token')) leaked++
    }
    expect(await exited(attacker)).toBe(0) // it swapped to the end
    expect(good).toBeGreaterThan(0) // the race was run: the file was read while it held
    expect(leaked).toBe(0)
  })

  it('write into a directory swapped for a link into the data dir never writes there', async () => {
    const aside = join(tmp.dir, '..', `${basename(tmp.dir)}-aside`)
    mkdirSync(join(aside, 'dir'), { recursive: true })
    mkdirSync(join(dataDir, 'notes-dir'))
    const swap = [`dir:${join(aside, 'dir')}`, `link:${join(dataDir, 'notes-dir')}`, '400']
    const attacker = await swapper([join(tmp.dir, 'dir'), '1500', ...swap])
    onTestFinished(() => rmSync(aside, { recursive: true, force: true }))
    const write = tools.get('write') as Tool
    let written = 0
    for (let i = 0, until = performance.now() + 1000; performance.now() < until; i++) {
      // a new name each time: creating a file needs no earlier read
      await write.execute({ filePath: `dir/new-${i}.txt`, content: 'MINE' }, f.ctx()).then(
        () => written++,
        () => undefined, // refused, replaced, not found
      )
    }
    expect(await exited(attacker)).toBe(0) // it swapped to the end
    const inDataDir = readdirSync(join(dataDir, 'notes-dir'))
    expect(written).toBeGreaterThan(0) // the race was run: files were written while the directory held
    // what a swap can still leave there is an empty file (made by the open, refused before any write)
    expect(inDataDir.filter((n) => readFileSync(join(dataDir, 'notes-dir', n), 'utf8') !== '')).toEqual([])
  })

  it('a session reads its own saved outputs, and only its own', async () => {
    const own = truncateOutput('x\n'.repeat(3000), { dataDir, sessionId: f.sessionId, name: 'bash_prt_1' })
    const read = tools.get('read') as Tool
    expect((await read.execute({ filePath: own.outputPath }, f.ctx())).output).toContain('00001| x')
    await expect(
      read.execute({ filePath: join(dataDir, 'tool-output', 'ses_other', 'bash_prt_9.txt') }, f.ctx()),
    ).rejects.toMatchObject({ kind: 'denied' })
  })
})

describe('instruction files stay inside the repository', () => {
  let tmp: ReturnType<typeof tempDir>
  beforeEach(() => {
    tmp = tempDir()
  })
  afterEach(() => tmp.cleanup())

  it('a symlinked AGENTS.md pointing outside is not read; one pointing inside is', () => {
    const repo = join(tmp.dir, 'repo')
    mkdirSync(join(repo, '.git'), { recursive: true })
    mkdirSync(join(repo, 'docs'))
    writeFileSync(join(tmp.dir, 'outside-secret.txt'), 'OUTSIDE-MARKER: ssh key material')
    writeFileSync(join(repo, 'docs', 'rules.md'), 'INSIDE-MARKER: use tabs')
    const env = { platform: 'test', date: '2026-01-01' }
    const build = DEFAULT_AGENTS[0] as (typeof DEFAULT_AGENTS)[number]

    symlinkSync(join(tmp.dir, 'outside-secret.txt'), join(repo, 'AGENTS.md'))
    expect(buildSystemPrompt(build, repo, env)).not.toContain('OUTSIDE-MARKER')
    symlinkSync('/etc/hostname', join(repo, 'CLAUDE.md'))
    expect(buildSystemPrompt(build, repo, env)).not.toContain('Instructions from')

    const sub = join(repo, 'pkg')
    mkdirSync(sub)
    symlinkSync(join(repo, 'docs', 'rules.md'), join(sub, 'AGENTS.md'))
    expect(buildSystemPrompt(build, sub, env)).toContain('INSIDE-MARKER: use tabs')
  })

  it('an AGENTS.md that is no file gives way to CLAUDE.md, whose text reaches the prompt exactly as written', () => {
    // a directory, a dangling link and a link loop are all answers "no file", never a failure or a read
    const env = { platform: 'test', date: '2026-01-01' }
    const build = DEFAULT_AGENTS[0] as (typeof DEFAULT_AGENTS)[number]
    const text = 'SHORT-MARKER' // far shorter than the 64 KiB read: nothing past its end may follow it
    const cases: [string, (agents: string) => void][] = [
      ['a directory', (agents) => mkdirSync(agents)],
      ['a dangling link', (agents) => symlinkSync(join(tmp.dir, 'nothing-here'), agents)],
      ['a link loop', (agents) => symlinkSync(agents, agents)],
    ]
    for (const [what, make] of cases) {
      const repo = join(tmp.dir, what.replaceAll(' ', '-'))
      mkdirSync(join(repo, '.git'), { recursive: true })
      make(join(repo, 'AGENTS.md'))
      writeFileSync(join(repo, 'CLAUDE.md'), text)
      const system = buildSystemPrompt(build, repo, env)
      expect(system.endsWith(`Instructions from: ${join(repo, 'CLAUDE.md')}\n${text}`), what).toBe(true)
    }
  })

  // Another session's bash (the same directory, its own sandbox) can swap AGENTS.md while this one
  // builds its prompt: what was checked must be what is read. Each spec builds prompts for a second
  // while a real process swaps the name thousands of times.
  const env = { platform: 'test', date: '2026-01-01' }
  const build = DEFAULT_AGENTS[0] as (typeof DEFAULT_AGENTS)[number]
  const repoWithRules = () => {
    const repo = join(tmp.dir, 'repo')
    mkdirSync(join(repo, '.git'), { recursive: true })
    mkdirSync(join(repo, 'docs'))
    writeFileSync(join(repo, 'docs', 'rules.md'), 'INSIDE-MARKER: use tabs')
    return { repo, rules: join(repo, 'docs', 'rules.md') }
  }

  it('an AGENTS.md swapped between a link inside and a link to a secret outside never brings the secret in', async () => {
    const { repo, rules } = repoWithRules()
    const secret = join(tmp.dir, 'outside-secret.txt')
    writeFileSync(secret, 'OUTSIDE-MARKER: ssh key material')
    const attacker = await swapper([join(repo, 'AGENTS.md'), '1500', `link:${rules}`, `link:${secret}`])
    let builds = 0
    let inside = 0
    let leaked = 0
    for (const until = performance.now() + 1000; performance.now() < until; builds++) {
      const system = buildSystemPrompt(build, repo, env)
      if (system.includes('INSIDE-MARKER')) inside++
      if (system.includes('OUTSIDE-MARKER')) leaked++
    }
    expect(await exited(attacker)).toBe(0) // it swapped to the end
    expect(inside).toBeGreaterThan(0) // the race was run: the good link was read while it held
    expect({ builds: builds > 100, leaked }).toEqual({ builds: true, leaked: 0 })
  })

  it('an AGENTS.md swapped for a FIFO never stalls the server: every prompt is built at once', async () => {
    const { repo, rules } = repoWithRules()
    const fifo = join(tmp.dir, 'pipe')
    execFileSync('mkfifo', [fifo])
    mkdirSync(join(repo, 'pipes'))
    const inRepo = join(repo, 'pipes', 'pipe') // inside the repository, so only the kind of file can refuse it
    execFileSync('ln', [fifo, inRepo])
    const attacker = await swapper([join(repo, 'AGENTS.md'), '1500', `hard:${rules}`, `hard:${inRepo}`])
    let builds = 0
    let slowest = 0
    for (const until = performance.now() + 1000; performance.now() < until; builds++) {
      const started = performance.now()
      buildSystemPrompt(build, repo, env)
      slowest = Math.max(slowest, performance.now() - started)
    }
    expect(await exited(attacker)).toBe(0) // and let go of a reader stuck opening the FIFO, if one was
    expect(builds).toBeGreaterThan(100)
    expect(slowest).toBeLessThan(250) // a blocked open waits for the attacker's release, 500 ms or more
  })
})

/** The name swapper (name-swapper.cjs), once it swaps. */
async function swapper(args: string[]): Promise<ChildProcess> {
  const child = spawn(process.execPath, [join(import.meta.dirname, 'name-swapper.cjs'), ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  await new Promise<void>((resolve, reject) => {
    child.stdout?.once('data', () => resolve())
    child.once('exit', (code) => reject(new Error(`the swapper exited ${code} before it swapped`)))
  })
  return child
}

function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode)
  return new Promise((resolve) => child.once('exit', resolve))
}

describe('the secrets the server knows', () => {
  it('are credential-named variables and passwords inside URLs, whatever the variable is called', () => {
    const secrets = secretsOf({
      OPENAI_API_KEY: 'sk-abcdefghijklmnop',
      DATABASE_URL: 'postgres://app:correct-horse-battery@db:5432/app',
      REDIS: 'redis://:another-long-password@cache:6379',
      HOME: '/home/me',
      EDITOR: 'vim',
    })
    expect(secrets.map((s) => s.name)).toEqual([
      'OPENAI_API_KEY',
      'DATABASE_URL:password',
      'DATABASE_URL:credentials',
      'REDIS:password',
      'REDIS:credentials',
    ])
    const redact = createRedactor(secrets)
    expect(redact.text('key sk-abcdefghijklmnop and url postgres://app:correct-horse-battery@db')).toBe(
      'key [redacted:OPENAI_API_KEY] and url postgres://[redacted:DATABASE_URL:credentials]db',
    )
    expect(redact.value({ nested: ['correct-horse-battery', 1, null] })).toEqual({
      nested: ['[redacted:DATABASE_URL:password]', 1, null],
    })
    expect(redact.text('/home/me')).toBe('/home/me') // not a secret
  })

  it('are caught across the pieces of a stream, and short values are left alone', () => {
    const redact = createRedactor([
      { name: 'TOKEN', value: 'abcdefghijklmnopqrstuvwxyz' },
      { name: 'PIN', value: '1234' },
    ])
    const stream = redact.stream()
    const out = ['xx abcdefgh', 'ijklmnopq', 'rstuvwxyz yy 1234'].map((p) => stream.push(p)).join('') + stream.end()
    expect(out).toBe('xx [redacted:TOKEN] yy 1234')
  })
})
