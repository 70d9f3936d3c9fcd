import { writeFileSync } from 'node:fs'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createApplyPatchTool } from '../../src/tools/builtin/apply-patch.js'
import { createReadTool } from '../../src/tools/builtin/read.js'
import { createFileTimes } from '../../src/tools/file-times.js'
import { files, snapshot } from './dir-snapshot.js'
import { type Fixture, fixture, tempDir } from './helpers.js'

/**
 * apply_patch through its real execute path and the real permission gate, in a real temp
 * directory checked byte for byte after each patch (docs/TOOLS.md "apply_patch and multiedit").
 */

const allowAll = [{ permission: '*', pattern: '*', action: 'allow' as const }]
const START = {
  'a.txt': 'one\ntwo\nthree\nfour\nfive\n',
  'b.txt': 'alpha\nbeta\n',
  'src/': '',
  'src/c.ts': 'export const c = 1\n',
}

const patch = (...lines: string[]) => ['*** Begin Patch', ...lines, '*** End Patch'].join('\n')

interface Row {
  readonly name: string
  readonly read?: readonly string[]
  /** runs after the reads, before the patch */
  readonly meanwhile?: (dir: string) => void
  readonly patch: string
  readonly error?: string
  /** the directory afterwards, as text (START unless given) */
  readonly after?: Record<string, string>
  readonly output?: string
}

const ROWS: Row[] = [
  {
    name: 'adds a file, with its directories',
    patch: patch('*** Add File: docs/new.md', '+# New', '+', '+text'),
    after: { ...START, 'docs/': '', 'docs/new.md': '# New\n\ntext\n' },
    output: 'Applied the patch:\nA docs/new.md',
  },
  {
    name: 'deletes a file it read',
    read: ['b.txt'],
    patch: patch('*** Delete File: b.txt'),
    after: { 'a.txt': START['a.txt'], 'src/': '', 'src/c.ts': START['src/c.ts'] },
    output: 'Applied the patch:\nD b.txt',
  },
  {
    name: 'updates a file with two hunks and an anchor',
    read: ['a.txt'],
    patch: patch('*** Update File: a.txt', '@@ one', '-two', '+TWO', '@@', ' four', '-five', '+FIVE', '+six'),
    after: { ...START, 'a.txt': 'one\nTWO\nthree\nfour\nFIVE\nsix\n' },
    output: 'Applied the patch:\nM a.txt',
  },
  {
    name: 'moves a file and changes it on the way',
    read: ['src/c.ts'],
    patch: patch('*** Update File: src/c.ts', '*** Move to: lib/d.ts', '-export const c = 1', '+export const d = 2'),
    after: {
      'a.txt': START['a.txt'],
      'b.txt': START['b.txt'],
      'src/': '',
      'lib/': '',
      'lib/d.ts': 'export const d = 2\n',
    },
    output: 'Applied the patch:\nM src/c.ts → lib/d.ts',
  },
  {
    name: 'changes several files in one call',
    read: ['a.txt', 'b.txt'],
    patch: patch(
      '*** Update File: a.txt',
      ' three',
      '-four',
      '+4',
      '*** Delete File: b.txt',
      '*** Add File: b2.txt',
      '+beta',
    ),
    after: { ...START, 'a.txt': 'one\ntwo\nthree\n4\nfive\n', 'b.txt': undefined as never, 'b2.txt': 'beta\n' },
    output: 'Applied the patch:\nM a.txt\nD b.txt\nA b2.txt',
  },
  {
    name: 'a hunk that does not apply fails the whole patch, naming the file and hunk',
    read: ['a.txt', 'b.txt'],
    patch: patch(
      '*** Update File: a.txt',
      '-one',
      '+ONE',
      '*** Update File: b.txt',
      '@@',
      '-alpha',
      '+A',
      '@@',
      '-gamma',
      '+G',
    ),
    error: 'PATCH_DOES_NOT_APPLY: b.txt hunk 2: its context and removed lines were not found in the file.',
  },
  {
    name: 'a file changed since the model read it is refused',
    read: ['a.txt', 'b.txt'],
    meanwhile: (dir) => writeFileSync(join(dir, 'b.txt'), 'alpha\nBETA\n'),
    patch: patch('*** Update File: a.txt', '-one', '+ONE', '*** Update File: b.txt', '-alpha', '+A'),
    error: 'FILE_CHANGED_SINCE_READ: b.txt was modified since it was last read.',
    after: { ...START, 'b.txt': 'alpha\nBETA\n' },
  },
  {
    name: 'a file never read is refused',
    read: ['a.txt'],
    patch: patch('*** Update File: a.txt', '-one', '+ONE', '*** Delete File: b.txt'),
    error: 'FILE_NOT_READ: You must read b.txt with the read tool before changing it.',
  },
  {
    name: 'adding a file that exists is refused',
    patch: patch('*** Add File: docs/x.md', '+x', '*** Add File: b.txt', '+b'),
    error: 'FILE_EXISTS: b.txt already exists.',
  },
  {
    name: 'moving onto a file that exists is refused',
    read: ['a.txt'],
    patch: patch('*** Update File: a.txt', '*** Move to: b.txt'),
    error: 'FILE_EXISTS: b.txt already exists.',
  },
  {
    name: 'touching one file twice is refused',
    read: ['a.txt'],
    patch: patch('*** Update File: a.txt', '-one', '+1', '*** Delete File: a.txt'),
    error: 'PATCH_INVALID: a.txt is touched more than once.',
  },
  {
    name: 'a malformed patch is refused',
    patch: '*** Begin Patch\n*** Frobnicate File: a.txt\n*** End Patch',
    error: 'PATCH_INVALID: unexpected line 2',
  },
  {
    name: 'a write that fails midway is undone',
    read: ['a.txt'],
    // a.txt is written first; then a.txt/x cannot be created (a.txt is a file): a.txt is restored
    patch: patch('*** Update File: a.txt', '-one', '+ONE', '*** Add File: b.txt/x', '+x'),
    error: 'WRITE_FAILED: ',
  },
]

describe('apply_patch', () => {
  let tmp: ReturnType<typeof tempDir>
  let f: Fixture
  let read: ReturnType<typeof createReadTool>
  let tool: ReturnType<typeof createApplyPatchTool>
  beforeEach(() => {
    tmp = tempDir()
    f = fixture({ directory: tmp.dir, agentRules: allowAll })
    const fileTimes = createFileTimes()
    read = createReadTool({ dataDir: join(tmp.dir, '.data'), fileTimes })
    tool = createApplyPatchTool({ fileTimes })
    for (const [name, text] of Object.entries(START)) {
      if (name.endsWith('/')) mkdirSync(join(tmp.dir, name))
      else writeFileSync(join(tmp.dir, name), text)
    }
  })
  afterEach(() => {
    f.gate.close()
    f.store.close()
    tmp.cleanup()
  })

  it.each(ROWS)('$name', async (row) => {
    for (const path of row.read ?? []) await read.execute({ filePath: path }, f.ctx())
    row.meanwhile?.(tmp.dir)
    const before = snapshot(tmp.dir)
    const run = tool.execute({ patchText: row.patch }, f.ctx())
    const expected = row.after
      ? files(Object.fromEntries(Object.entries(row.after).filter(([, v]) => v !== undefined)))
      : before
    if (row.error) {
      const err = await run.then(
        () => undefined,
        (e: Error) => e,
      )
      expect(err?.message.startsWith(row.error)).toBe(true)
      expect(snapshot(tmp.dir)).toEqual(expected)
    } else {
      const result = await run
      expect(result.output).toBe(row.output)
      expect(snapshot(tmp.dir)).toEqual(expected)
    }
  })

  it('records the files changed and the diff, and asks edit once with every path as a pattern', async () => {
    const asked = fixture({ directory: tmp.dir }) // build: edits ask
    await read.execute({ filePath: 'a.txt' }, asked.ctx())
    const running = tool.execute(
      {
        patchText: patch(
          '*** Update File: a.txt',
          '*** Move to: z.txt',
          ' one',
          '-two',
          '+2',
          '*** Add File: n.txt',
          '+n',
        ),
      },
      asked.ctx(),
    )
    while (asked.requested().length < 1) await new Promise((r) => setTimeout(r, 5))
    const request = asked.requested()[0]
    expect(request?.permission).toBe('edit')
    expect(request?.patterns).toEqual(['a.txt', 'z.txt', 'n.txt'])
    const diff =
      '--- a.txt → z.txt\n+++ a.txt → z.txt\n@@ -1,5 +1,5 @@\n one\n-two\n+2\n three\n four\n five\n--- n.txt\n+++ n.txt\n@@ -0,0 +1,1 @@\n+n\n'
    expect(request?.metadata?.diff).toBe(diff)
    asked.store.append(
      asked.sessionId,
      [{ type: 'permission.replied', data: { requestId: request?.requestId as string, reply: 'once' } }],
      { meta: { actor: 'user' } },
    )
    const result = await running
    expect(result.metadata).toEqual({
      files: [
        { path: 'a.txt', type: 'move', movePath: 'z.txt' },
        { path: 'n.txt', type: 'add' },
      ],
      diff,
    })
    expect(snapshot(tmp.dir)).toEqual(
      files({
        'b.txt': START['b.txt'],
        'n.txt': 'n\n',
        'src/': '',
        'src/c.ts': START['src/c.ts'],
        'z.txt': 'one\n2\nthree\nfour\nfive\n',
      }),
    )
    asked.gate.close()
    asked.store.close()
  })

  it('a file changed while the person was being asked is refused after the answer, nothing written', async () => {
    const asked = fixture({ directory: tmp.dir })
    await read.execute({ filePath: 'a.txt' }, asked.ctx())
    const running = tool.execute({ patchText: patch('*** Update File: a.txt', '-one', '+ONE') }, asked.ctx())
    while (asked.requested().length < 1) await new Promise((r) => setTimeout(r, 5))
    writeFileSync(join(tmp.dir, 'a.txt'), 'someone else\n')
    const before = snapshot(tmp.dir)
    asked.store.append(
      asked.sessionId,
      [{ type: 'permission.replied', data: { requestId: asked.requested()[0]?.requestId as string, reply: 'once' } }],
      { meta: { actor: 'user' } },
    )
    await expect(running).rejects.toMatchObject({ code: 'FILE_CHANGED_SINCE_READ' })
    expect(snapshot(tmp.dir)).toEqual(before)
    asked.gate.close()
    asked.store.close()
  })

  it('a rejected request writes nothing', async () => {
    const asked = fixture({ directory: tmp.dir })
    const running = tool.execute({ patchText: patch('*** Add File: n.txt', '+n') }, asked.ctx())
    while (asked.requested().length < 1) await new Promise((r) => setTimeout(r, 5))
    asked.store.append(
      asked.sessionId,
      [
        {
          type: 'permission.replied',
          data: { requestId: asked.requested()[0]?.requestId as string, reply: 'reject', message: 'no' },
        },
      ],
      { meta: { actor: 'user' } },
    )
    await expect(running).rejects.toMatchObject({ kind: 'denied', message: 'PERMISSION_DENIED: no' })
    expect(snapshot(tmp.dir)).toEqual(files(START))
    asked.gate.close()
    asked.store.close()
  })
})
