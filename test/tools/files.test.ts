import { existsSync, mkdirSync, readFileSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createEditTool } from '../../src/tools/builtin/edit.js'
import { createGlobTool } from '../../src/tools/builtin/glob.js'
import { createGrepTool } from '../../src/tools/builtin/grep.js'
import { createListTool } from '../../src/tools/builtin/list.js'
import { createReadTool } from '../../src/tools/builtin/read.js'
import { createTodoWriteTool } from '../../src/tools/builtin/todowrite.js'
import { createWriteTool } from '../../src/tools/builtin/write.js'
import { createFileTimes } from '../../src/tools/file-times.js'
import { CHUNK_BYTES } from '../../src/tools/line-scan.js'
import { truncateOutput } from '../../src/tools/truncate.js'
import { type Fixture, fixture, tempDir } from './helpers.js'

const allowAll = [{ permission: '*', pattern: '*', action: 'allow' as const }]

describe('file tools', () => {
  let tmp: ReturnType<typeof tempDir>
  let f: Fixture
  let fileTimes: ReturnType<typeof createFileTimes>
  let read: ReturnType<typeof createReadTool>
  let edit: ReturnType<typeof createEditTool>
  let write: ReturnType<typeof createWriteTool>
  beforeEach(() => {
    tmp = tempDir()
    f = fixture({ directory: tmp.dir, agentRules: allowAll })
    fileTimes = createFileTimes()
    read = createReadTool({ dataDir: join(tmp.dir, '.data'), fileTimes })
    edit = createEditTool({ fileTimes })
    write = createWriteTool({ fileTimes })
  })
  afterEach(() => {
    f.gate.close()
    f.store.close()
    tmp.cleanup()
  })

  describe('read', () => {
    it('returns numbered lines from offset for limit lines, and says where to continue', async () => {
      writeFileSync(join(tmp.dir, 'a.txt'), 'one\ntwo\nthree\nfour\n')
      const r = await read.execute({ filePath: 'a.txt', offset: 2, limit: 2 }, f.ctx())
      expect(r.output).toBe(
        '<file path="a.txt">\n00002| two\n00003| three\n\n(File has more lines. Use offset=4 to continue reading.)\n</file>',
      )
      expect(r.metadata).toEqual({
        filePath: join(tmp.dir, 'a.txt'),
        lines: 2,
        offset: 2,
        truncated: true,
        nextOffset: 4,
      })
      const end = await read.execute({ filePath: 'a.txt', offset: 4 }, f.ctx())
      expect(end.output).toBe('<file path="a.txt">\n00004| four\n\n(End of file - 4 lines)\n</file>')
    })

    it('caps at 2000 lines by default', async () => {
      writeFileSync(join(tmp.dir, 'long.txt'), Array.from({ length: 2500 }, (_, i) => `l${i + 1}`).join('\n'))
      const r = await read.execute({ filePath: 'long.txt' }, f.ctx())
      expect(r.metadata).toEqual({
        filePath: join(tmp.dir, 'long.txt'),
        lines: 2000,
        offset: 1,
        truncated: true,
        nextOffset: 2001,
      })
      expect(r.output).toContain('02000| l2000\n')
      expect(r.output).not.toContain('l2001')
      expect(r.output).toContain('Use offset=2001 to continue reading.')
    })

    it('cuts lines at 2000 characters and stops at 50 KB', async () => {
      writeFileSync(
        join(tmp.dir, 'wide.txt'),
        `${'x'.repeat(3000)}\n${Array.from({ length: 100 }, () => 'y'.repeat(1000)).join('\n')}`,
      )
      const r = await read.execute({ filePath: 'wide.txt' }, f.ctx())
      expect(r.output).toContain(`00001| ${'x'.repeat(2000)}... (line truncated to 2000 characters)\n`)
      expect(r.output).not.toContain('x'.repeat(2001))
      expect(Buffer.byteLength(r.output)).toBeLessThan(50 * 1024 + 500)
      const next = r.metadata?.['nextOffset'] as number
      expect(next).toBeGreaterThan(40)
      expect(next).toBeLessThan(60)
      expect(r.output).toContain(`(Output capped at 50 KB. Use offset=${next} to continue reading.)`)
    })

    it('splits lines at \\n, \\r\\n and a lone \\r, also where a break straddles two chunks', async () => {
      writeFileSync(join(tmp.dir, 'breaks.txt'), `${'a'.repeat(CHUNK_BYTES - 1)}\r\nb\rc\n\nd`)
      const r = await read.execute({ filePath: 'breaks.txt' }, f.ctx())
      expect(r.output).toBe(
        `<file path="breaks.txt">\n00001| ${'a'.repeat(2000)}... (line truncated to 2000 characters)\n00002| b\n00003| c\n00004| \n00005| d\n\n(End of file - 5 lines)\n</file>`,
      )
      const tail = await read.execute({ filePath: 'breaks.txt', offset: 2, limit: 2 }, f.ctx())
      expect(tail.output).toBe(
        '<file path="breaks.txt">\n00002| b\n00003| c\n\n(File has more lines. Use offset=4 to continue reading.)\n</file>',
      )
    })

    it('cuts lines at 2000 characters, not bytes', async () => {
      writeFileSync(join(tmp.dir, 'wide.txt'), `${'€'.repeat(3000)}\n${'😀'.repeat(1000)}\n`)
      const r = await read.execute({ filePath: 'wide.txt' }, f.ctx())
      expect(r.output).toBe(
        `<file path="wide.txt">\n00001| ${'€'.repeat(2000)}... (line truncated to 2000 characters)\n00002| ${'😀'.repeat(1000)}\n\n(End of file - 2 lines)\n</file>`,
      )
    })

    it('scans at most 256 MiB to reach an offset, and says what to use instead', async () => {
      const path = join(tmp.dir, 'big.txt')
      writeFileSync(path, 'line\n'.repeat(1000))
      truncateSync(path, 300 * 1024 * 1024) // sparse: one 300 MB line of NULs after the text
      await expect(read.execute({ filePath: 'big.txt', offset: 2000 }, f.ctx())).rejects.toMatchObject({
        kind: 'failed',
        message:
          'offset 2000 is more than 256 MiB into big.txt (1000 lines), and read scans no further. Use grep to find the lines you need, or bash (e.g. tail -n) for the end of a large file.',
      })
    })

    it('refuses binary files and reports missing files', async () => {
      writeFileSync(join(tmp.dir, 'blob.dat2'), Buffer.from([0x41, 0x00, 0x42, 0x01]))
      writeFileSync(join(tmp.dir, 'img.png'), 'not really')
      await expect(read.execute({ filePath: 'blob.dat2' }, f.ctx())).rejects.toMatchObject({
        kind: 'failed',
        message: 'Cannot read binary file: blob.dat2',
      })
      await expect(read.execute({ filePath: 'img.png' }, f.ctx())).rejects.toMatchObject({
        message: 'Cannot read binary file: img.png',
      })
      await expect(read.execute({ filePath: 'nope.txt' }, f.ctx())).rejects.toMatchObject({
        message: 'File not found: nope.txt',
      })
    })

    it('lists a directory', async () => {
      mkdirSync(join(tmp.dir, 'd/sub'), { recursive: true })
      writeFileSync(join(tmp.dir, 'd/b.txt'), '')
      expect((await read.execute({ filePath: 'd' }, f.ctx())).output).toBe(
        '<directory path="d">\nb.txt\nsub/\n</directory>',
      )
    })

    it('may read saved tool output in the data directory without external_directory', async () => {
      const g = fixture({
        directory: join(tmp.dir, 'd'),
        agentRules: [...allowAll, { permission: 'external_directory', pattern: '*', action: 'deny' }],
      })
      mkdirSync(join(tmp.dir, 'd'), { recursive: true })
      const t = truncateOutput(Array.from({ length: 3000 }, (_, i) => String(i)).join('\n'), {
        dataDir: join(tmp.dir, '.data'),
        sessionId: g.sessionId,
        name: 'x',
      })
      const r = await read.execute({ filePath: t.outputPath as string, offset: 2999, limit: 2 }, g.ctx())
      expect(r.output).toContain('02999| 2998\n03000| 2999')
      g.gate.close()
      g.store.close()
    })
  })

  describe('edit and write', () => {
    it('edit needs a prior read, replaces exactly once, and refuses ambiguous matches', async () => {
      writeFileSync(join(tmp.dir, 'x.ts'), 'const a = 1\nconst b = 1\n')
      await expect(
        edit.execute({ filePath: 'x.ts', oldString: 'a = 1', newString: 'a = 2' }, f.ctx()),
      ).rejects.toMatchObject({
        kind: 'failed',
        message: 'You must read x.ts with the read tool before changing it.',
      })
      await read.execute({ filePath: 'x.ts' }, f.ctx())
      await expect(
        edit.execute({ filePath: 'x.ts', oldString: '= 1', newString: '= 2' }, f.ctx()),
      ).rejects.toMatchObject({
        message:
          'oldString occurs 2 times in x.ts. Add surrounding lines to make it unique, or set replaceAll to true.',
      })
      await expect(edit.execute({ filePath: 'x.ts', oldString: 'zzz', newString: 'y' }, f.ctx())).rejects.toMatchObject(
        { kind: 'failed' },
      )
      const r = await edit.execute({ filePath: 'x.ts', oldString: 'a = 1', newString: 'a = $&2' }, f.ctx())
      expect(r.output).toBe('Edited x.ts: 1 replacement.')
      expect(readFileSync(join(tmp.dir, 'x.ts'), 'utf8')).toBe('const a = $&2\nconst b = 1\n')
      // its own edit does not make the file stale
      await edit.execute({ filePath: 'x.ts', oldString: ' = ', newString: ' := ', replaceAll: true }, f.ctx())
      expect(readFileSync(join(tmp.dir, 'x.ts'), 'utf8')).toBe('const a := $&2\nconst b := 1\n')
    })

    it('edit refuses a file changed since it was read (even with the same size)', async () => {
      writeFileSync(join(tmp.dir, 'y.txt'), 'alpha\n')
      await read.execute({ filePath: 'y.txt' }, f.ctx())
      writeFileSync(join(tmp.dir, 'y.txt'), 'ALPHA\n')
      await expect(
        edit.execute({ filePath: 'y.txt', oldString: 'ALPHA', newString: 'beta' }, f.ctx()),
      ).rejects.toMatchObject({
        kind: 'failed',
        message: 'y.txt was modified since it was last read. Read it again before changing it.',
      })
      expect(readFileSync(join(tmp.dir, 'y.txt'), 'utf8')).toBe('ALPHA\n')
      await read.execute({ filePath: 'y.txt' }, f.ctx())
      await edit.execute({ filePath: 'y.txt', oldString: 'ALPHA', newString: 'beta' }, f.ctx())
      expect(readFileSync(join(tmp.dir, 'y.txt'), 'utf8')).toBe('beta\n')
    })

    it('read state is per session', async () => {
      writeFileSync(join(tmp.dir, 'z.txt'), 'z\n')
      await read.execute({ filePath: 'z.txt' }, f.ctx())
      await expect(
        edit.execute({ filePath: 'z.txt', oldString: 'z', newString: 'w' }, f.ctx({ sessionId: 'ses_other' })),
      ).rejects.toMatchObject({ message: 'You must read z.txt with the read tool before changing it.' })
    })

    it('write creates new files freely but overwrites only what was read', async () => {
      await write.execute({ filePath: 'n/new.txt', content: 'v1' }, f.ctx())
      writeFileSync(join(tmp.dir, 'n/new.txt'), 'changed elsewhere')
      await expect(write.execute({ filePath: 'n/new.txt', content: 'v2' }, f.ctx())).rejects.toMatchObject({
        kind: 'failed',
      })
      await read.execute({ filePath: 'n/new.txt' }, f.ctx())
      expect((await write.execute({ filePath: 'n/new.txt', content: 'v2' }, f.ctx())).output).toBe(
        'Overwrote n/new.txt (2 bytes).',
      )
    })

    it('a dangling symlink is a path outside: writing through it needs external_directory; edit refuses a directory', async () => {
      const outside = tempDir()
      const g = fixture({
        directory: tmp.dir,
        agentRules: [...allowAll, { permission: 'external_directory', pattern: '*', action: 'deny' }],
      })
      try {
        symlinkSync(join(outside.dir, 'created.txt'), join(tmp.dir, 'link.txt'))
        await expect(write.execute({ filePath: 'link.txt', content: 'x' }, g.ctx())).rejects.toMatchObject({
          kind: 'denied',
        })
        expect(existsSync(join(outside.dir, 'created.txt'))).toBe(false)
      } finally {
        g.gate.close()
        g.store.close()
        outside.cleanup()
      }
      mkdirSync(join(tmp.dir, 'd'))
      await expect(edit.execute({ filePath: 'd', oldString: 'a', newString: 'b' }, f.ctx())).rejects.toMatchObject({
        kind: 'failed',
        message: 'd is a directory, not a regular file',
      })
    })

    it('edits ask the edit permission with the relative path; plan mode denies them outside the plans directory', async () => {
      const plan = fixture({ directory: tmp.dir, agent: 'plan' })
      await expect(write.execute({ filePath: 'src/a.ts', content: 'x' }, plan.ctx())).rejects.toMatchObject({
        kind: 'denied',
      })
      await write.execute({ filePath: '.chronicle/plans/plan.md', content: '# plan' }, plan.ctx())
      expect(readFileSync(join(tmp.dir, '.chronicle/plans/plan.md'), 'utf8')).toBe('# plan')
      plan.gate.close()
      plan.store.close()

      const build = fixture({ directory: tmp.dir }) // build: edits ask
      const p = write.execute({ filePath: 'src/b.ts', content: 'x' }, build.ctx())
      await new Promise((r) => setImmediate(r))
      expect(build.requested().map((d) => [d.permission, d.patterns])).toEqual([['edit', ['src/b.ts']]])
      build.store.append(
        build.sessionId,
        [{ type: 'permission.replied', data: { requestId: 'per_000001', reply: 'reject', message: 'not now' } }],
        {
          meta: { actor: 'user' },
        },
      )
      await expect(p).rejects.toMatchObject({ kind: 'denied', message: 'not now' })
      build.gate.close()
      build.store.close()
    })

    it('an edit or write a person must approve carries the unified diff of the change; an allowed one computes none', async () => {
      writeFileSync(join(tmp.dir, 'a.txt'), 'one\ntwo\nthree\n')
      const asked = fixture({ directory: tmp.dir }) // build: edits ask
      const reply = () =>
        asked.store.append(
          asked.sessionId,
          [
            {
              type: 'permission.replied',
              data: { requestId: asked.requested().at(-1)?.requestId as string, reply: 'once' },
            },
          ],
          { meta: { actor: 'user' } },
        )
      await read.execute({ filePath: 'a.txt' }, asked.ctx())
      const askedFor = async (n: number) => {
        while (asked.requested().length < n) await new Promise((r) => setTimeout(r, 5))
      }
      const editing = edit.execute({ filePath: 'a.txt', oldString: 'two', newString: 'TWO' }, asked.ctx())
      await askedFor(1)
      expect(asked.requested().at(-1)?.metadata?.diff).toBe(
        '--- a.txt\n+++ a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n',
      )
      reply()
      await editing
      await read.execute({ filePath: 'a.txt' }, asked.ctx())
      const writing = write.execute({ filePath: 'a.txt', content: 'one\n' }, asked.ctx())
      await askedFor(2)
      expect(asked.requested().at(-1)?.metadata?.diff).toBe(
        '--- a.txt\n+++ a.txt\n@@ -1,3 +1,1 @@\n one\n-TWO\n-three\n',
      )
      reply()
      await writing
      asked.gate.close()
      asked.store.close()

      // allowed by the rules: nobody is asked, nothing is recorded
      await write.execute({ filePath: 'b.txt', content: 'x' }, f.ctx())
      expect(f.requested()).toEqual([])
    })

    it('a huge or unbounded change is described, not diffed, and a long diff is cut', async () => {
      const { approvalDiff } = await import('../../src/tools/approval-diff.js')
      expect(approvalDiff('big', 'x'.repeat(600_000), 'y'.repeat(600_000))).toEqual({
        diffOmitted: 'the file is too large to diff here',
      })
      const lines = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag} line ${i}`).join('\n')
      const long = approvalDiff('long', '', lines(3000, 'new')).diff as string
      expect(long.length).toBeLessThanOrEqual(32 * 1024 + 40)
      expect(long.endsWith('… (diff truncated)\n')).toBe(true)
    })
  })

  describe('search', () => {
    beforeEach(() => {
      mkdirSync(join(tmp.dir, 'src/lib'), { recursive: true })
      mkdirSync(join(tmp.dir, 'node_modules/dep'), { recursive: true })
      writeFileSync(join(tmp.dir, 'src/index.ts'), 'export function main() {}\n')
      writeFileSync(join(tmp.dir, 'src/lib/util.ts'), 'export function helper() {}\nconst x = 1\n')
      writeFileSync(join(tmp.dir, 'src/lib/readme.md'), 'function in prose\n')
      writeFileSync(join(tmp.dir, 'node_modules/dep/index.ts'), 'export function dep() {}\n')
    })

    it('glob matches paths and skips dependency directories', async () => {
      const r = await createGlobTool().execute({ pattern: '**/*.ts' }, f.ctx())
      expect(r.output.split('\n').sort()).toEqual([join(tmp.dir, 'src/index.ts'), join(tmp.dir, 'src/lib/util.ts')])
      const some = await createGlobTool().execute({ pattern: '*.{md,txt}', path: 'src' }, f.ctx())
      expect(some.output).toBe(join(tmp.dir, 'src/lib/readme.md'))
      expect((await createGlobTool().execute({ pattern: '*.py' }, f.ctx())).output).toBe('No files found')
    })

    it('grep finds lines by regex, filters by include, and rejects a bad regex as invalid', async () => {
      const r = await createGrepTool().execute({ pattern: 'function\\s+\\w+\\(', include: '*.ts' }, f.ctx())
      expect(r.output.split('\n').sort()).toEqual([
        `${join(tmp.dir, 'src/index.ts')}:1: export function main() {}`,
        `${join(tmp.dir, 'src/lib/util.ts')}:1: export function helper() {}`,
      ])
      await expect(createGrepTool().execute({ pattern: '(' }, f.ctx())).rejects.toMatchObject({ kind: 'invalid' })
    })

    it('list shows the tree without ignored entries', async () => {
      const r = await createListTool().execute({ ignore: ['*.md'] }, f.ctx())
      expect(r.output).toBe(`${tmp.dir}/\n  src/\n    index.ts\n    lib/\n      util.ts`)
    })
  })

  it('todowrite hands the list to the injected recorder', async () => {
    const recorded: unknown[] = []
    const tool = createTodoWriteTool({ updateTodos: (sessionId, items) => void recorded.push([sessionId, items]) })
    const todos = [{ content: 'write tests', status: 'in_progress' as const, priority: 'high' as const }]
    const r = await tool.execute({ todos }, f.ctx())
    expect(recorded).toEqual([['ses_test', todos]])
    expect(r.title).toBe('1 todos')
  })

  it('todowrite asks its permission before it records anything: a deny rule stops it', async () => {
    const g = fixture({
      directory: tmp.dir,
      agentRules: [...allowAll, { permission: 'todowrite', pattern: '*', action: 'deny' }],
    })
    try {
      const recorded: unknown[] = []
      const tool = createTodoWriteTool({ updateTodos: (sessionId, items) => void recorded.push([sessionId, items]) })
      const todos = [{ content: 'write tests', status: 'pending' as const, priority: 'low' as const }]
      await expect(tool.execute({ todos }, g.ctx())).rejects.toMatchObject({ kind: 'denied' })
      expect(recorded).toEqual([])
    } finally {
      g.gate.close()
      g.store.close()
    }
  })
})
