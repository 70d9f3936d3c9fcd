import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { execute } from '../../src/commands/execute.js'
import { appendFork, decideFork } from '../../src/commands/fork.js'
import { decideSession } from '../../src/commands/session.js'
import type { ChronicleEvent, DataOf } from '../../src/events/catalogue.js'
import type { StoredEvent } from '../../src/events/envelope.js'
import { sequentialIds } from '../../src/events/ids.js'
import type { StorePorts } from '../../src/projections/store-ports.js'
import { visibleMessages } from '../../src/runtime/loop/chat-messages.js'
import { createWorkspaceForks, type WorkspaceForks } from '../../src/runtime/workspace/forks.js'
import { createWorkspaceHistory, type WorkspaceHistory } from '../../src/runtime/workspace/history.js'
import { createWorkspaceRestorer, type WorkspaceRestorer } from '../../src/runtime/workspace/restore.js'
import { createShadowStore, type ShadowStore } from '../../src/runtime/workspace/shadow-store.js'
import { createWorkspaceSnapshots, type WorkspaceSnapshots } from '../../src/runtime/workspace/snapshots.js'
import { hashTree, tempDir } from './helpers.js'

/**
 * The workspace's recorded history over the store's ports, one suite for
 * both engines: test/workspace/workspace.sqlite.test.ts on a SQLite file,
 * workspace.postgres.test.ts on a real PostgreSQL server. Snapshots are
 * taken of a real directory by the real shadow store (git) and appended
 * through the log; the history, revert and unrevert, fork with files and
 * the recovery of a restore or a fork a crash cut off read through the read
 * models, time travel and the log. What the agent does is played by writing
 * the files and appending its turn as the runtime would.
 */
export interface WorkspaceEngine {
  /** a new, empty store as its ports */
  open(): Promise<OpenedStore>
}

export interface OpenedStore {
  readonly ports: StorePorts
  /** the server gone without closing anything (the engine's own crash where it has one), then the store opened again */
  restart(): Promise<StorePorts>
  close(): Promise<void>
}

interface Bench {
  readonly ports: StorePorts
  readonly directory: string
  readonly forksDir: string
  readonly shadow: ShadowStore
  readonly snapshots: WorkspaceSnapshots
  readonly history: WorkspaceHistory
  readonly restorer: WorkspaceRestorer
  readonly forks: WorkspaceForks
}

const meta = { actor: 'runtime' as const }
const ids = sequentialIds()

export function describeWorkspaceContract(engine: string, open: WorkspaceEngine['open']): void {
  let cleanups: (() => Promise<void> | void)[] = []
  afterEach(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup()
    cleanups = []
  })

  function over(ports: StorePorts, root: string, shadow: ShadowStore): Bench {
    const forksDir = join(root, 'forks')
    return {
      ports,
      directory: join(root, 'repo'),
      forksDir,
      shadow,
      snapshots: createWorkspaceSnapshots({ ports, shadow }),
      history: createWorkspaceHistory(ports, shadow),
      restorer: createWorkspaceRestorer({ ports, shadow, ids }),
      forks: createWorkspaceForks({ ports, ids, shadow, forksDir, forbidden: [join(root, 'workspaces')] }),
    }
  }

  /** A store, a directory with a README and a session working in it. */
  async function start(): Promise<{ b: Bench; id: string; store: OpenedStore; root: string }> {
    const store = await open()
    const { dir: root, cleanup } = tempDir('ports')
    const shadow = createShadowStore({ root: join(root, 'workspaces'), globalExcludes: null })
    cleanups.push(
      cleanup,
      () => store.close(),
      () => shadow.close(),
    )
    const b = over(store.ports, root, shadow)
    mkdirSync(b.directory)
    writeFileSync(join(b.directory, 'README.md'), '# demo\n')
    return { b, id: await createSession(b), store, root }
  }

  async function createSession(b: Bench): Promise<string> {
    const id = ids.next('ses')
    const create = { type: 'create' as const, directory: b.directory, agent: 'build', model: 'mock:model' }
    await execute(b.ports, id, (s) => decideSession(create, s, id), { meta: { actor: 'user' } })
    return id
  }

  const events = (b: Bench, id: string) => b.ports.log.readSession(id)
  const lastSeq = async (b: Bench, id: string) => ((await events(b, id)).at(-1) as StoredEvent).seq
  const snapshotsOf = async (b: Bench, id: string) =>
    (await events(b, id))
      .filter((e) => e.type === 'workspace.snapshotted')
      .map((e) => e.data as DataOf<'workspace.snapshotted'>)

  /** A turn as the runtime records it: the user's message, the agent's answer, and the files it wrote. */
  async function turn(b: Bench, id: string, t: string, files: Record<string, string | null>): Promise<void> {
    const [question, answer] = [`msg_${t}q`, `msg_${t}a`]
    const opened: ChronicleEvent[] = [
      {
        type: 'input.accepted',
        data: { inputId: `in_${t}`, parts: [{ type: 'text', text: t }], delivery: 'queue', noReply: false, digest: t },
      },
      { type: 'input.delivered', data: { inputId: `in_${t}`, messageId: question, partIds: [`prt_${t}q`] } },
      {
        type: 'message.created',
        data: { messageId: answer, role: 'assistant', parentId: question, agent: 'build', model: null },
      },
    ]
    await b.ports.log.append(id, opened, { meta })
    b.snapshots.step(id, b.directory, meta)
    await b.snapshots.settled(id)
    for (const [path, content] of Object.entries(files)) {
      if (content === null) rmSync(join(b.directory, path))
      else writeFileSync(join(b.directory, path), content)
    }
    await b.snapshots.record(id, b.directory, 'tool', { actor: 'tool' })
    await b.ports.log.append(id, [{ type: 'message.completed', data: { messageId: answer, finish: 'stop' } }], {
      meta,
    })
  }

  /** Two turns: the first adds a.txt, the second edits it, adds c.txt and deletes the README. */
  async function twoTurns() {
    const started = await start()
    const { b, id } = started
    const created = await lastSeq(b, id)
    const baseline = hashTree(b.directory)
    await turn(b, id, 'one', { 'a.txt': 'first\n' })
    const point = await lastSeq(b, id)
    const atPoint = hashTree(b.directory)
    await turn(b, id, 'two', { 'a.txt': 'second\n', 'c.txt': 'new\n', 'README.md': null })
    return { ...started, created, baseline, point, atPoint, atEnd: hashTree(b.directory) }
  }

  describe(`the workspace's history over the store's ports (${engine})`, () => {
    it('snapshots: a baseline at the first step, then what each tool changed; nothing changed records nothing', async () => {
      const { b, id } = await twoTurns()
      expect((await snapshotsOf(b, id)).map((s) => [s.reason, s.changed.map((c) => [c.path, c.status])])).toEqual([
        ['step', []],
        ['tool', [['a.txt', 'added']]],
        [
          'tool',
          [
            ['README.md', 'deleted'],
            ['a.txt', 'modified'],
            ['c.txt', 'added'],
          ],
        ],
      ])
      const count = (await events(b, id)).length
      await b.snapshots.record(id, b.directory, 'tool', meta)
      b.snapshots.step(id, b.directory, meta)
      await b.snapshots.drain()
      expect(await events(b, id)).toHaveLength(count)
      // the read model's recorded workspace is the last snapshot's
      const last = (await snapshotsOf(b, id)).at(-1)
      expect((await b.ports.readModels.session(id))?.workspace?.tree).toBe(last?.tree)
    })

    it('history: the files, a file and the diff at any seq; before the first snapshot, its baseline', async () => {
      const { b, id, created, point } = await twoTurns()
      expect((await b.history.files(id, created)).files.map((f) => f.path)).toEqual(['README.md'])
      expect((await b.history.files(id, point)).files.map((f) => f.path)).toEqual(['README.md', 'a.txt'])
      expect((await b.history.files(id)).files.map((f) => f.path)).toEqual(['a.txt', 'c.txt'])
      expect((await b.history.file(id, 'a.txt', point)).content).toBe('first\n')
      expect((await b.history.file(id, 'a.txt')).content).toBe('second\n')
      const diff = await b.history.diff(id, point, await lastSeq(b, id))
      expect(diff.files.map((f) => [f.path, f.status])).toEqual([
        ['README.md', 'deleted'],
        ['a.txt', 'modified'],
        ['c.txt', 'added'],
      ])
      expect(diff.patch).toContain('-first\n+second\n')
    })

    it('revert and unrevert: the files at the point and back again, the later messages hidden and shown', async () => {
      const { b, id, point, atPoint, atEnd } = await twoTurns()
      const visible = async () => visibleMessages(await b.ports.readModels.view(id)).map((m) => m.id)
      const reverted = await b.restorer.revert(id, point)
      expect(hashTree(b.directory)).toEqual(atPoint)
      expect([...reverted.messages].sort()).toEqual(['msg_twoa', 'msg_twoq'])
      expect((await visible()).sort()).toEqual(['msg_onea', 'msg_oneq'])
      expect((await events(b, id)).slice(-2).map((e) => e.type)).toEqual([
        'workspace.restore.started',
        'workspace.restore.completed',
      ])
      expect((await b.history.file(id, 'a.txt')).content).toBe('first\n')

      const back = await b.restorer.unrevert(id)
      expect(hashTree(b.directory)).toEqual(atEnd)
      expect(back.messages).toEqual(reverted.messages)
      expect((await visible()).sort()).toEqual(['msg_onea', 'msg_oneq', 'msg_twoa', 'msg_twoq'])
      await expect(b.restorer.unrevert(id)).rejects.toMatchObject({ code: 'NOTHING_TO_UNREVERT' })
    })

    it('a file changed outside the agent, recorded by a later step, is not overwritten without force', async () => {
      const { b, id, point } = await twoTurns()
      writeFileSync(join(b.directory, 'c.txt'), 'the user edited this\n')
      // the next step's snapshot records the edit as made outside the agent (read back from the log after the point)
      await turn(b, id, 'three', {})
      const count = (await events(b, id)).length
      await expect(b.restorer.revert(id, point)).rejects.toMatchObject({
        code: 'WORKSPACE_CONFLICT',
        details: { files: ['c.txt'] },
      })
      expect(await events(b, id)).toHaveLength(count)
      await b.restorer.revert(id, point, { force: true })
      expect(existsSync(join(b.directory, 'c.txt'))).toBe(false)
    })

    it('fork with files: the child works in its own directory, written from the fork point', async () => {
      const { b, id, created, baseline, point, atEnd } = await twoTurns()
      const child = await b.forks.fork(id, point, { title: 'before the edit' })
      expect(child.directory).toBe(join(b.forksDir, child.id))
      expect(readFileSync(join(child.directory, 'a.txt'), 'utf8')).toBe('first\n')
      expect((await events(b, child.id)).map((e) => e.type)).toEqual([
        'session.forked',
        'workspace.materialize.started',
        'workspace.materialized',
      ])
      expect(child.workspace?.tree).toBe((await b.history.files(id, point)).tree)
      expect((await b.history.file(child.id, 'a.txt')).content).toBe('first\n')
      expect(hashTree(b.directory)).toEqual(atEnd)
      // before the parent's first snapshot: its baseline
      const early = await b.forks.fork(id, created)
      expect(hashTree(early.directory)).toEqual(baseline)
    })

    it('a long session is read in pages: its first snapshot and the changes outside the agent are still found', async () => {
      const { b, id } = await start()
      const renamed = (n: number): ChronicleEvent => ({ type: 'session.renamed', data: { title: `t${n}` } })
      const many = (n: number) => Array.from({ length: n }, (_, i) => renamed(i))
      await b.ports.log.append(id, many(150), { meta })
      const early = await lastSeq(b, id)
      const baseline = hashTree(b.directory)
      await turn(b, id, 'one', { 'a.txt': 'first\n' })
      const point = await lastSeq(b, id)
      await b.ports.log.append(id, many(1200), { meta })
      writeFileSync(join(b.directory, 'README.md'), '# edited by hand\n')
      await turn(b, id, 'two', {}) // its step records the edit as made outside the agent

      // the first snapshot lies past the first page of events, the edit more than a page past the point
      expect((await b.history.files(id, early)).files.map((f) => f.path)).toEqual(['README.md'])
      const child = await b.forks.fork(id, early)
      expect(hashTree(child.directory)).toEqual(baseline)
      await expect(b.restorer.revert(id, point)).rejects.toMatchObject({
        code: 'WORKSPACE_CONFLICT',
        details: { files: ['README.md'] },
      })
    })

    it('bad input: a clear error, nothing appended', async () => {
      const { b, id } = await start()
      const other = await createSession(b)
      await expect(b.restorer.revert(id, await lastSeq(b, id))).rejects.toMatchObject({
        code: 'NO_WORKSPACE_HISTORY',
      })
      await turn(b, id, 'one', { 'a.txt': 'first\n' })
      const count = (await events(b, id)).length
      await expect(b.restorer.revert(id, 10_000_000)).rejects.toMatchObject({ code: 'SEQ_OUT_OF_RANGE' })
      await expect(b.restorer.revert(id, await lastSeq(b, other))).rejects.toMatchObject({ code: 'SEQ_OUT_OF_RANGE' })
      await expect(b.history.diff(id, await lastSeq(b, other), await lastSeq(b, id))).rejects.toMatchObject({
        code: 'SEQ_OUT_OF_RANGE',
      })
      await expect(b.restorer.revert('ses_missing', 1)).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' })
      await expect(b.history.files(id, 10_000_000)).rejects.toMatchObject({ code: 'SEQ_OUT_OF_RANGE' })
      await expect(b.history.files('ses_missing')).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' })
      await expect(b.history.file(id, '../../etc/passwd')).rejects.toMatchObject({ code: 'NOT_IN_SNAPSHOT' })
      await expect(b.forks.fork(id, await lastSeq(b, id), { directory: 'relative/dir' })).rejects.toMatchObject({
        code: 'BAD_REQUEST',
      })
      await expect(b.forks.fork(id, await lastSeq(b, id), { directory: b.directory })).rejects.toMatchObject({
        code: 'DIRECTORY_NOT_EMPTY',
      })
      expect(await events(b, id)).toHaveLength(count)
    })

    it('a restore and a fork a crash cut off are finished after a restart', async () => {
      const { b, id, store, root, point, atPoint } = await twoTurns()
      const to = (await b.history.files(id, point)).tree as string
      const from = (await b.history.files(id)).tree as string
      // what a kill -9 leaves: the restore recorded as started, the directory half-restored
      const started = { restoreId: 'rst_crash', kind: 'revert' as const, to: point, from, tree: to, messages: [] }
      await b.ports.log.append(id, [{ type: 'workspace.restore.started', data: started }], {
        meta: { actor: 'user', command: 'revert' },
        durability: 'full',
      })
      writeFileSync(join(b.directory, 'a.txt'), 'first\n')
      // and a fork whose directory was never written
      const childId = ids.next('ses')
      const target = join(b.forksDir, childId)
      const parent = await b.ports.timeTravel.viewAt(id, point)
      await appendFork(b.ports, childId, [
        ...decideFork(parent, { sessionId: id, seq: point }, { directory: target }),
        { type: 'workspace.materialize.started', data: { tree: to, directory: target } },
      ])

      const shadow = createShadowStore({ root: join(root, 'workspaces'), globalExcludes: null })
      cleanups.push(() => shadow.close())
      const after = over(await store.restart(), root, shadow)
      expect(await after.restorer.recover()).toBe(1)
      expect(await after.forks.recover()).toBe(1)
      expect(hashTree(after.directory)).toEqual(atPoint)
      expect(hashTree(target)).toEqual(atPoint)
      expect((await events(after, id)).at(-1)).toMatchObject({
        type: 'workspace.restore.completed',
        data: { restoreId: 'rst_crash' },
      })
      expect((await after.ports.readModels.session(id))?.revert?.tree).toBe(to)
      expect((await events(after, childId)).map((e) => e.type)).toEqual([
        'session.forked',
        'workspace.materialize.started',
        'workspace.materialized',
      ])
      expect(await after.restorer.recover()).toBe(0)
      expect(await after.forks.recover()).toBe(0)
    })
  })
}
