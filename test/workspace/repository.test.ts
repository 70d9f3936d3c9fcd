import { execFileSync } from 'node:child_process'
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import {
  findRepository,
  isBranchRef,
  objectDirectories,
  readRepositoryFile,
} from '../../src/runtime/workspace/repository.js'
import { tempDir, userGit } from './helpers.js'

/**
 * Reading a workspace's repository from its files (src/runtime/workspace/repository.ts):
 * the workspace is hostile, so anything unusual reads as "no repository" —
 * and git is never run there.
 */

let cleanups: (() => void)[] = []
afterEach(() => {
  for (const cleanup of cleanups) cleanup()
  cleanups = []
})

function temp(): string {
  const { dir, cleanup } = tempDir('repo')
  cleanups.push(cleanup)
  return dir
}

function repository(): { dir: string; commit: string; branch: string } {
  const dir = join(temp(), 'repo')
  mkdirSync(dir)
  userGit(dir, 'init', '-q', '-b', 'main')
  writeFileSync(join(dir, 'a.txt'), 'a\n')
  userGit(dir, 'add', '-A')
  userGit(dir, 'commit', '-q', '-m', 'one')
  return { dir, commit: userGit(dir, 'rev-parse', 'HEAD').trim(), branch: 'main' }
}

const HEAD = (dir: string, content: string) => writeFileSync(join(dir, '.git', 'HEAD'), content)

describe('findRepository', () => {
  it('reads the branch and its commit from a loose ref, then from packed-refs once the refs are packed', async () => {
    const { dir, commit } = repository()
    expect((await findRepository(dir))?.head).toEqual({ commit, branch: 'main' })
    userGit(dir, 'pack-refs', '--all')
    expect((await findRepository(dir))?.head).toEqual({ commit, branch: 'main' })
    userGit(dir, 'checkout', '-q', '-b', 'feature/x')
    expect((await findRepository(dir))?.head).toEqual({ commit, branch: 'feature/x' })
  })

  it('a detached HEAD is its commit; a branch with no commit yet is the branch alone', async () => {
    const { dir, commit } = repository()
    userGit(dir, 'checkout', '-q', '--detach')
    expect((await findRepository(dir))?.head).toEqual({ commit })
    const fresh = join(temp(), 'fresh')
    mkdirSync(fresh)
    userGit(fresh, 'init', '-q', '-b', 'trunk')
    expect((await findRepository(fresh))?.head).toEqual({ branch: 'trunk' })
  })

  it('a sha256 repository reads its 64-digit ids', async () => {
    const dir = join(temp(), 'sha256')
    mkdirSync(dir)
    userGit(dir, 'init', '-q', '--object-format=sha256')
    userGit(dir, 'commit', '-q', '--allow-empty', '-m', 'one')
    const head = (await findRepository(dir))?.head
    expect(head?.commit).toMatch(/^[0-9a-f]{64}$/)
  })

  it('is none for a directory below the top level, and for no repository at all', async () => {
    const { dir } = repository()
    mkdirSync(join(dir, 'sub'))
    expect(await findRepository(join(dir, 'sub'))).toBeUndefined()
    expect(await findRepository(temp())).toBeUndefined()
  })

  it.each([
    ['a ref that climbs out of the repository', 'ref: refs/heads/../../../../etc/passwd\n'],
    ['a ref outside refs/heads', 'ref: refs/remotes/origin/main\n'],
    ['a ref with a .lock component', 'ref: refs/heads/x.lock\n'],
    ['a ref with a control character', 'ref: refs/heads/a\u0001b\n'],
    ['a reftable repository', 'ref: refs/heads/.invalid\n'],
    ['something that is not an id', 'not-a-commit\n'],
    ['an abbreviated id', 'abc123\n'],
  ])('is none for a HEAD naming %s', async (_, content) => {
    const { dir } = repository()
    HEAD(dir, content)
    expect(await findRepository(dir)).toBeUndefined()
  })

  it('does not follow a HEAD, a ref or a .git that is a symlink', async () => {
    const { dir, commit } = repository()
    const other = repository()
    const outside = join(temp(), 'HEAD')
    writeFileSync(outside, `${commit}\n`)
    const linkedHead = repository()
    execFileSync('rm', [join(linkedHead.dir, '.git', 'HEAD')])
    symlinkSync(outside, join(linkedHead.dir, '.git', 'HEAD'))
    expect(await findRepository(linkedHead.dir)).toBeUndefined()

    execFileSync('rm', [join(dir, '.git', 'refs', 'heads', 'main')])
    symlinkSync(join(other.dir, '.git', 'refs', 'heads', 'main'), join(dir, '.git', 'refs', 'heads', 'main'))
    expect(await findRepository(dir)).toBeUndefined()

    const link = join(temp(), 'link')
    mkdirSync(link)
    symlinkSync(join(other.dir, '.git'), join(link, '.git'))
    expect(await findRepository(link)).toBeUndefined()
  })

  it('a HEAD that is a FIFO or a huge file does not stall or fill the server: none', async () => {
    const { dir } = repository()
    execFileSync('rm', [join(dir, '.git', 'HEAD')])
    execFileSync('mkfifo', [join(dir, '.git', 'HEAD')])
    const started = Date.now()
    expect(await findRepository(dir)).toBeUndefined()
    expect(Date.now() - started).toBeLessThan(2000)
    execFileSync('rm', [join(dir, '.git', 'HEAD')])
    HEAD(dir, `ref: refs/heads/main\n${'x'.repeat(1024 * 1024)}`)
    expect(await findRepository(dir)).toBeUndefined()
  })

  it('follows a .git file only to a linked worktree that names it back', async () => {
    const { dir, commit } = repository()
    const linked = join(temp(), 'linked')
    userGit(dir, 'worktree', 'add', '-q', '-b', 'topic', linked)
    const found = await findRepository(linked)
    expect(found?.head).toEqual({ commit, branch: 'topic' })
    expect(found?.objects).toBe(join(dir, '.git', 'objects'))

    // a workspace claiming that worktree (or any repository) from elsewhere is not it
    const claimer = join(temp(), 'claimer')
    mkdirSync(claimer)
    writeFileSync(join(claimer, '.git'), `gitdir: ${join(dir, '.git', 'worktrees', 'linked')}\n`)
    expect(await findRepository(claimer)).toBeUndefined()
    writeFileSync(join(claimer, '.git'), `gitdir: ${join(dir, '.git')}\n`)
    expect(await findRepository(claimer)).toBeUndefined()
  })
})

describe('objectDirectories', () => {
  const hiddenIn = (dir: string) => (real: string) => real === dir || real.startsWith(`${dir}/`)

  it('is the objects directory and every directory it borrows from, followed as git does', async () => {
    const { dir } = repository()
    const lender = repository()
    const objects = join(dir, '.git', 'objects')
    writeFileSync(join(objects, 'info', 'alternates'), `# a comment\n${join(lender.dir, '.git', 'objects')}\n`)
    expect(await objectDirectories(objects, () => false)).toEqual([objects, join(lender.dir, '.git', 'objects')])
  })

  it('is none when any of them lies, or is reached through a chain or a symlink, in a hidden place', async () => {
    const { dir } = repository()
    const objects = join(dir, '.git', 'objects')
    const hidden = temp()
    const hiddenObjects = join(hidden, 'objects')
    mkdirSync(hiddenObjects)
    writeFileSync(join(objects, 'info', 'alternates'), `${hiddenObjects}\n`)
    expect(await objectDirectories(objects, hiddenIn(hidden))).toBeUndefined()

    const middle = repository()
    const middleObjects = join(middle.dir, '.git', 'objects')
    writeFileSync(join(middleObjects, 'info', 'alternates'), `${hiddenObjects}\n`)
    writeFileSync(join(objects, 'info', 'alternates'), `${middleObjects}\n`)
    expect(await objectDirectories(objects, hiddenIn(hidden))).toBeUndefined()

    const link = join(temp(), 'innocent')
    symlinkSync(hiddenObjects, link)
    writeFileSync(join(objects, 'info', 'alternates'), `${link}\n`)
    expect(await objectDirectories(objects, hiddenIn(hidden))).toBeUndefined()

    writeFileSync(join(objects, 'info', 'alternates'), '"quoted\\npath"\n')
    expect(await objectDirectories(objects, () => false)).toBeUndefined()
  })
})

describe('the rules', () => {
  it.each([
    ['refs/heads/main', true],
    ['refs/heads/feature/x-1', true],
    ['refs/heads/a..b', false],
    ['refs/heads/.hidden', false],
    ['refs/heads/x/', false],
    ['refs/heads/x.', false],
    ['refs/heads/x@{1}', false],
    ['refs/heads/a b', false],
    ['refs/heads/a:b', false],
    ['refs/heads/@', false],
    ['refs/tags/v1', false],
  ])('%s is a branch ref: %s', (ref, ok) => {
    expect(isBranchRef(ref)).toBe(ok)
  })

  it('reads a repository file only when it is a small regular file', async () => {
    const dir = temp()
    writeFileSync(join(dir, 'small'), 'ok')
    expect((await readRepositoryFile(join(dir, 'small'), 10))?.toString()).toBe('ok')
    expect(await readRepositoryFile(join(dir, 'absent'), 10)).toBeUndefined()
    await expect(readRepositoryFile(join(dir, 'small'), 1)).rejects.toThrow()
    await expect(readRepositoryFile(dir, 10)).rejects.toThrow()
  })
})
