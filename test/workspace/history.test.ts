import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { StoredEvent } from '../../src/events/envelope.js'
import { getParts } from '../../src/projections/queries/read-model.js'
import { bash, prompt as run, script, type World, world, write } from './world.js'

/**
 * The workspace at any seq (docs/TIME-TRAVEL.md), through the real runtime:
 * a scripted model writes and edits files with the real tools in a real git
 * repository; the runtime records the directory at each step and after each
 * writing tool; the history answers what the files were at any event, and
 * the diff between two.
 */

let w: World | undefined
afterEach(async () => {
  await w?.close()
  w = undefined
})

const prompt = (id: string, text: string) => run(w as World, id, text)

const snapshots = (events: StoredEvent[]) => events.filter((e) => e.type === 'workspace.snapshotted')

describe('the runtime records the workspace', () => {
  it('a baseline at the first step, then what each writing tool changed, as events and as the message patch', async () => {
    w = world(
      script({
        one: [
          write('src/a.ts', 'export const a = 1\n'),
          bash('printf "x\\ny\\n" > notes.txt && mkdir -p build && echo o > build/out'),
        ],
      }),
    )
    const id = w.session()
    await prompt(id, 'one')
    const recorded = snapshots(w.events(id)).map((e) => e.data as Record<string, unknown>)
    // the directory is a repository with no commit yet: each snapshot says which branch HEAD names
    const git = {
      branch: execFileSync('git', ['symbolic-ref', '--short', 'HEAD'], { cwd: w.directory }).toString().trim(),
    }
    expect(recorded.map(({ tree: _t, ...rest }) => rest)).toEqual([
      { reason: 'step', changed: [], git },
      {
        reason: 'tool',
        messageId: expect.any(String),
        partId: expect.any(String),
        changed: [{ path: 'src/a.ts', status: 'added', added: 1, removed: 0 }],
        git,
      },
      {
        reason: 'tool',
        messageId: expect.any(String),
        partId: expect.any(String),
        changed: [{ path: 'notes.txt', status: 'added', added: 2, removed: 0 }],
        git,
      },
    ])
    const messageId = recorded[1]?.messageId as string
    expect(getParts(w.store, id, messageId).filter((p) => p.type === 'patch')).toEqual([
      {
        id: `${messageId}:patch`,
        sessionId: id,
        messageId,
        type: 'patch',
        files: [
          { path: 'notes.txt', status: 'added', added: 2, removed: 0 },
          { path: 'src/a.ts', status: 'added', added: 1, removed: 0 },
        ],
      },
    ])
  })

  it('changes made outside the agent show up at the next step, not in its patch; nothing changed records nothing', async () => {
    w = world(script({ one: [write('a.txt', 'one\n')], two: [bash('true')], three: [write('a.txt', 'three\n')] }))
    const id = w.session()
    await prompt(id, 'one')
    writeFileSync(join(w.directory, 'by-hand.txt'), 'the user typed this\n')
    await prompt(id, 'two')
    const recorded = snapshots(w.events(id)).map((e) => ({
      reason: e.data.reason,
      changed: e.data.changed.map((c) => c.path),
    }))
    expect(recorded).toEqual([
      { reason: 'step', changed: [] },
      { reason: 'tool', changed: ['a.txt'] },
      { reason: 'step', changed: ['by-hand.txt'] }, // bash true then changed nothing: no event
    ])
  })
})

describe('the workspace at any seq', () => {
  it('files and their content as they were at an event; the diff between two events', async () => {
    w = world(
      script({ first: [write('a.txt', 'first\n')], second: [bash('printf "second\\n" > a.txt && rm README.md')] }),
    )
    const id = w.session()
    await prompt(id, 'first')
    const afterFirst = w.events(id).at(-1)?.seq as number
    await prompt(id, 'second')
    const end = w.events(id).at(-1)?.seq as number
    const created = w.events(id)[0]?.seq as number

    // before the first snapshot: the baseline it recorded (the agent had changed nothing yet)
    expect((await w.history.files(id, created)).files.map((f) => f.path)).toEqual(['.gitignore', 'README.md'])
    const then = await w.history.files(id, afterFirst)
    expect(then.files.map((f) => [f.path, f.size, f.type])).toEqual([
      ['.gitignore', 7, 'file'],
      ['README.md', 7, 'file'],
      ['a.txt', 6, 'file'],
    ])
    expect((await w.history.file(id, 'a.txt', afterFirst)).content).toBe('first\n')
    expect((await w.history.file(id, 'a.txt')).content).toBe('second\n')
    expect(readFileSync(join(w.directory, 'a.txt'), 'utf8')).toBe('second\n')
    await expect(w.history.file(id, 'README.md', end)).rejects.toMatchObject({ code: 'NOT_IN_SNAPSHOT' })

    const diff = await w.history.diff(id, afterFirst, end)
    expect(diff.files).toEqual([
      { path: 'README.md', status: 'deleted', added: 0, removed: 1 },
      { path: 'a.txt', status: 'modified', added: 1, removed: 1 },
    ])
    expect(diff.patch).toContain('--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-first\n+second\n')
  })

  it('at a seq inside a running tool, the files are those before the tool', async () => {
    w = world(script({ go: [write('late.txt', 'written\n')] }))
    const id = w.session()
    await prompt(id, 'go')
    const called = w.events(id).find((e) => e.type === 'tool.called')?.seq as number
    expect((await w.history.files(id, called)).files.map((f) => f.path)).not.toContain('late.txt')
    expect((await w.history.files(id)).files.map((f) => f.path)).toContain('late.txt')
  })

  it('bad input: a seq out of range or of another session is a clear error', async () => {
    w = world(script({ go: [write('x.txt', 'x\n')] }))
    const id = w.session()
    const other = w.session()
    await prompt(id, 'go')
    await expect(w.history.files(id, 10_000)).rejects.toMatchObject({ code: 'SEQ_OUT_OF_RANGE' })
    const seqOfOther = w.events(other)[0]?.seq as number
    await expect(w.history.diff(id, seqOfOther, seqOfOther)).rejects.toMatchObject({ code: 'SEQ_OUT_OF_RANGE' })
  })

  it('binary files and files over the size cap are listed as such in diffs, never printed', async () => {
    w = world(
      script({
        one: [write('small.txt', 'small\n')],
        two: [bash('head -c 4096 /dev/zero | tr "\\000" x > big.txt && printf "\\000bin" > b.bin')],
      }),
      { maxFileBytes: 1024 },
    )
    const id = w.session()
    await prompt(id, 'one')
    const one = w.events(id).at(-1)?.seq as number
    await prompt(id, 'two')
    const two = w.events(id).at(-1)?.seq as number
    const diff = await w.history.diff(id, one, two)
    expect(diff.files).toEqual([
      { path: 'b.bin', status: 'added', binary: true },
      { path: 'big.txt', status: 'added', large: true },
    ])
    expect(diff.patch).toContain('Binary files /dev/null and b/b.bin differ')
    expect(diff.patch).toContain('Large files a/big.txt and b/big.txt differ (over the size cap: listed, not stored)')
    expect(diff.patch).not.toContain('xxxx')
    expect((await w.history.files(id, two)).files.find((f) => f.path === 'big.txt')).toEqual({
      path: 'big.txt',
      size: 4096,
      type: 'large',
    })
    await expect(w.history.file(id, 'big.txt', two)).rejects.toMatchObject({ code: 'NOT_IN_SNAPSHOT' })
  })

  it("the user's own .git is never touched", async () => {
    w = world(script({ go: [write('x.txt', 'x\n'), bash('echo y >> x.txt')] }))
    const before = digestOf(join(w.directory, '.git'))
    const id = w.session()
    await prompt(id, 'go')
    await w.history.diff(id, w.events(id)[0]?.seq as number, w.events(id).at(-1)?.seq as number)
    expect(digestOf(join(w.directory, '.git'))).toBe(before)
  })
})

/** Every file under a directory, with its bytes, as one string. */
function digestOf(dir: string): string {
  return execFileSync('sh', ['-c', 'find . -type f -print0 | sort -z | xargs -0 sha256sum'], {
    cwd: dir,
    encoding: 'utf8',
  })
}
