import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import type { PermissionRule } from '../../src/events/catalogue.js'
import { createGlobTool } from '../../src/tools/builtin/glob.js'
import { createGrepTool } from '../../src/tools/builtin/grep.js'
import { createListTool } from '../../src/tools/builtin/list.js'
import { type Fixture, fixture, tempDir } from '../tools/helpers.js'

/**
 * The search tools obey the read rules (docs/TOOLS.md): with the default build
 * agent, `read *.env` asks — so grep must ask before it opens `.env`, or a
 * pattern would read the secret the user is asked about; a denied file is
 * neither searched nor named; glob and list never show what lies in
 * Chronicle's data directory or what the rules deny to read.
 */

const SECRET = 'sk-secret-123'

describe('search tools and the read rules', () => {
  let tmp: ReturnType<typeof tempDir>
  const fixtures: Fixture[] = []
  const build = (agentRules?: PermissionRule[]) => {
    const f = fixture({ directory: tmp.dir, ...(agentRules && { agentRules }) })
    fixtures.push(f)
    return f
  }
  const reply = (f: Fixture, reply: 'once' | 'reject', message?: string) => {
    const [request] = f.requested()
    f.store.append(
      f.sessionId,
      [
        {
          type: 'permission.replied',
          data: { requestId: request?.requestId as string, reply, ...(message && { message }) },
        },
      ],
      {
        meta: { actor: 'user' },
      },
    )
  }
  const at = (rel: string) => join(tmp.dir, rel)

  beforeEach(() => {
    tmp = tempDir()
    mkdirSync(at('src'))
    writeFileSync(at('.env'), `API_KEY=${SECRET}\n`)
    writeFileSync(at('.env.example'), 'API_KEY=\n')
    writeFileSync(at('src/a.ts'), 'const key = process.env.API_KEY\n')
  })
  afterEach(() => {
    for (const f of fixtures.splice(0)) {
      f.gate.close()
      f.store.close()
    }
    tmp.cleanup()
  })

  it('grep asks to read .env before opening it; rejected, the secret never reaches the output', async () => {
    const f = build()
    const call = createGrepTool().execute({ pattern: 'API_KEY' }, f.ctx())
    await vi.waitFor(() => expect(f.requested()).toHaveLength(1))
    expect(f.requested().map((r) => [r.permission, r.patterns, r.metadata])).toEqual([
      ['read', ['.env'], { tool: 'grep', pattern: 'API_KEY', path: tmp.dir, always: ['.env'] }],
    ])
    reply(f, 'reject', 'not the secrets')
    const outcome = await call.then(
      (r) => r.output,
      (e: Error & { kind?: string }) => `${e.kind}: ${e.message}`,
    )
    expect(outcome).toBe('denied: not the secrets')
    expect(outcome).not.toContain(SECRET)
  })

  it('grep searches .env once the user approves the read', async () => {
    const f = build()
    const call = createGrepTool().execute({ pattern: 'API_KEY' }, f.ctx())
    await vi.waitFor(() => expect(f.requested()).toHaveLength(1))
    reply(f, 'once')
    expect((await call).output).toBe(
      [
        `${at('.env')}:1: API_KEY=${SECRET}`,
        `${at('.env.example')}:1: API_KEY=`,
        `${at('src/a.ts')}:1: const key = process.env.API_KEY`,
      ].join('\n'),
    )
  })

  it('grep leaves a denied file out without a word and still finds the rest', async () => {
    const f = build([{ permission: 'read', pattern: '.env', action: 'deny' }])
    const r = await createGrepTool().execute({ pattern: 'API_KEY' }, f.ctx())
    expect(r.output).toBe(
      [`${at('.env.example')}:1: API_KEY=`, `${at('src/a.ts')}:1: const key = process.env.API_KEY`].join('\n'),
    )
    expect(f.requested()).toEqual([])
  })

  it("a file named as grep's path obeys the same rules", async () => {
    const f = build([{ permission: 'read', pattern: '.env', action: 'deny' }])
    expect((await createGrepTool().execute({ pattern: 'API_KEY', path: '.env' }, f.ctx())).output).toBe(
      'No matches found',
    )
    const g = build()
    const call = createGrepTool().execute({ pattern: 'sk-', path: '.env' }, g.ctx())
    await vi.waitFor(() => expect(g.requested().map((r) => r.patterns)).toEqual([['.env']]))
    reply(g, 'reject')
    await expect(call).rejects.toMatchObject({ kind: 'denied' })
  })

  it('no search tool enters the data directory, even inside the workspace', async () => {
    mkdirSync(at('var/chronicle/tool-output/ses_1'), { recursive: true })
    writeFileSync(at('var/chronicle/token'), `API_KEY=${SECRET}\n`)
    writeFileSync(at('var/chronicle/tool-output/ses_1/bash_1.txt'), 'API_KEY\n')
    writeFileSync(at('var/notes.txt'), 'notes\n')
    const forbidden = [at('var/chronicle')]
    const f = build([{ permission: 'read', pattern: '.env', action: 'deny' }])
    const glob = await createGlobTool({ forbidden }).execute({ pattern: '**' }, f.ctx())
    expect(glob.output.split('\n').sort()).toEqual([at('.env.example'), at('src/a.ts'), at('var/notes.txt')])
    const list = await createListTool({ forbidden }).execute({}, f.ctx())
    expect(list.output).toBe(`${tmp.dir}/\n  .env.example\n  src/\n    a.ts\n  var/\n    notes.txt`)
    const grep = await createGrepTool({ forbidden }).execute({ pattern: 'API_KEY' }, f.ctx())
    expect(grep.output).toBe(
      [`${at('.env.example')}:1: API_KEY=`, `${at('src/a.ts')}:1: const key = process.env.API_KEY`].join('\n'),
    )
  })

  it('glob and list leave out what the rules deny to read, and do not ask for names', async () => {
    mkdirSync(at('secrets'))
    writeFileSync(at('secrets/x'), `${SECRET}\n`)
    const f = build([{ permission: 'read', pattern: 'secrets/*', action: 'deny' }])
    const glob = await createGlobTool().execute({ pattern: '**' }, f.ctx())
    expect(glob.output.split('\n').sort()).toEqual([at('.env'), at('.env.example'), at('src/a.ts')])
    const list = await createListTool().execute({}, f.ctx())
    expect(list.output).toBe(`${tmp.dir}/\n  .env\n  .env.example\n  secrets/\n  src/\n    a.ts`)
    expect(f.requested()).toEqual([])
  })

  it('a directory whose read is denied is not entered at all', async () => {
    mkdirSync(at('secrets/deep'), { recursive: true })
    writeFileSync(at('secrets/deep/y'), `${SECRET}\n`)
    const f = build([{ permission: 'read', pattern: 'secrets', action: 'deny' }])
    const list = await createListTool().execute({ path: '.' }, f.ctx())
    expect(list.output).toBe(`${tmp.dir}/\n  .env\n  .env.example\n  src/\n    a.ts`)
    expect((await createGlobTool().execute({ pattern: '**/y' }, f.ctx())).output).toBe('No files found')
  })
})
