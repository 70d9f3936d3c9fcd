import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { DataOf } from '../../src/events/catalogue.js'
import { hashTree, userGit } from './helpers.js'
import { bash, prompt as run, script, type World, world, write } from './world.js'

/**
 * Forks that git understands (docs/TIME-TRAVEL.md "Fork with files"): when
 * the parent's directory is the top level of a repository, the fork's
 * directory is a repository at the commit HEAD named at the fork point,
 * with the snapshot's files as its working tree — `git status`, `git diff`
 * and `git log -1` answer as they did in the parent there — and the user's
 * repository is not written. Real git repositories in temporary directories.
 */

let w: World | undefined
afterEach(async () => {
  await w?.close()
  w = undefined
})

const prompt = (id: string, text: string) => run(w as World, id, text)
const lastSeq = (id: string) => (w as World).events(id).at(-1)?.seq as number
const data = <T extends 'workspace.materialize.started' | 'workspace.materialized' | 'workspace.snapshotted'>(
  id: string,
  type: T,
) =>
  (w as World)
    .events(id)
    .filter((e) => e.type === type)
    .map((e) => e.data as DataOf<T>)

/** What git answers in a directory: the views a coding agent leans on. */
function gitViews(directory: string): Record<string, string> {
  return {
    status: userGit(directory, 'status'),
    porcelain: userGit(directory, 'status', '--porcelain', '--untracked-files=all'),
    diff: userGit(directory, 'diff'),
    log: userGit(directory, 'log', '-1'),
  }
}

function commitAll(directory: string, message: string): string {
  userGit(directory, 'add', '-A')
  userGit(directory, 'commit', '-q', '-m', message)
  return userGit(directory, 'rev-parse', 'HEAD').trim()
}

const edits = () =>
  script({
    first: [write('a.txt', 'a new file\n'), bash("printf '# demo, edited by the agent\\n' > README.md")],
    second: [write('a.txt', 'written after the fork point\n')],
    commit: [bash("git -c user.name=Agent -c user.email=agent@example.com commit -q -a -m 'the agent commits'")],
  })

describe('a fork of a session whose directory is a repository', () => {
  it('answers git status, git diff and git log -1 as the parent did at the fork point; the user repository is untouched', async () => {
    w = world(edits())
    const first = commitAll(w.directory, 'first commit')
    const branch = userGit(w.directory, 'symbolic-ref', '--short', 'HEAD').trim()
    const parent = w.session()
    await prompt(parent, 'first')
    const point = lastSeq(parent)
    const atPoint = gitViews(w.directory)
    // after the fork point: the user commits (HEAD moves, no file changes) and the agent writes on
    const second = commitAll(w.directory, 'second commit')
    await prompt(parent, 'second')
    const userRepository = hashTree(join(w.directory, '.git'))

    const child = await w.forks.fork(parent, point)

    expect(hashTree(join(w.directory, '.git'))).toEqual(userRepository)
    expect(gitViews(child.directory)).toEqual(atPoint)
    expect(atPoint.porcelain).toBe(' M README.md\n?? a.txt\n')
    expect(data(child.id, 'workspace.materialize.started')[0]?.git).toEqual({ commit: first, branch })
    expect(data(child.id, 'workspace.materialized')[0]?.git).toEqual({ commit: first, branch })
    expect(child.workspace?.git).toEqual({ commit: first, branch })
    // the commit after the fork point moved HEAD without changing a file: recorded at the parent's next step
    expect(data(parent, 'workspace.snapshotted').map((d) => [d.reason, d.changed.length, d.git?.commit])).toEqual([
      ['step', 0, first],
      ['tool', 1, first],
      ['tool', 1, first],
      ['step', 0, second],
      ['tool', 1, second],
    ])
    // the fork's own git works on: it commits into its own store, the user's stays as it was
    commitAll(child.directory, 'in the fork')
    expect(userGit(child.directory, 'log', '--format=%s').split('\n').slice(0, 2)).toEqual([
      'in the fork',
      'first commit',
    ])
    expect(hashTree(join(w.directory, '.git'))).toEqual(userRepository)
    expect(readFileSync(join(child.directory, '.git', 'objects', 'info', 'alternates'), 'utf8')).toBe(
      `${join(w.directory, '.git', 'objects')}\n`,
    )
  })

  it("a commit the agent makes is the fork's HEAD from there on, with a clean status", async () => {
    w = world(edits())
    commitAll(w.directory, 'first commit')
    const parent = w.session()
    await prompt(parent, 'first')
    await prompt(parent, 'commit')
    const point = lastSeq(parent)
    const atPoint = gitViews(w.directory)
    expect(atPoint.log).toContain('the agent commits')
    const child = await w.forks.fork(parent, point)
    expect(gitViews(child.directory)).toEqual(atPoint)
  })

  it('a repository with no commit yet: the fork is one too, on the same unborn branch', async () => {
    w = world(edits())
    const parent = w.session()
    await prompt(parent, 'first')
    const child = await w.forks.fork(parent, lastSeq(parent))
    const views = (directory: string) => ({
      status: userGit(directory, 'status'),
      porcelain: userGit(directory, 'status', '--porcelain', '--untracked-files=all'),
    })
    expect(views(child.directory)).toEqual(views(w.directory))
    expect(views(child.directory).status).toContain('No commits yet')
    expect(child.workspace?.git).toEqual({ branch: userGit(w.directory, 'symbolic-ref', '--short', 'HEAD').trim() })
  })

  it("what the parent's info/exclude ignores is ignored in the fork as well", async () => {
    w = world(script({ first: [write('notes.local', 'mine\n'), write('a.txt', 'a\n')] }))
    commitAll(w.directory, 'first commit')
    writeFileSync(join(w.directory, '.git', 'info', 'exclude'), '*.local\n')
    const parent = w.session()
    await prompt(parent, 'first')
    const point = lastSeq(parent)
    const child = await w.forks.fork(parent, point)
    // not recorded, so not in the fork; made there again, it is still ignored
    writeFileSync(join(child.directory, 'notes.local'), 'again\n')
    expect(userGit(child.directory, 'status', '--porcelain')).toBe('?? a.txt\n')
  })

  it('a linked worktree (git worktree add) of the user: the fork borrows the main repository objects', async () => {
    w = world(edits())
    commitAll(w.directory, 'first commit')
    const linked = join(w.directory, '..', 'linked')
    userGit(w.directory, 'worktree', 'add', '-q', '-b', 'topic', linked)
    const parent = w.session(linked)
    await prompt(parent, 'first')
    const point = lastSeq(parent)
    const atPoint = gitViews(linked)
    const userRepository = hashTree(join(w.directory, '.git'))
    const child = await w.forks.fork(parent, point)
    expect(child.workspace?.git?.branch).toBe('topic')
    expect(gitViews(child.directory)).toEqual(atPoint)
    expect(hashTree(join(w.directory, '.git'))).toEqual(userRepository)
  })

  it('a fork of a fork is a repository at what HEAD named in the first fork, commits made there included', async () => {
    w = world(edits())
    commitAll(w.directory, 'first commit')
    const parent = w.session()
    await prompt(parent, 'first')
    const child = await w.forks.fork(parent, lastSeq(parent))
    await prompt(child.id, 'commit')
    const atPoint = gitViews(child.directory)
    expect(atPoint.log).toContain('the agent commits')
    const grandchild = await w.forks.fork(child.id, lastSeq(child.id))
    expect(gitViews(grandchild.directory)).toEqual(atPoint)
    // the first fork's own objects (its commit) are copied: its .git lies in the data dir, which the
    // grandchild's sandbox hides; what it borrowed is borrowed from the user's repository directly
    expect(readFileSync(join(grandchild.directory, '.git', 'objects', 'info', 'alternates'), 'utf8')).toBe(
      `${join(w.directory, '.git', 'objects')}\n`,
    )
  })

  it("a fork's agent that points its .git at another fork's objects gets a plain directory in its own fork", async () => {
    w = world(edits())
    commitAll(w.directory, 'first commit')
    const parent = w.session()
    await prompt(parent, 'first')
    const victim = await w.forks.fork(parent, lastSeq(parent))
    await prompt(victim.id, 'commit') // objects only the victim's fork holds
    const attacker = await w.forks.fork(parent, lastSeq(parent))
    writeFileSync(
      join(attacker.directory, '.git', 'objects', 'info', 'alternates'),
      `${join(victim.directory, '.git', 'objects')}\n`,
    )
    await prompt(attacker.id, 'second')
    const child = await w.forks.fork(attacker.id, lastSeq(attacker.id))
    expect(existsSync(join(child.directory, '.git'))).toBe(false)
    expect(data(child.id, 'workspace.materialized')[0]).not.toHaveProperty('git')
  })
})

describe('forks that stay plain directories', () => {
  it('a parent directory that is not in a repository gives a plain directory, as before', async () => {
    w = world(edits(), { repository: false })
    const parent = w.session()
    await prompt(parent, 'first')
    const child = await w.forks.fork(parent, lastSeq(parent))
    expect(existsSync(join(child.directory, '.git'))).toBe(false)
    expect(readFileSync(join(child.directory, 'a.txt'), 'utf8')).toBe('a new file\n')
    expect(data(parent, 'workspace.snapshotted').map((d) => d.git)).toEqual([undefined, undefined, undefined])
    expect(data(child.id, 'workspace.materialize.started')[0]).not.toHaveProperty('git')
    expect(data(child.id, 'workspace.materialized')[0]).not.toHaveProperty('git')
  })

  it("a session in a repository's subdirectory records no HEAD: its fork is a plain directory", async () => {
    w = world(edits())
    commitAll(w.directory, 'first commit')
    const sub = join(w.directory, 'pkg')
    mkdirSync(sub)
    const parent = w.session(sub)
    await prompt(parent, 'first')
    const child = await w.forks.fork(parent, lastSeq(parent))
    expect(data(parent, 'workspace.snapshotted').every((d) => d.git === undefined)).toBe(true)
    expect(existsSync(join(child.directory, '.git'))).toBe(false)
  })

  it('events recorded before HEAD was (no git field) still fork, into a plain directory', async () => {
    w = world(edits())
    commitAll(w.directory, 'first commit')
    const parent = w.session()
    await prompt(parent, 'first')
    const tree = data(parent, 'workspace.snapshotted').at(-1)?.tree as string
    const old = w.session()
    w.store.append(old, [{ type: 'workspace.snapshotted', data: { tree, reason: 'step', changed: [] } }], {
      meta: { actor: 'runtime' },
    })
    const child = await w.forks.fork(old, lastSeq(old))
    expect(readFileSync(join(child.directory, 'a.txt'), 'utf8')).toBe('a new file\n')
    expect(existsSync(join(child.directory, '.git'))).toBe(false)
  })

  it('a repository whose objects lie in the data dir is not borrowed from: the fork is plain', async () => {
    w = world(edits())
    commitAll(w.directory, 'first commit')
    const parent = w.session()
    await prompt(parent, 'first')
    // the repository borrows its objects from a place the fork's sandbox hides (here: the data dir)
    const hiddenObjects = join(w.dataDir, 'secret-objects')
    mkdirSync(hiddenObjects, { recursive: true })
    writeFileSync(join(w.directory, '.git', 'objects', 'info', 'alternates'), `${hiddenObjects}\n`)
    const child = await w.forks.fork(parent, lastSeq(parent))
    expect(existsSync(join(child.directory, '.git'))).toBe(false)
    expect(data(child.id, 'workspace.materialize.started')[0]?.git).toBeDefined()
    expect(data(child.id, 'workspace.materialized')[0]).not.toHaveProperty('git')
  })
})

describe('a hostile workspace runs nothing', () => {
  /** Runs `git status` where a trap is set, as the user would (whatever it answers; never for long). */
  const springs = (cwd: string) =>
    spawnSync('git', ['status'], { cwd, env: { PATH: process.env.PATH ?? '', HOME: cwd }, timeout: 20_000 })

  /** A script that records that it ran: the attack succeeded if the marker exists. */
  function trap(dir: string, marker: string): string {
    const path = join(dir, 'trap.sh')
    writeFileSync(path, `#!/bin/sh\necho "$0 $*" >> ${marker}\nexit 0\n`)
    chmodSync(path, 0o755)
    return path
  }

  it('hooks, core.hooksPath, core.fsmonitor, filters, a pager: none runs while the session is recorded and forked', async () => {
    w = world(edits())
    writeFileSync(join(w.directory, '.gitattributes'), '* filter=evil diff=evil\n')
    commitAll(w.directory, 'first commit')
    const marker = join(w.dataDir, '..', 'attack-ran')
    const script_ = trap(join(w.dataDir, '..'), marker)
    const hooks = join(w.directory, '.git', 'hooks')
    mkdirSync(hooks, { recursive: true })
    for (const hook of ['post-checkout', 'post-index-change', 'reference-transaction', 'pre-commit', 'post-merge'])
      writeFileSync(join(hooks, hook), readFileSync(script_)), chmodSync(join(hooks, hook), 0o755)
    const config = join(w.directory, '.git', 'config')
    writeFileSync(
      config,
      `${readFileSync(config, 'utf8')}[core]\n\tfsmonitor = ${script_}\n\thooksPath = ${hooks}\n\tpager = ${script_}\n` +
        `\tsshCommand = ${script_}\n[filter "evil"]\n\tclean = ${script_}\n\tsmudge = ${script_}\n\tprocess = ${script_}\n` +
        `[diff "evil"]\n\ttextconv = ${script_}\n\tcommand = ${script_}\n[uploadpack]\n\tpackObjectsHook = ${script_}\n`,
    )
    const parent = w.session()
    await prompt(parent, 'first')
    const userRepository = hashTree(join(w.directory, '.git'))
    const child = await w.forks.fork(parent, lastSeq(parent))
    await w.forks.recover()

    expect(existsSync(marker)).toBe(false)
    expect(hashTree(join(w.directory, '.git'))).toEqual(userRepository)
    // the fork's repository is the server's own making: none of that config came along
    expect(readFileSync(join(child.directory, '.git', 'config'), 'utf8')).not.toContain(script_)
    expect(existsSync(join(child.directory, '.git', 'hooks'))).toBe(false)
    expect(userGit(child.directory, 'status', '--porcelain')).toBe(' M README.md\n?? a.txt\n')
    expect(existsSync(marker)).toBe(false)
    // the trap is armed: git run in the user's repository would have sprung it
    springs(w.directory)
    expect(existsSync(marker)).toBe(true)
  })

  it("a fork's agent plants config and hooks in its .git: a fork of that fork runs none of it", async () => {
    w = world(edits())
    commitAll(w.directory, 'first commit')
    const parent = w.session()
    await prompt(parent, 'first')
    const child = await w.forks.fork(parent, lastSeq(parent))
    const marker = join(w.dataDir, '..', 'attack-ran')
    const script_ = trap(join(w.dataDir, '..'), marker)
    const dotGit = join(child.directory, '.git')
    writeFileSync(
      join(dotGit, 'config'),
      `${readFileSync(join(dotGit, 'config'), 'utf8')}[core]\n\tfsmonitor = ${script_}\n\thooksPath = ${dotGit}\n`,
    )
    writeFileSync(join(dotGit, 'post-checkout'), readFileSync(script_))
    chmodSync(join(dotGit, 'post-checkout'), 0o755)
    await prompt(child.id, 'second')
    const grandchild = await w.forks.fork(child.id, lastSeq(child.id))
    expect(existsSync(marker)).toBe(false)
    expect(userGit(grandchild.directory, 'log', '-1', '--format=%s')).toBe('first commit\n')
    // the trap is armed: git run in the first fork would have sprung it
    springs(child.directory)
    expect(existsSync(marker)).toBe(true)
  })

  it('a .git file pointing at another repository is not followed: no HEAD recorded, the fork is plain', async () => {
    w = world(edits(), { repository: false })
    const other = join(w.dataDir, '..', 'other')
    mkdirSync(other)
    userGit(other, 'init', '-q')
    writeFileSync(join(other, 'private.txt'), 'not the session’s\n')
    commitAll(other, 'private history')
    const otherRepository = hashTree(join(other, '.git'))
    writeFileSync(join(w.directory, '.git'), `gitdir: ${join(other, '.git')}\n`)
    const parent = w.session()
    await prompt(parent, 'first')
    const child = await w.forks.fork(parent, lastSeq(parent))
    expect(data(parent, 'workspace.snapshotted').every((d) => d.git === undefined)).toBe(true)
    expect(existsSync(join(child.directory, '.git'))).toBe(false)
    expect(hashTree(join(other, '.git'))).toEqual(otherRepository)
  })
})

describe('crash safety', () => {
  it('a fork cut off before its directory was written is made a repository on restart', async () => {
    w = world(edits())
    const commit = commitAll(w.directory, 'first commit')
    const parent = w.session()
    await prompt(parent, 'first')
    const point = lastSeq(parent)
    const atPoint = gitViews(w.directory)
    const snapshot = data(parent, 'workspace.snapshotted').at(-1) as DataOf<'workspace.snapshotted'>
    const id = 'ses_crashed'
    const directory = join(w.dataDir, 'forks', id)
    w.store.append(
      id,
      [
        { type: 'session.forked', data: { from: { sessionId: parent, seq: point }, directory } },
        { type: 'workspace.materialize.started', data: { tree: snapshot.tree, directory, git: snapshot.git } },
      ],
      { meta: { actor: 'user', command: 'fork' }, durability: 'full' },
    )
    expect(await w.forks.recover()).toBe(1)
    expect(gitViews(directory)).toEqual(atPoint)
    expect(data(id, 'workspace.materialized')[0]?.git?.commit).toBe(commit)
  })
})
