import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'
import { decidePermission } from '../../src/commands/permission.js'
import { execute } from '../../src/commands/execute.js'
import { createBuiltinTools } from '../../src/tools/builtin/index.js'
import { credentialPaths } from '../../src/tools/credentials/credential-paths.js'
import { bwrapSandbox } from '../../src/tools/sandbox.js'
import type { Tool, ToolFailure } from '../../src/tools/tool.js'
import { type Fixture, fixture } from '../tools/helpers.js'
import { CREDENTIALS, type CredentialHome, credentialHome, leaked, USER_HIDE } from './credentials-fixture.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/**
 * The user's credentials are hidden from every tool by default (docs/SECURITY.md
 * "What the sandbox hides"). A hostile model that the rules let run any
 * command and touch any path outside the workspace (bash, edit and
 * external_directory allowed) tries each way to a secret in a fake HOME: cat,
 * ls, find, tar, cp and a symlink in the workspace through the real bash tool
 * in the real bubblewrap sandbox, and read, edit, write, list, glob and grep
 * through their own execute paths with the real permission gate, where every
 * request it raises is rejected. None returns a secret. The same table with
 * the user's `sandbox.reveal` returns each one — the commands do reach them.
 */

const RULES = [
  { permission: 'bash', pattern: '*', action: 'allow' as const },
  { permission: 'edit', pattern: '*', action: 'allow' as const },
  { permission: 'external_directory', pattern: '*', action: 'allow' as const },
]

let h: CredentialHome

beforeAll(() => {
  h = credentialHome()
})
afterAll(() => h.cleanup())

/** The built-in tools as the server makes them from the user's config file for this HOME. */
function toolsFor(sandboxConfig: Record<string, unknown>, name: string) {
  const configFile = join(h.root, `${name}.json`)
  writeFileSync(configFile, JSON.stringify({ sandbox: sandboxConfig }))
  const config = loadConfig({ env: { HOME: h.home }, configPath: configFile, cwd: h.root })
  const credentials = credentialPaths(config.sandbox)
  const tools = createBuiltinTools({
    dataDir: join(h.root, 'data'),
    credentials,
    sandbox: bwrapSandbox({ credentials, hidden: [config.dataDir, configFile] }),
    env: { PATH: process.env.PATH, HOME: h.home },
    updateTodos: () => undefined,
  })
  return new Map(tools.map((t) => [t.id, t] as const))
}

interface Outcome {
  readonly output: string
  readonly failure?: ToolFailure
  /** the permissions the call asked for: [permission, patterns] */
  readonly asked: (readonly [string, readonly string[]])[]
}

/** Runs a tool's execute in a session of `directory`; every request it raises is rejected, as a wary user would. */
async function call(tool: Tool, args: Record<string, unknown>, directory = h.workspace): Promise<Outcome> {
  const f = fixture({ directory, rules: RULES })
  try {
    let done = false
    const running = tool.execute(args, f.ctx()).then(
      (r) => ({ output: r.output }),
      (failure: ToolFailure) => ({ output: '', failure }),
    )
    void running.then(() => {
      done = true
    })
    while (!done) {
      for (const requestId of pending(f)) await reject(f, requestId)
      await new Promise((r) => setTimeout(r, 5))
    }
    const result = await running
    return { ...result, asked: f.requested().map((r) => [r.permission, r.patterns] as const) }
  } finally {
    f.gate.close()
    f.store.close()
  }
}

function pending(f: Fixture): string[] {
  const replied = new Set(f.events(['permission.replied']).map((e) => (e.data as { requestId: string }).requestId))
  return f.requested().flatMap((r) => (replied.has(r.requestId) ? [] : [r.requestId]))
}

async function reject(f: Fixture, requestId: string) {
  await execute(
    sqlitePorts(f.store),
    f.sessionId,
    (s) => decidePermission({ type: 'reply', requestId, reply: 'reject' }, s, f.sessionId, f.ids),
    {
      meta: { actor: 'user', request: requestId },
    },
  )
}

/** The path a row's config entry hides: the directory or file, or for a glob the file it matched. */
function top(i: number): string {
  const entry = (CREDENTIALS[i] as readonly [string, string])[1]
  return entry.includes('*') ? h.file(i) : join(h.home, entry.slice(2))
}

const rows = () => CREDENTIALS.map((_, i) => i)

/**
 * One bash command per way in, run over every row; `@@i@@` marks where row i's output starts. `leaks` says
 * which rows' secrets came out — for ls, which only names files, a file shown at its real size.
 */
const WAYS: Record<string, { command: (i: number) => string; leaks: (i: number, out: string) => boolean }> = {
  cat: { command: (i) => `cat ${h.file(i)}`, leaks: (i, out) => out.includes(h.secret(i)) },
  ls: {
    command: (i) => `ls -lAR ${top(i)}`,
    leaks: (i, out) =>
      out
        .split('\n')
        .some(
          (l) =>
            /[ /]$/.test(l.slice(0, -basename(h.file(i)).length)) &&
            l.endsWith(basename(h.file(i))) &&
            l.split(/\s+/)[4] === String(h.secret(i).length + 1),
        ),
  },
  find: { command: (i) => `find ${top(i)} -type f -exec cat {} +`, leaks: (i, out) => out.includes(h.secret(i)) },
  tar: {
    command: (i) => `tar -cf - -C ${dirname(top(i))} ${basename(top(i))} | tar -xOf -`,
    leaks: (i, out) => out.includes(h.secret(i)),
  },
  cp: {
    command: (i) => `cp -r ${top(i)} stolen-${i} && find stolen-${i} -type f -exec cat {} +; rm -rf stolen-${i}`,
    leaks: (i, out) => out.includes(h.secret(i)),
  },
  'a symlink in the workspace': {
    command: (i) => `cat ${h.link(i)}`,
    leaks: (i, out) => out.includes(h.secret(i)),
  },
}

async function bashRows(tools: Map<string, Tool>, way: keyof typeof WAYS): Promise<string[]> {
  const { command } = WAYS[way] as (typeof WAYS)[string]
  const script = ['exec 2>&1', ...rows().map((i) => `echo @@${i}@@; ${command(i)}`)].join('\n')
  const { output, failure } = await call(tools.get('bash') as Tool, { command: script })
  expect(failure).toBeUndefined()
  return rows().map((i) => output.split(`@@${i}@@`)[1]?.split(`@@${i + 1}@@`)[0] ?? '')
}

describe('hidden by default: no way in returns a credential', () => {
  let tools: Map<string, Tool>
  beforeAll(() => {
    tools = toolsFor({ hide: USER_HIDE }, 'hidden')
  })

  for (const way of Object.keys(WAYS)) {
    it(`bash: ${way}`, async () => {
      const outputs = await bashRows(tools, way)
      const { leaks } = WAYS[way] as (typeof WAYS)[string]
      expect(rows().filter((i) => leaks(i, outputs[i] as string))).toEqual([])
      expect(leaked(h, outputs.join(''))).toEqual([])
    })
  }

  it('bash: what lies beside them is still there (HOME is read, only the credentials are gone)', async () => {
    const { output } = await call(tools.get('bash') as Tool, {
      command: `cat ~/notes.txt ~/.cargo/config.toml ~/.config/other/settings.json; ls -A ~/.ssh | wc -l`,
    })
    expect(output).toMatch(/VISIBLE-NOTES\nVISIBLE-CARGO-CONFIG\nVISIBLE-OTHER-CONFIG\n0\n/)
  })

  it('bash: a credential created after the server started is hidden too (a glob is expanded per command)', async () => {
    writeFileSync(join(h.home, '.cargo', 'credentials'), 'LATE-CARGO-TOKEN\n')
    const { output } = await call(tools.get('bash') as Tool, { command: 'cat ~/.cargo/credentials; echo end' })
    expect(output).not.toContain('LATE-CARGO-TOKEN')
    expect(output).toContain('end')
  })

  it('read: each file, and the symlink to it in the workspace, asks `credentials` for the real path; rejected, it returns nothing', async () => {
    for (const i of rows()) {
      for (const filePath of [h.file(i), `link-${i}`]) {
        const { output, failure, asked } = await call(tools.get('read') as Tool, { filePath })
        expect(asked).toEqual([['credentials', [h.file(i)]]])
        expect(failure?.kind).toBe('denied')
        expect(leaked(h, output + failure?.message)).toEqual([])
      }
    }
  })

  it('edit and write: asked and refused; the credentials stay as they were, no key is planted', async () => {
    for (const i of rows()) {
      const editing = await call(tools.get('edit') as Tool, {
        filePath: `link-${i}`,
        oldString: h.secret(i),
        newString: 'PWNED',
      })
      expect(editing.asked).toEqual([['credentials', [h.file(i)]]])
      expect(editing.failure?.kind).toBe('denied')
      expect(readFileSync(h.file(i), 'utf8')).toBe(`${h.secret(i)}\n`)
    }
    const planted = join(h.home, '.ssh', 'authorized_keys')
    const writing = await call(tools.get('write') as Tool, { filePath: planted, content: 'ssh-ed25519 AAAA attacker' })
    expect(writing.asked).toEqual([['credentials', [planted]]])
    expect(existsSync(planted)).toBe(false)
  })

  it('read and list of a hidden directory ask too', async () => {
    for (const [name, args] of [
      ['read', { filePath: join(h.home, '.ssh') }],
      ['list', { path: join(h.home, '.aws') }],
      ['grep', { pattern: 'SECRET', path: join(h.home, '.kube') }],
      ['glob', { pattern: '*', path: join(h.home, '.docker') }],
    ] as const) {
      const { output, failure, asked } = await call(tools.get(name) as Tool, args)
      expect(asked.map(([permission]) => permission)).toEqual(['credentials'])
      expect(failure?.kind).toBe('denied')
      expect(output).toBe('')
    }
  })

  it('grep, glob and list over HOME leave the credentials out without asking', async () => {
    const grep = await call(tools.get('grep') as Tool, { pattern: 'SECRET|VISIBLE', path: h.home })
    const glob = await call(tools.get('glob') as Tool, { pattern: '**', path: h.home })
    const list = await call(tools.get('list') as Tool, { path: h.home })
    for (const { output, asked } of [grep, glob]) {
      expect(asked).toEqual([])
      expect(leaked(h, output)).toEqual([])
      for (const i of rows()) expect(output).not.toContain(h.file(i))
    }
    expect(list.asked).toEqual([])
    const listed = list.output.split('\n').map((l) => l.trim())
    expect(rows().filter((i) => listed.includes(basename(h.file(i))))).toEqual([])
    expect(grep.output).toContain('VISIBLE-NOTES')
    expect(grep.output).toContain('VISIBLE-CARGO-CONFIG')
    expect(glob.output).toContain(join(h.home, '.cargo', 'config.toml'))
    expect(list.output).toContain('notes.txt')
  })

  it('approved once through the permission system, read returns the file', async () => {
    const f = fixture({ directory: h.workspace, rules: RULES })
    const reading = (tools.get('read') as Tool).execute({ filePath: 'link-0' }, f.ctx())
    for (const deadline = Date.now() + 5000; pending(f).length === 0 && Date.now() < deadline; )
      await new Promise((r) => setTimeout(r, 5))
    const [requestId] = pending(f)
    expect(f.requested().map((r) => r.permission)).toEqual(['credentials'])
    await execute(
      sqlitePorts(f.store),
      f.sessionId,
      (s) => decidePermission({ type: 'reply', requestId: requestId as string, reply: 'once' }, s, f.sessionId, f.ids),
      { meta: { actor: 'user' } },
    )
    expect((await reading).output).toContain(h.secret(0))
    f.gate.close()
    f.store.close()
  })
})

describe('`sandbox.reveal` takes them back: the same table returns each credential', () => {
  let tools: Map<string, Tool>
  beforeAll(() => {
    tools = toolsFor({ hide: USER_HIDE, reveal: CREDENTIALS.map(([, entry]) => entry) }, 'revealed')
  })

  for (const way of Object.keys(WAYS)) {
    it(`bash: ${way}`, async () => {
      const outputs = await bashRows(tools, way)
      const { leaks } = WAYS[way] as (typeof WAYS)[string]
      expect(rows().filter((i) => !leaks(i, outputs[i] as string))).toEqual([])
    })
  }

  it('read (the file and the symlink), grep, glob and list return them without asking', async () => {
    for (const i of rows()) {
      for (const filePath of [h.file(i), `link-${i}`]) {
        const { output, asked } = await call(tools.get('read') as Tool, { filePath })
        expect(asked).toEqual([])
        expect(output).toContain(h.secret(i))
      }
    }
    const grep = await call(tools.get('grep') as Tool, { pattern: 'SECRET', path: h.home })
    expect(leaked(h, grep.output)).toEqual(rows())
    const list = await call(tools.get('list') as Tool, { path: h.home })
    const listed = list.output.split('\n').map((l) => l.trim())
    expect(rows().filter((i) => !listed.includes(basename(h.file(i))))).toEqual([])
  })

  it('a reveal inside a hidden directory takes back that path only', async () => {
    writeFileSync(join(h.home, '.ssh', 'known_hosts'), 'KNOWN-HOSTS\n')
    const partial = toolsFor({ reveal: ['~/.ssh/known_hosts'] }, 'partial')
    const { output } = await call(partial.get('bash') as Tool, {
      command: 'cat ~/.ssh/known_hosts ~/.ssh/id_ed25519 2>&1',
    })
    expect(output).toContain('KNOWN-HOSTS')
    expect(leaked(h, output)).toEqual([])
    const read = await call(partial.get('read') as Tool, { filePath: join(h.home, '.ssh', 'known_hosts') })
    expect(read.asked).toEqual([])
    expect(read.output).toContain('KNOWN-HOSTS')
  })
})

describe('a session directory inside a hidden path', () => {
  it('works: its own files are read and written by bash and the file tools; the rest stays hidden', async () => {
    const tools = toolsFor({ hide: USER_HIDE }, 'own')
    const project = join(h.home, '.docker', 'project')
    mkdirSync(project, { recursive: true })
    writeFileSync(join(project, 'main.txt'), 'PROJECT-MAIN\n')
    const docker = CREDENTIALS.findIndex(([path]) => path.startsWith('.docker/'))

    const bash = await call(
      tools.get('bash') as Tool,
      { command: 'cat main.txt; echo made > made.txt; cat ../config.json; ls -A ..' },
      project,
    )
    expect(bash.output).toContain('PROJECT-MAIN')
    expect(bash.output).not.toContain(h.secret(docker))
    expect(readFileSync(join(project, 'made.txt'), 'utf8')).toBe('made\n')

    const read = await call(tools.get('read') as Tool, { filePath: 'main.txt' }, project)
    expect(read.asked).toEqual([])
    expect(read.output).toContain('PROJECT-MAIN')
    const write = await call(tools.get('write') as Tool, { filePath: 'notes.md', content: 'ok' }, project)
    expect(write.asked).toEqual([])
    expect(statSync(join(project, 'notes.md')).size).toBe(2)
    const grep = await call(tools.get('grep') as Tool, { pattern: 'PROJECT' }, project)
    expect(grep.output).toContain('main.txt')

    const sibling = await call(tools.get('read') as Tool, { filePath: '../config.json' }, project)
    expect(sibling.asked).toEqual([['credentials', [h.file(docker)]]])
    expect(sibling.failure?.kind).toBe('denied')
  })
})
