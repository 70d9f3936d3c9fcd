import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { loadView } from '../../src/projections/queries/read-model.js'
import { visibleMessages } from '../../src/runtime/loop/chat-messages.js'
import { hashTree } from './helpers.js'
import { bash, prompt as run, script, type World, world, write } from './world.js'

/**
 * Revert and unrevert (docs/TIME-TRAVEL.md "Revert"), through the real
 * runtime, tools and git: the directory goes back to the workspace at a seq
 * byte for byte and comes back again; the messages after the point are
 * hidden from the model until an unrevert, for good after a new input; a
 * file changed outside the agent is never overwritten without `force`; a
 * restore cut off by a crash is finished on restart.
 */

let w: World | undefined
afterEach(async () => {
  await w?.close()
  w = undefined
})

const prompt = (id: string, text: string) => run(w as World, id, text)
const files = () => hashTree((w as World).directory, ['.git'])
const lastSeq = (id: string) => (w as World).events(id).at(-1)?.seq as number
const typesOf = (id: string) => (w as World).events(id).map((e) => e.type)
const visible = (id: string) => visibleMessages(loadView((w as World).store, id)).map((m) => m.id)

/** Two runs: the first writes a file and a binary, the second edits, deletes and adds. */
function twoRuns(): World {
  return world(
    script({
      first: [write('a.txt', 'first\n'), bash('mkdir -p src && printf "\\000\\001bin" > src/blob.bin')],
      second: [write('a.txt', 'second\n'), bash('rm README.md && printf "new\\n" > src/new.txt')],
      third: [write('c.txt', 'third\n')],
    }),
  )
}

/** Both runs in a new session: the seq and the files where the first ended; the second run done after it. */
async function bothRuns(world: World): Promise<{ id: string; point: number; atPoint: Record<string, string> }> {
  const id = world.session()
  await prompt(id, 'first')
  const point = lastSeq(id)
  const atPoint = files()
  await prompt(id, 'second')
  return { id, point, atPoint }
}

describe('revert and unrevert', () => {
  it('round trip: the files at the point byte for byte, then back to the files it replaced', async () => {
    w = twoRuns()
    const id = w.session()
    await prompt(id, 'first')
    const point = lastSeq(id)
    const atPoint = files()
    const shownAtPoint = visible(id)
    await prompt(id, 'second')
    const atEnd = files()
    const shownAtEnd = visible(id)
    expect(atEnd).not.toEqual(atPoint)

    const reverted = await w.restorer.revert(id, point)
    expect(files()).toEqual(atPoint)
    expect(reverted.changed.map((c) => [c.path, c.status])).toEqual([
      ['README.md', 'added'],
      ['a.txt', 'modified'],
      ['src/new.txt', 'deleted'],
    ])
    // the second run's messages stay in the log, hidden from the model
    expect(visible(id)).toEqual(shownAtPoint)
    expect(reverted.messages).toEqual(shownAtEnd.filter((m) => !shownAtPoint.includes(m)))
    expect(loadView(w.store, id).messages.size).toBe(shownAtEnd.length)
    expect(typesOf(id).slice(-2)).toEqual(['workspace.restore.started', 'workspace.restore.completed'])

    const back = await w.restorer.unrevert(id)
    expect(files()).toEqual(atEnd)
    expect(back.messages).toEqual(reverted.messages)
    expect(visible(id)).toEqual(shownAtEnd)
    await expect(w.restorer.unrevert(id)).rejects.toMatchObject({ code: 'NOTHING_TO_UNREVERT' })
    // the workspace history agrees with the directory at each step of the round trip
    expect((await w.history.file(id, 'a.txt')).content).toBe('second\n')
  })

  it('the model no longer sees reverted messages; a new input makes the revert final', async () => {
    w = twoRuns()
    const { id, point } = await bothRuns(w)
    const { messages: hidden } = await w.restorer.revert(id, point)
    const context = JSON.stringify((await w.runtime.context(id)).messages)
    expect(context).toContain('first')
    expect(context).not.toContain('second')

    await prompt(id, 'third')
    expect(typesOf(id)).toContain('session.revert.finalized')
    expect(readFileSync(join(w.directory, 'c.txt'), 'utf8')).toBe('third\n')
    expect(visible(id).some((m) => hidden.includes(m))).toBe(false)
    expect(JSON.stringify((await w.runtime.context(id)).messages)).not.toContain('second')
    await expect(w.restorer.unrevert(id)).rejects.toMatchObject({ code: 'NOTHING_TO_UNREVERT' })
  })

  it('a revert to before the first step restores the baseline', async () => {
    w = twoRuns()
    const baseline = files()
    const id = w.session()
    const created = lastSeq(id)
    await prompt(id, 'first')
    await w.restorer.revert(id, created)
    expect(files()).toEqual(baseline)
    expect(visible(id)).toEqual([])
  })
})

describe('conflicts with changes made outside the agent', () => {
  it('refuses, listing the files, and changes nothing; force overwrites them', async () => {
    w = twoRuns()
    const { id, point } = await bothRuns(w)
    writeFileSync(join(w.directory, 'a.txt'), 'the user edited this\n')
    writeFileSync(join(w.directory, 'notes.txt'), 'a new file of the user\n')
    const before = files()
    const events = w.events(id).length

    await expect(w.restorer.revert(id, point)).rejects.toMatchObject({
      code: 'WORKSPACE_CONFLICT',
      details: { files: ['a.txt', 'notes.txt'] },
    })
    expect(files()).toEqual(before)
    expect(w.events(id)).toHaveLength(events)

    await w.restorer.revert(id, point, { force: true })
    expect(readFileSync(join(w.directory, 'a.txt'), 'utf8')).toBe('first\n')
    const started = w.events(id).find((e) => e.type === 'workspace.restore.started')
    expect(started?.data).toMatchObject({ kind: 'revert', to: point, force: true })
  })

  it('a change outside the agent that the next step recorded still counts', async () => {
    w = twoRuns()
    const id = w.session()
    await prompt(id, 'first')
    const point = lastSeq(id)
    writeFileSync(join(w.directory, 'README.md'), '# edited by hand\n')
    await prompt(id, 'third') // its first step records the edit as made outside the agent
    await expect(w.restorer.revert(id, point)).rejects.toMatchObject({
      code: 'WORKSPACE_CONFLICT',
      details: { files: ['README.md'] },
    })
  })

  it('unrevert refuses to overwrite files changed since the revert', async () => {
    w = twoRuns()
    const { id, point } = await bothRuns(w)
    await w.restorer.revert(id, point)
    writeFileSync(join(w.directory, 'a.txt'), 'edited after the revert\n')
    await expect(w.restorer.unrevert(id)).rejects.toMatchObject({
      code: 'WORKSPACE_CONFLICT',
      details: { files: ['a.txt'] },
    })
    await w.restorer.unrevert(id, { force: true })
    expect(readFileSync(join(w.directory, 'a.txt'), 'utf8')).toBe('second\n')
  })
})

describe('bad input: a clear error, nothing changed', () => {
  it('a seq out of range or of another session, no history, nothing to unrevert, a missing directory', async () => {
    w = twoRuns()
    const id = w.session()
    const other = w.session()
    await expect(w.restorer.revert(id, lastSeq(id))).rejects.toMatchObject({ code: 'NO_WORKSPACE_HISTORY' })
    await prompt(id, 'first')
    const before = files()
    await expect(w.restorer.revert(id, 10_000)).rejects.toMatchObject({ code: 'SEQ_OUT_OF_RANGE' })
    await expect(w.restorer.revert(id, lastSeq(other))).rejects.toMatchObject({ code: 'SEQ_OUT_OF_RANGE' })
    await expect(w.restorer.unrevert(id)).rejects.toMatchObject({ code: 'NOTHING_TO_UNREVERT' })
    await expect(w.restorer.revert('ses_missing', 1)).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' })
    expect(files()).toEqual(before)

    const point = lastSeq(id)
    rmSync(w.directory, { recursive: true })
    const events = w.events(id).length
    await expect(w.restorer.revert(id, point)).rejects.toMatchObject({ code: 'WORKSPACE_MISSING' })
    expect(w.events(id)).toHaveLength(events)
  })

  it('a second revert while one is under way is SESSION_BUSY; the first completes', async () => {
    w = twoRuns()
    const { id, point, atPoint } = await bothRuns(w)
    const reverting = w.restorer.revert(id, point)
    await expect(w.restorer.revert(id, point)).rejects.toMatchObject({ code: 'SESSION_BUSY' })
    await expect(w.restorer.unrevert(id)).rejects.toMatchObject({ code: 'SESSION_BUSY' })
    await reverting
    expect(files()).toEqual(atPoint)
  })
})

describe('crash safety', () => {
  it('a restore cut off mid-way is completed on restart: the directory equals the recorded tree', async () => {
    w = twoRuns()
    const { id, point, atPoint } = await bothRuns(w)
    const to = (await w.history.files(id, point)).tree as string
    const from = (await w.history.files(id)).tree as string
    // what a kill -9 leaves: the task recorded as started, the directory half-restored
    w.store.append(
      id,
      [
        {
          type: 'workspace.restore.started',
          data: { restoreId: 'rst_crash', kind: 'revert', to: point, from, tree: to, messages: [] },
        },
      ],
      { meta: { actor: 'user', command: 'revert' }, durability: 'full' },
    )
    writeFileSync(join(w.directory, 'a.txt'), 'first\n')
    // until it is finished, no input can start a run on the half-restored files
    const events = w.events(id).length
    await expect(w?.runtime.submit(id, { parts: [{ type: 'text', text: 'third' }] })).rejects.toThrow(
      expect.objectContaining({ code: 'SESSION_BUSY' }),
    )
    expect(w.events(id)).toHaveLength(events)
    expect(await w.restorer.recover()).toBe(1)
    expect(files()).toEqual(atPoint)
    expect(w.events(id).at(-1)).toMatchObject({ type: 'workspace.restore.completed', data: { restoreId: 'rst_crash' } })
    expect(loadView(w.store, id).session?.revert?.tree).toBe(to)
    expect(await w.restorer.recover()).toBe(0)
  })
})
