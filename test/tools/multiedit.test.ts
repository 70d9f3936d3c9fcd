import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createMultiEditTool } from '../../src/tools/builtin/multiedit.js'
import { createReadTool } from '../../src/tools/builtin/read.js'
import { createFileTimes } from '../../src/tools/file-times.js'
import { files, snapshot } from './dir-snapshot.js'
import { type Fixture, fixture, tempDir } from './helpers.js'

/** multiedit through its real execute path and the real gate, the directory checked byte for byte. */

const allowAll = [{ permission: '*', pattern: '*', action: 'allow' as const }]
const START = { 'a.ts': 'const a = 1\nconst b = 2\nconst b2 = 2\n' }

type Edit = { oldString: string; newString: string; replaceAll?: boolean }
interface Row {
  readonly name: string
  readonly read?: boolean
  readonly meanwhile?: (dir: string) => void
  readonly filePath?: string
  readonly edits: Edit[]
  readonly error?: string
  readonly after?: Record<string, string>
  readonly output?: string
}

const ROWS: Row[] = [
  {
    name: 'applies edits in order, each to the result of the one before',
    read: true,
    edits: [
      { oldString: 'const a = 1', newString: 'const alpha = 1' },
      { oldString: 'alpha', newString: 'first' },
      { oldString: '2', newString: '3', replaceAll: true },
    ],
    after: { 'a.ts': 'const first = 1\nconst b = 3\nconst b3 = 3\n' },
    output: 'Edited a.ts: 3 edits.',
  },
  {
    name: 'creates a file when the first oldString is empty',
    filePath: 'new/b.ts',
    edits: [
      { oldString: '', newString: 'let x = 1\n' },
      { oldString: 'x', newString: 'y' },
    ],
    after: { ...START, 'new/': '', 'new/b.ts': 'let y = 1\n' },
    output: 'Created new/b.ts: 2 edits.',
  },
  {
    name: 'an edit not found fails the call, naming it; nothing is written',
    read: true,
    edits: [
      { oldString: 'const a = 1', newString: 'const a = 10' },
      { oldString: 'const c', newString: 'const d' },
    ],
    error: 'EDIT_NOT_FOUND: a.ts edit 2: oldString was not found',
  },
  {
    name: 'an ambiguous edit fails the call',
    read: true,
    edits: [
      { oldString: 'const a = 1', newString: 'const a = 10' },
      { oldString: '= 2', newString: '= 20' },
    ],
    error: 'EDIT_NOT_UNIQUE: a.ts edit 2: oldString occurs 2 times',
  },
  {
    name: 'an edit that changes nothing is refused',
    read: true,
    edits: [{ oldString: 'a', newString: 'a' }],
    error: 'EDIT_NO_CHANGE: a.ts edit 1',
  },
  {
    name: 'a file not read is refused',
    edits: [{ oldString: 'const a', newString: 'let a' }],
    error: 'FILE_NOT_READ: You must read a.ts',
  },
  {
    name: 'a file changed since read is refused',
    read: true,
    meanwhile: (dir) => writeFileSync(join(dir, 'a.ts'), 'const a = 1\n'),
    edits: [{ oldString: 'const a', newString: 'let a' }],
    error: 'FILE_CHANGED_SINCE_READ: a.ts was modified since it was last read.',
    after: { 'a.ts': 'const a = 1\n' },
  },
  {
    name: 'a missing file is refused',
    filePath: 'nope.ts',
    edits: [{ oldString: 'x', newString: 'y' }],
    error: 'FILE_NOT_FOUND: nope.ts does not exist.',
  },
]

describe('multiedit', () => {
  let tmp: ReturnType<typeof tempDir>
  let f: Fixture
  let read: ReturnType<typeof createReadTool>
  let tool: ReturnType<typeof createMultiEditTool>
  beforeEach(() => {
    tmp = tempDir()
    f = fixture({ directory: tmp.dir, agentRules: allowAll })
    const fileTimes = createFileTimes()
    read = createReadTool({ dataDir: join(tmp.dir, '.data'), fileTimes })
    tool = createMultiEditTool({ fileTimes })
    writeFileSync(join(tmp.dir, 'a.ts'), START['a.ts'])
  })
  afterEach(() => {
    f.gate.close()
    f.store.close()
    tmp.cleanup()
  })

  it.each(ROWS)('$name', async (row) => {
    if (row.read) await read.execute({ filePath: 'a.ts' }, f.ctx())
    row.meanwhile?.(tmp.dir)
    const before = snapshot(tmp.dir)
    const run = tool.execute({ filePath: row.filePath ?? 'a.ts', edits: row.edits }, f.ctx())
    if (row.error) {
      const err = await run.then(
        () => undefined,
        (e: Error) => e,
      )
      expect(err?.message.startsWith(row.error)).toBe(true)
    } else {
      expect((await run).output).toBe(row.output)
    }
    expect(snapshot(tmp.dir)).toEqual(row.after ? files(row.after) : before)
  })

  it('asks edit for the file with the whole change as one diff, and records it', async () => {
    const asked = fixture({ directory: tmp.dir }) // build: edits ask
    await read.execute({ filePath: 'a.ts' }, asked.ctx())
    const running = tool.execute(
      {
        filePath: 'a.ts',
        edits: [
          { oldString: 'const a', newString: 'let a' },
          { oldString: 'const b =', newString: 'let b =' },
        ],
      },
      asked.ctx(),
    )
    while (asked.requested().length < 1) await new Promise((r) => setTimeout(r, 5))
    const diff =
      '--- a.ts\n+++ a.ts\n@@ -1,3 +1,3 @@\n-const a = 1\n-const b = 2\n+let a = 1\n+let b = 2\n const b2 = 2\n'
    expect(asked.requested().map((r) => [r.permission, r.patterns, r.metadata?.diff])).toEqual([
      ['edit', ['a.ts'], diff],
    ])
    asked.store.append(
      asked.sessionId,
      [{ type: 'permission.replied', data: { requestId: asked.requested()[0]?.requestId as string, reply: 'once' } }],
      { meta: { actor: 'user' } },
    )
    const result = await running
    expect(result.metadata).toEqual({
      filePath: join(tmp.dir, 'a.ts'),
      edits: 2,
      files: [{ path: 'a.ts', type: 'update' }],
      diff,
    })
    expect(snapshot(tmp.dir)).toEqual(files({ 'a.ts': 'let a = 1\nlet b = 2\nconst b2 = 2\n' }))
    asked.gate.close()
    asked.store.close()
  })
})
