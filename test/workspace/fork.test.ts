import { sqliteLog } from '../../src/events/log.js'
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { exportSession, importSessions } from '../../src/projections/transfer/export.js'
import { getParts, listSessions } from '../../src/projections/queries/read-model.js'
import { hashTree } from './helpers.js'
import { prompt as run, script, type World, world, write } from './world.js'

/**
 * Fork with files (docs/TIME-TRAVEL.md "Fork"), through the real runtime,
 * tools and git: the child gets its own directory written from the
 * workspace at the fork point; its model reads the files as they were there;
 * the parent's directory is untouched; a half-written directory is finished
 * on restart.
 */

let w: World | undefined
afterEach(async () => {
  await w?.close()
  w = undefined
})

const prompt = (id: string, text: string) => run(w as World, id, text)
const lastSeq = (id: string) => (w as World).events(id).at(-1)?.seq as number
const read = (filePath: string) => ({ name: 'read', input: { filePath } })

function editTwice(): World {
  return world(
    script({
      first: [write('a.txt', 'old content\n')],
      second: [write('a.txt', 'new content\n')],
      check: [read('a.txt')],
      peek: [read('../../token')],
    }),
  )
}

/** What the child's model saw from its read tool calls. */
function readResults(id: string): string[] {
  return getParts((w as World).store, id)
    .filter((p) => p.type === 'tool' && p.tool === 'read')
    .map((p) => (p.type === 'tool' ? (p.output ?? p.error?.message ?? '') : ''))
}

describe('fork with files', () => {
  it("fork before an edit: the child's model reads the old content, the parent's file keeps the new", async () => {
    w = editTwice()
    const parent = w.session()
    await prompt(parent, 'first')
    const point = lastSeq(parent)
    await prompt(parent, 'second')
    const parentFiles = hashTree(w.directory, ['.git'])

    const child = await w.forks.fork(parent, point, { title: 'before the edit' })
    expect(child.directory).toBe(join(w.dataDir, 'forks', child.id))
    expect(readFileSync(join(child.directory, 'a.txt'), 'utf8')).toBe('old content\n')
    expect(child.workspace?.tree).toBe((await w.history.files(parent, point)).tree)
    expect(w.events(child.id).map((e) => e.type)).toEqual([
      'session.forked',
      'workspace.materialize.started',
      'workspace.materialized',
    ])

    await prompt(child.id, 'check')
    expect(readResults(child.id).join('\n')).toContain('old content')
    expect(readFileSync(join(w.directory, 'a.txt'), 'utf8')).toBe('new content\n')
    expect(hashTree(w.directory, ['.git'])).toEqual(parentFiles)
  })

  it("the fork's directory lies in the data dir, and still nothing else there is reachable", async () => {
    w = editTwice()
    mkdirSync(w.dataDir, { recursive: true })
    writeFileSync(join(w.dataDir, 'token'), 'server secret\n')
    const parent = w.session()
    await prompt(parent, 'first')
    const child = await w.forks.fork(parent, lastSeq(parent))
    await prompt(child.id, 'peek')
    const [result] = readResults(child.id)
    expect(result).not.toContain('server secret')
    expect(result).toContain("Chronicle's own data")
  })

  it('writes into a directory the client names: absent or empty; one that is not empty is refused, nothing appended', async () => {
    w = editTwice()
    const parent = w.session()
    await prompt(parent, 'first')
    const point = lastSeq(parent)
    const named = join(w.dataDir, '..', 'elsewhere', 'fork')
    const child = await w.forks.fork(parent, point, { directory: named })
    expect(readFileSync(join(named, 'a.txt'), 'utf8')).toBe('old content\n')
    expect(child.directory).toBe(named)

    const empty = join(w.dataDir, '..', 'empty')
    mkdirSync(empty)
    await w.forks.fork(parent, point, { directory: empty })
    // the parent's directory is a repository (with no commit yet): so is the fork's (test/workspace/fork-git.test.ts)
    expect(readdirSync(empty).sort()).toEqual(['.git', '.gitignore', 'README.md', 'a.txt'])

    const sessions = listSessions(w.store).sessions.length
    await expect(w.forks.fork(parent, point, { directory: w.directory })).rejects.toMatchObject({
      code: 'DIRECTORY_NOT_EMPTY',
    })
    await expect(w.forks.fork(parent, point, { directory: 'relative/dir' })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
    })
    await expect(w.forks.fork(parent, 10_000)).rejects.toMatchObject({ code: 'SEQ_OUT_OF_RANGE' })
    expect(listSessions(w.store).sessions).toHaveLength(sessions)
  })

  it('at the event that completed a write, the child has the written file (the snapshot comes just before it)', async () => {
    w = editTwice()
    const parent = w.session()
    await prompt(parent, 'first')
    await prompt(parent, 'second')
    const events = w.events(parent)
    const completed = events.filter((e) => e.type === 'tool.completed').at(-1)?.seq as number
    expect(events.find((e) => e.seq === completed - 1)?.type).toBe('workspace.snapshotted')
    const child = await w.forks.fork(parent, completed)
    expect(readFileSync(join(child.directory, 'a.txt'), 'utf8')).toBe('new content\n')
    const before = await w.forks.fork(parent, completed - 2)
    expect(readFileSync(join(before.directory, 'a.txt'), 'utf8')).toBe('old content\n')
  })

  it('files: false forks the history only; the child works in the same directory', async () => {
    w = editTwice()
    const parent = w.session()
    await prompt(parent, 'first')
    const child = await w.forks.fork(parent, lastSeq(parent), { files: false })
    expect(child.directory).toBe(w.directory)
    expect(w.events(child.id).map((e) => e.type)).toEqual(['session.forked'])
  })
})

describe('hostile imports', () => {
  it("an imported session's snapshots are never written out or restored, even when their trees are in the store", async () => {
    w = editTwice()
    const parent = w.session()
    await prompt(parent, 'first') // the store now holds this session's tree…
    const file = exportSession(w.store, parent)
    // …which an imported copy names: a fork must not write those files, a revert must not restore them
    const imported = (await importSessions(sqliteLog(w.store), w.ids, file)).exported.sessionId
    const at = lastSeq(imported)
    const empty = join(w.dataDir, '..', 'import-target')
    mkdirSync(empty)
    const child = await w.forks.fork(imported, at - 1, { directory: empty })
    expect(child.directory).toBe(empty)
    expect(readdirSync(empty)).toEqual([])
    expect(w.events(child.id).map((e) => e.type)).not.toContain('workspace.materialize.started')
    await expect(w.restorer.revert(imported, at - 1)).rejects.toMatchObject({ code: 'SESSION_READ_ONLY' })
  })
})

describe('crash safety', () => {
  /** What a kill -9 leaves after `workspace.materialize.started`: the child recorded, its directory not yet there. */
  async function crashedFork(): Promise<{ id: string; tree: string; directory: string }> {
    const world_ = w as World
    const parent = world_.session()
    await prompt(parent, 'first')
    const point = lastSeq(parent)
    const tree = (await world_.history.files(parent, point)).tree as string
    const id = 'ses_crashed'
    const directory = join(world_.dataDir, 'forks', id)
    world_.store.append(
      id,
      [
        { type: 'session.forked', data: { from: { sessionId: parent, seq: point }, directory } },
        { type: 'workspace.materialize.started', data: { tree, directory } },
      ],
      { meta: { actor: 'user', command: 'fork' }, durability: 'full' },
    )
    return { id, tree, directory }
  }

  it('a checkout cut off mid-way is discarded and written again on restart', async () => {
    w = editTwice()
    const { id, tree, directory } = await crashedFork()
    const partial = `${directory}.partial-0123456789ab`
    mkdirSync(partial, { recursive: true })
    writeFileSync(join(partial, 'a.txt'), 'half')
    expect(await w.forks.recover()).toBe(1)
    expect(existsSync(partial)).toBe(false)
    expect(readFileSync(join(directory, 'a.txt'), 'utf8')).toBe('old content\n')
    expect((await w.shadow.snapshot(directory)).tree).toBe(tree)
    expect(w.events(id).at(-1)).toMatchObject({ type: 'workspace.materialized', data: { tree } })
    expect(await w.forks.recover()).toBe(0)
  })

  it('a directory renamed into place before the crash is kept, and only the event is added', async () => {
    w = editTwice()
    const { id, tree, directory } = await crashedFork()
    await w.shadow.materialize(tree, directory)
    const before = hashTree(directory)
    expect(await w.forks.recover()).toBe(1)
    expect(hashTree(directory)).toEqual(before)
    expect(w.events(id).at(-1)?.type).toBe('workspace.materialized')
  })

  it('until it is written, no input can run in the child', async () => {
    w = editTwice()
    const { id } = await crashedFork()
    await expect(w?.runtime.submit(id, { parts: [{ type: 'text', text: 'check' }] })).rejects.toThrow(
      expect.objectContaining({ code: 'SESSION_BUSY' }),
    )
  })
})
