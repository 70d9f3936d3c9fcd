import { type ChildProcess, execFileSync, spawn, type SpawnOptions } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createBashTool, outsidePaths } from '../../src/tools/builtin/bash.js'
import { type Fixture, fixture, tempDir } from './helpers.js'

const allow = (permission: string, pattern: string) => ({ permission, pattern, action: 'allow' as const })
const deny = (permission: string, pattern: string) => ({ permission, pattern, action: 'deny' as const })

/** Live processes in a process group, from `ps`. */
function groupMembers(pgid: number): number[] {
  const out = execFileSync('ps', ['-eo', 'pid=,pgid=,stat='], { encoding: 'utf8' })
  return out
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .filter(([, g, stat]) => Number(g) === pgid && !stat?.startsWith('Z'))
    .map(([p]) => Number(p))
}

/** Alive = listed by ps and not a zombie (a zombie is dead, merely not yet reaped by PID 1). */
function isAlive(pid: number): boolean {
  const out = execFileSync('ps', ['-eo', 'pid=,stat='], { encoding: 'utf8' })
  return out.split('\n').some((l) => {
    const [p, stat] = l.trim().split(/\s+/)
    return Number(p) === pid && !stat?.startsWith('Z')
  })
}

// A shell that ignores TERM and leaves two children that ignore it too.
const STUBBORN = `trap '' TERM; sleep 1000 & echo "child $!"; (trap '' TERM; sleep 1000) & echo "child $!"; echo ready; wait`

describe('bash tool', () => {
  let tmp: ReturnType<typeof tempDir>
  let f: Fixture
  let spawned: string[]
  const spy = (command: string, args: readonly string[], options: SpawnOptions): ChildProcess => {
    spawned.push(args.join(' '))
    return spawn(command, args, options)
  }
  const tool = (env?: NodeJS.ProcessEnv) =>
    createBashTool({ dataDir: join(tmp.dir, 'data'), killGraceMs: 300, spawn: spy, ...(env && { env }) })

  beforeEach(() => {
    tmp = tempDir()
    spawned = []
    f = fixture({ directory: tmp.dir, agentRules: [allow('bash', '*')] })
  })
  afterEach(() => {
    f.gate.close()
    f.store.close()
    tmp.cleanup()
  })

  it('runs in the session directory and returns output and exit code, with live progress', async () => {
    const ctx = f.ctx()
    const result = await tool().execute({ command: 'pwd; echo out; echo err >&2; exit 3' }, ctx)
    expect(result.output).toBe(`${tmp.dir}\nout\nerr\n<bash_metadata>\nexit code: 3\n</bash_metadata>`)
    expect(result.metadata).toMatchObject({ exitCode: 3, timedOut: false, truncated: false })
    // live progress carries only what is new each time: together, the whole output
    expect(ctx.progressed.map((p) => p['output']).join('')).toBe(`${tmp.dir}\nout\nerr\n`)
  })

  it('on timeout kills the whole process group, even children that ignore SIGTERM (checked with ps)', async () => {
    const ctx = f.ctx()
    const result = await tool().execute({ command: STUBBORN, timeout: 1000 }, ctx)
    const pgid = result.metadata?.['pid'] as number
    const children = [...result.output.matchAll(/child (\d+)/g)].map((m) => Number(m[1]))
    expect(children.length).toBe(2)
    expect(result.metadata).toMatchObject({ timedOut: true })
    expect(result.output).toContain('The command timed out after 1000 ms; its process group was killed.')
    expect(groupMembers(pgid)).toEqual([])
    expect(children.filter(isAlive)).toEqual([])
  })

  it('on cancel kills the whole process group and fails as aborted', async () => {
    const ac = new AbortController()
    const ctx = f.ctx({ abort: ac.signal })
    const running = tool().execute({ command: STUBBORN }, ctx)
    const outcome = running.catch((e) => e)
    const live = () => ctx.progressed.map((p) => p['output']).join('')
    for (let i = 0; i < 100 && !live().includes('ready'); i++) {
      await new Promise((r) => setTimeout(r, 50))
    }
    const output = live()
    const children = [...output.matchAll(/child (\d+)/g)].map((m) => Number(m[1]))
    expect(children.length).toBe(2)
    expect(children.filter(isAlive)).toEqual(children)
    ac.abort()
    const err = await outcome
    expect(err).toMatchObject({ name: 'ToolFailure', kind: 'aborted' })
    expect(err.message).toContain('The command was cancelled; its process group was killed.')
    expect(children.filter(isAlive)).toEqual([])
  })

  it('a denied command never starts a process', async () => {
    const g = fixture({ directory: tmp.dir, agentRules: [allow('bash', '*'), deny('bash', 'touch *')] })
    await expect(tool().execute({ command: 'touch marker' }, g.ctx())).rejects.toMatchObject({ kind: 'denied' })
    expect(spawned).toEqual([])
    expect(existsSync(join(tmp.dir, 'marker'))).toBe(false)
    g.gate.close()
    g.store.close()
  })

  it('`git fetch && git clean -fd` is blocked when `git clean *` is denied, and nothing runs', async () => {
    const g = fixture({ directory: tmp.dir, agentRules: [allow('bash', '*')], rules: [deny('bash', 'git clean *')] })
    const err = await tool()
      .execute({ command: 'git fetch && git clean -fd' }, g.ctx())
      .catch((e) => e)
    expect(err).toMatchObject({ kind: 'denied' })
    expect(err.message).toContain('"git clean -fd"')
    expect(spawned).toEqual([])
    expect(g.events().map((e) => e.type)).toEqual(['session.created'])
    g.gate.close()
    g.store.close()
  })

  it('a command that needs approval waits for it before spawning', async () => {
    const g = fixture({ directory: tmp.dir }) // build agent: bash asks
    const running = tool().execute({ command: 'echo approved' }, g.ctx())
    await new Promise((r) => setImmediate(r))
    expect(spawned).toEqual([])
    expect(g.requested().map((d) => d.patterns)).toEqual([['echo approved']])
    g.store.append(g.sessionId, [{ type: 'permission.replied', data: { requestId: 'per_000001', reply: 'once' } }], {
      meta: { actor: 'user' },
    })
    expect((await running).output).toContain('approved')
    expect(spawned).toEqual(['-c echo approved'])
    g.gate.close()
    g.store.close()
  })

  it('commands get an allow-listed environment: no keys, tokens, Chronicle settings or unknown variables', async () => {
    const env = {
      PATH: process.env['PATH'],
      HOME: tmp.dir,
      OPENAI_API_KEY: 'sk-leak-1',
      MY_SERVICE_TOKEN: 'leak-2',
      CHRONICLE_TOKEN: 'leak-3',
      DB_PASSWORD: 'leak-4',
      DATABASE_URL: 'postgres://u:leak-5@db.example/app',
      UNKNOWN: 'not-listed',
      LC_ALL: 'C.UTF-8',
    }
    const result = await tool(env).execute({ command: 'env' }, f.ctx())
    expect(result.output).toContain(`HOME=${tmp.dir}`)
    expect(result.output).toContain('LC_ALL=C.UTF-8')
    expect(result.output).not.toMatch(/leak-|sk-leak|not-listed/)
    // the user's config may add variables and pass named ones through
    const configured = createBashTool({
      dataDir: join(tmp.dir, 'data'),
      env,
      childEnv: { set: { FOO: 'bar' }, pass: ['UNKNOWN'] },
    })
    const more = await configured.execute({ command: 'env' }, f.ctx())
    expect(more.output).toContain('FOO=bar')
    expect(more.output).toContain('UNKNOWN=not-listed')
    expect(more.output).not.toMatch(/leak-/)
  })

  it("long output keeps its head and tail, with the full text saved in the session's own directory and pointed to", async () => {
    const result = await tool().execute({ command: 'seq 1 3000' }, f.ctx())
    const path = result.metadata?.['outputPath'] as string
    expect(result.metadata?.['truncated']).toBe(true)
    expect(path).toBe(join(tmp.dir, 'data', 'tool-output', 'ses_test', 'bash_prt_1.txt'))
    expect(result.output).toContain(`The full output is saved at ${path}`)
    expect(result.output.startsWith('1\n2\n3\n')).toBe(true)
    expect(result.output).toContain('\n3000\n')
    expect(result.output).not.toMatch(/^1000$/m) // the middle is only in the saved file
    expect(result.output.split('\n').length).toBeLessThanOrEqual(2000)
    const saved = readFileSync(path, 'utf8').split('\n')
    expect(saved.slice(0, 3)).toEqual(['1', '2', '3'])
    expect(saved).toContain('3000')
  })

  it('file commands with paths outside the session directory need external_directory; paths inside do not', async () => {
    const work = join(tmp.dir, 'work')
    mkdirSync(work)
    writeFileSync(join(work, 'inside.txt'), 'inside\n')
    const g = fixture({ directory: work, agentRules: [allow('bash', '*'), deny('external_directory', '*')] })
    for (const command of [
      'cat ../secret.txt',
      `cat ${tmp.dir}/secret.txt`,
      'cd /etc && ls',
      'echo hi && rm -rf ~/x',
      'ls ../work-evil',
    ]) {
      await expect(tool().execute({ command }, g.ctx()), command).rejects.toMatchObject({ kind: 'denied' })
    }
    expect(spawned).toEqual([])
    expect((await tool().execute({ command: 'cat ./inside.txt && ls sub/../' }, g.ctx())).output).toContain('inside\n')
    expect(outsidePaths('cp a.txt /tmp/b.txt; echo /not/a/file/arg', work, work)).toEqual(['/tmp/b.txt'])
    g.gate.close()
    g.store.close()
  })

  it('a workdir outside the session directory needs external_directory', async () => {
    const g = fixture({ directory: tmp.dir, agentRules: [allow('bash', '*'), deny('external_directory', '*')] })
    await expect(tool().execute({ command: 'ls', workdir: '..' }, g.ctx())).rejects.toMatchObject({ kind: 'denied' })
    expect(spawned).toEqual([])
    g.gate.close()
    g.store.close()
  })
})
