import { mkdirSync, readFileSync, symlinkSync, writeFileSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createFileTimes } from '../../src/tools/file-times.js'
import { createEditTool } from '../../src/tools/builtin/edit.js'
import { createReadTool } from '../../src/tools/builtin/read.js'
import { createWriteTool } from '../../src/tools/builtin/write.js'
import { resolveInWorkspace } from '../../src/tools/paths.js'
import { type Fixture, fixture, tempDir } from './helpers.js'

const allowAll = [{ permission: '*', pattern: '*', action: 'allow' as const }]
const denyOutside = [{ permission: 'external_directory', pattern: '*', action: 'deny' as const }]

/**
 * Layout: <tmp>/work (the session directory), <tmp>/work-evil (a sibling
 * sharing the prefix), <tmp>/outside/secret.txt, and work/link → outside.
 */
describe('workspace confinement', () => {
  let tmp: ReturnType<typeof tempDir>
  let work: string
  let f: Fixture
  beforeEach(() => {
    tmp = tempDir()
    work = join(tmp.dir, 'work')
    mkdirSync(work)
    mkdirSync(join(tmp.dir, 'work-evil'))
    mkdirSync(join(tmp.dir, 'outside'))
    writeFileSync(join(tmp.dir, 'outside', 'secret.txt'), 'TOP SECRET\n')
    writeFileSync(join(tmp.dir, 'work-evil', 'secret.txt'), 'EVIL SECRET\n')
    writeFileSync(join(work, 'inside.txt'), 'hello\n')
    symlinkSync(join(tmp.dir, 'outside'), join(work, 'link'))
    symlinkSync(join(tmp.dir, 'outside', 'secret.txt'), join(work, 'secret-link.txt'))
    f = fixture({ directory: work, agentRules: allowAll, rules: denyOutside })
  })
  afterEach(() => {
    f.gate.close()
    f.store.close()
    tmp.cleanup()
  })

  const escapes = () => [
    ['../ traversal', '../outside/secret.txt'],
    ['an absolute path outside', join(tmp.dir, 'outside', 'secret.txt')],
    ['a sibling sharing the prefix', join(tmp.dir, 'work-evil', 'secret.txt')],
    ['a sibling via ../', '../work-evil/secret.txt'],
    ['a symlinked directory pointing outside', 'link/secret.txt'],
    ['a symlinked file pointing outside', 'secret-link.txt'],
  ]

  it('resolves real paths: all escapes are outside, inside paths and new files inside are inside', () => {
    for (const [what, p] of escapes()) expect(resolveInWorkspace(work, p as string).inside, what).toBe(false)
    expect(resolveInWorkspace(work, 'inside.txt')).toEqual({
      real: join(work, 'inside.txt'),
      inside: true,
      display: 'inside.txt',
    })
    expect(resolveInWorkspace(work, 'new/dir/file.ts')).toEqual({
      real: join(work, 'new/dir/file.ts'),
      inside: true,
      display: 'new/dir/file.ts',
    })
    expect(resolveInWorkspace(work, `${work}/./a/../inside.txt`).inside).toBe(true)
    expect(resolveInWorkspace(work, 'link/new-file.txt').inside).toBe(false) // a new file under an outside link
  })

  it('a dangling symlink is followed to where a write through it would land', () => {
    symlinkSync(join(tmp.dir, 'outside', 'new.txt'), join(work, 'dangling'))
    symlinkSync(join(work, 'dangling'), join(work, 'dangling-twice'))
    symlinkSync(join(tmp.dir, 'outside', 'no-such-dir'), join(work, 'dangling-dir'))
    expect(resolveInWorkspace(work, 'dangling')).toEqual({
      real: join(tmp.dir, 'outside', 'new.txt'),
      inside: false,
      display: join(tmp.dir, 'outside', 'new.txt'),
    })
    expect(resolveInWorkspace(work, 'dangling-twice').inside).toBe(false)
    expect(resolveInWorkspace(work, 'dangling-dir/deep/file.ts').real).toBe(
      join(tmp.dir, 'outside', 'no-such-dir', 'deep', 'file.ts'),
    )
    symlinkSync('self-loop', join(work, 'self-loop'))
    expect(resolveInWorkspace(work, 'self-loop').inside).toBe(true) // a loop resolves nowhere: it stays where it is
  })

  it('read rejects every escape (external_directory denied) and never returns the content', async () => {
    const read = createReadTool({ dataDir: join(tmp.dir, 'data'), fileTimes: createFileTimes() })
    for (const [what, p] of escapes()) {
      const err = await read.execute({ filePath: p as string }, f.ctx()).then(
        (r) => r.output,
        (e) => e,
      )
      expect(err, what).toMatchObject({ name: 'ToolFailure', kind: 'denied' })
      expect(String(err.message), what).not.toContain('SECRET')
    }
  })

  it('write and edit reject escapes and leave the outside untouched; a new file inside is allowed', async () => {
    const fileTimes = createFileTimes()
    const write = createWriteTool({ fileTimes })
    const edit = createEditTool({ fileTimes })
    for (const [what, p] of escapes()) {
      await expect(write.execute({ filePath: p as string, content: 'pwned' }, f.ctx()), what).rejects.toMatchObject({
        kind: 'denied',
      })
      await expect(
        edit.execute({ filePath: p as string, oldString: 'TOP', newString: 'pwned' }, f.ctx()),
        what,
      ).rejects.toMatchObject({
        kind: 'denied',
      })
    }
    expect(readFileSync(join(tmp.dir, 'outside', 'secret.txt'), 'utf8')).toBe('TOP SECRET\n')
    expect(readFileSync(join(tmp.dir, 'work-evil', 'secret.txt'), 'utf8')).toBe('EVIL SECRET\n')
    expect(existsSync(join(tmp.dir, 'outside', 'new.txt'))).toBe(false)

    const created = await write.execute({ filePath: 'src/new/file.ts', content: 'export {}\n' }, f.ctx())
    expect(created.output).toBe('Created src/new/file.ts (10 bytes).')
    expect(readFileSync(join(work, 'src/new/file.ts'), 'utf8')).toBe('export {}\n')
    await write.execute({ filePath: join(work, 'abs.txt'), content: 'x' }, f.ctx())
    expect(readFileSync(join(work, 'abs.txt'), 'utf8')).toBe('x')
  })

  it('outside the directory asks external_directory for that directory when the rules say ask', async () => {
    const g = fixture({
      directory: work,
      agentRules: [...allowAll, { permission: 'external_directory', pattern: '*', action: 'ask' as const }],
    })
    const read = createReadTool({ dataDir: join(tmp.dir, 'data'), fileTimes: createFileTimes() })
    const ac = new AbortController()
    const p = read.execute({ filePath: '../outside/secret.txt' }, g.ctx({ abort: ac.signal }))
    await new Promise((r) => setImmediate(r))
    expect(g.requested()).toEqual([
      {
        requestId: 'per_000001',
        partId: 'prt_1',
        callId: 'call_1',
        permission: 'external_directory',
        patterns: [join(tmp.dir, 'outside', 'secret.txt')],
        metadata: { filePath: join(tmp.dir, 'outside', 'secret.txt'), always: [join(tmp.dir, 'outside', '*')] },
      },
    ])
    ac.abort()
    await expect(p).rejects.toMatchObject({ kind: 'aborted' })
    g.gate.close()
    g.store.close()
  })
})
