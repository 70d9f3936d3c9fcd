import { execFileSync } from 'node:child_process'
import { closeSync, mkdirSync, openSync, writeFileSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createEditTool } from '../../src/tools/builtin/edit.js'
import { createGlobTool } from '../../src/tools/builtin/glob.js'
import { createGrepTool } from '../../src/tools/builtin/grep.js'
import { createReadTool } from '../../src/tools/builtin/read.js'
import { createWriteTool } from '../../src/tools/builtin/write.js'
import { createFileTimes } from '../../src/tools/file-times.js'
import type { ToolContext, ToolResult } from '../../src/tools/tool.js'
import { startProbe } from '../tools/event-loop-probe.js'
import { type Fixture, fixture, tempDir } from '../tools/helpers.js'

/**
 * A hostile model must not stall the server: every row is an attack that used
 * to block the event loop (or hang the call for good). Each row asserts the
 * safe outcome, how soon it came, and that a 5 ms probe timer kept firing
 * (no gap of 100 ms) while the call ran.
 */

const allowAll = [{ permission: '*', pattern: '*', action: 'allow' as const }]
const GREP_DEADLINE_MS = 1000

function tools(dir: string) {
  const fileTimes = createFileTimes()
  return {
    read: createReadTool({ dataDir: join(dir, '.data'), fileTimes }),
    write: createWriteTool({ fileTimes }),
    edit: createEditTool({ fileTimes }),
    grep: createGrepTool({ deadlineMs: GREP_DEADLINE_MS }),
    glob: createGlobTool(),
  }
}

type Outcome = { ok: true; result: ToolResult } | { ok: false; error: { kind?: string; message: string } }

interface Row {
  readonly attack: string
  arrange(dir: string): void
  act(t: ReturnType<typeof tools>, ctx: ToolContext): Promise<ToolResult>
  /** the safe outcome */
  readonly expected: (dir: string) => Outcome
  /** the call must settle within this */
  readonly withinMs: number
}

const mkfifo = (dir: string) => execFileSync('mkfifo', [join(dir, 'pipe')])
const failed = (message: string): Outcome => ({ ok: false, error: { kind: 'failed', message } })
const FIFO = 'pipe is a FIFO (named pipe), not a regular file'

const rows: Row[] = [
  {
    attack: 'grep with a catastrophically backtracking regex',
    arrange: (dir) => writeFileSync(join(dir, 'a.txt'), `${'a'.repeat(40)}!\n`),
    act: (t, ctx) => t.grep.execute({ pattern: '^(a+)+$' }, ctx),
    expected: () =>
      failed(
        'grep took longer than 1 s and was stopped. Regular expressions with nested quantifiers, such as (a+)+ or (\\w*)*, can take exponential time on some lines: simplify the pattern, or narrow the path or include.',
      ),
    withinMs: GREP_DEADLINE_MS + 1500,
  },
  {
    attack: 'read of a FIFO (no writer ever comes)',
    arrange: mkfifo,
    act: (t, ctx) => t.read.execute({ filePath: 'pipe' }, ctx),
    expected: () => failed(FIFO),
    withinMs: 500,
  },
  {
    attack: 'write to a FIFO (no reader ever comes)',
    arrange: mkfifo,
    act: (t, ctx) => t.write.execute({ filePath: 'pipe', content: 'x' }, ctx),
    expected: () => failed(FIFO),
    withinMs: 500,
  },
  {
    attack: 'edit of a FIFO',
    arrange: mkfifo,
    act: (t, ctx) => t.edit.execute({ filePath: 'pipe', oldString: 'a', newString: 'b' }, ctx),
    expected: () => failed(FIFO),
    withinMs: 500,
  },
  {
    attack: 'grep of a FIFO named as the path',
    arrange: mkfifo,
    act: (t, ctx) => t.grep.execute({ pattern: 'x', path: 'pipe' }, ctx),
    expected: () => ({
      ok: true,
      result: { output: 'No matches found', title: 'x', metadata: { matches: 0, truncated: false } },
    }),
    withinMs: 2000,
  },
  {
    attack: 'read of /dev/zero (never ends)',
    arrange: () => {},
    act: (t, ctx) => t.read.execute({ filePath: '/dev/zero' }, ctx),
    expected: () => failed('/dev/zero is a character device, not a regular file'),
    withinMs: 500,
  },
  {
    attack: 'read of /dev/urandom',
    arrange: () => {},
    act: (t, ctx) => t.read.execute({ filePath: '/dev/urandom' }, ctx),
    expected: () => failed('/dev/urandom is a character device, not a regular file'),
    withinMs: 500,
  },
  {
    attack: 'glob with a pathological pattern over long names',
    arrange: (dir) => {
      for (let i = 0; i < 30; i++) writeFileSync(join(dir, `${'a'.repeat(200)}${i}`), '')
    },
    act: (t, ctx) => t.glob.execute({ pattern: '*a*a*a*a*a*a*a*a*a*a*a*a*b' }, ctx),
    expected: () => ({
      ok: true,
      result: {
        output: 'No files found',
        title: '*a*a*a*a*a*a*a*a*a*a*a*a*b',
        metadata: { count: 0, truncated: false },
      },
    }),
    withinMs: 2000,
  },
]

describe('stall attacks', () => {
  let tmp: ReturnType<typeof tempDir>
  let f: Fixture
  beforeEach(() => {
    tmp = tempDir()
    f = fixture({ directory: tmp.dir, agentRules: allowAll })
  })
  afterEach(() => {
    f.gate.close()
    f.store.close()
    tmp.cleanup()
  })

  // retry: a wall-clock gap can also be the OS not running this process on a loaded machine; a real stall fails every attempt
  it.each(rows)('$attack', { retry: 2 }, async (row) => {
    row.arrange(tmp.dir)
    const probe = startProbe()
    const started = performance.now()
    const outcome = await settle(row.act(tools(tmp.dir), f.ctx()))
    const elapsed = performance.now() - started
    await new Promise((r) => setTimeout(r, 30)) // the probe must go on firing after the call, too
    const { maxGapMs, fired } = probe.stop()
    expect(outcome).toEqual(row.expected(tmp.dir))
    expect(elapsed).toBeLessThan(row.withinMs)
    expect(fired).toBeGreaterThan(0)
    expect(maxGapMs).toBeLessThan(100)
  })

  it('read of a directory with 5000 entries lists at most 2000, and says so', { retry: 2 }, async () => {
    mkdirSync(join(tmp.dir, 'big'))
    for (let i = 0; i < 5000; i++) writeFileSync(join(tmp.dir, 'big', `f${i}`), '')
    const probe = startProbe()
    const r = await tools(tmp.dir).read.execute({ filePath: 'big' }, f.ctx())
    const { maxGapMs } = probe.stop()
    const lines = r.output.split('\n')
    expect(lines.filter((l) => /^f\d+$/.test(l))).toHaveLength(2000)
    expect(r.output).toContain('(more than 2000 entries; use glob or list with ignore globs to narrow it)')
    expect(maxGapMs).toBeLessThan(100)
  })

  it('edit of a 20 MB file is refused before it is read', async () => {
    const fd = openSync(join(tmp.dir, 'huge.txt'), 'w')
    const block = Buffer.alloc(1024 * 1024, 'x')
    for (let i = 0; i < 20; i++) writeSync(fd, block)
    closeSync(fd)
    const t = tools(tmp.dir)
    await t.read.execute({ filePath: 'huge.txt' }, f.ctx())
    await expect(
      t.edit.execute({ filePath: 'huge.txt', oldString: 'x', newString: 'y', replaceAll: true }, f.ctx()),
    ).rejects.toMatchObject({
      kind: 'failed',
      message: 'huge.txt is 20971520 bytes; edit changes files up to 16 MiB. Use bash for larger files.',
    })
  })

  it('read of a 20 MB single-line file keeps memory bounded and output capped', { retry: 2 }, async () => {
    const fd = openSync(join(tmp.dir, 'one-line.txt'), 'w')
    const block = Buffer.alloc(1024 * 1024, 'x')
    for (let i = 0; i < 20; i++) writeSync(fd, block)
    closeSync(fd)
    const t = tools(tmp.dir)
    const probe = startProbe()
    const rssBefore = process.memoryUsage().rss
    const r = await t.read.execute({ filePath: 'one-line.txt' }, f.ctx())
    const grew = process.memoryUsage().rss - rssBefore
    const { maxGapMs, fired } = probe.stop()
    expect(r.output).toBe(
      `<file path="one-line.txt">\n00001| ${'x'.repeat(2000)}... (line truncated to 2000 characters)\n\n(End of file - 1 lines)\n</file>`,
    )
    expect(grew).toBeLessThan(8 * 1024 * 1024) // the line alone would be 20 MB (40 MB as a JS string)
    expect(fired).toBeGreaterThan(0)
    expect(maxGapMs).toBeLessThan(100)
  })
})

async function settle(call: Promise<ToolResult>): Promise<Outcome> {
  try {
    return { ok: true, result: await call }
  } catch (err) {
    const e = err as { kind?: string; message: string }
    return { ok: false, error: { kind: e.kind, message: e.message } }
  }
}
