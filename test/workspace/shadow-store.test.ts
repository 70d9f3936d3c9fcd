import { execFileSync } from 'node:child_process'
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { isChronicleError } from '../../src/events/errors.js'
import { findGlobalExcludes } from '../../src/runtime/workspace/excludes.js'
import { createShadowStore, EMPTY_TREE, type ShadowStore } from '../../src/runtime/workspace/shadow-store.js'
import { blobId, hashTree, noise, tempDir, userGit, writeFiles } from './helpers.js'

let base: { dir: string; cleanup: () => void }
let root: string
let work: string
let shadow: ShadowStore

beforeEach(() => {
  base = tempDir('store')
  root = join(base.dir, 'data', 'workspaces')
  work = join(base.dir, 'work')
  mkdirSync(work)
  shadow = createShadowStore({ root, globalExcludes: null, maxFileBytes: 64 * 1024 })
})

afterEach(() => {
  shadow.close()
  base.cleanup()
})

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection')
    },
    (err: unknown) => err,
  )
}

async function expectCode(promise: Promise<unknown>, code: string): Promise<void> {
  const err = await rejection(promise)
  expect(isChronicleError(err) ? err.code : err).toBe(code)
}

describe('snapshot', () => {
  it('lists every file of a fresh directory as added, with its line counts', async () => {
    writeFiles(work, { 'a.txt': 'one\ntwo\n', 'src/b.ts': 'export {}\n', 'src/deep/c.md': '# c\n\ntext\n' })
    const snap = await shadow.snapshot(work)
    expect(snap.previous).toBe(EMPTY_TREE)
    expect(snap.changed).toEqual([
      { path: 'a.txt', status: 'added', added: 2, removed: 0 },
      { path: 'src/b.ts', status: 'added', added: 1, removed: 0 },
      { path: 'src/deep/c.md', status: 'added', added: 3, removed: 0 },
    ])
    expect(snap.large).toEqual([])
    expect(await shadow.list(snap.tree)).toEqual([
      { path: 'a.txt', size: 8, mode: '100644', type: 'file' },
      { path: 'src/b.ts', size: 10, mode: '100644', type: 'file' },
      { path: 'src/deep/c.md', size: 10, mode: '100644', type: 'file' },
    ])
  })

  it('lists exactly the one file an edit changed, then a delete, and nothing when nothing changed', async () => {
    writeFiles(work, { 'a.txt': 'one\ntwo\nthree\n', 'b.txt': 'b\n', 'c.txt': 'c\n' })
    const first = await shadow.snapshot(work)
    writeFiles(work, { 'a.txt': 'one\n2\nthree\nfour\n' })
    const edited = await shadow.snapshot(work)
    expect(edited.previous).toBe(first.tree)
    expect(edited.changed).toEqual([{ path: 'a.txt', status: 'modified', added: 2, removed: 1 }])
    unlinkSync(join(work, 'b.txt'))
    const deleted = await shadow.snapshot(work)
    expect(deleted.changed).toEqual([{ path: 'b.txt', status: 'deleted', added: 0, removed: 1 }])
    const same = await shadow.snapshot(work)
    expect(same).toEqual({ tree: deleted.tree, previous: deleted.tree, changed: [], large: [] })
  })

  it('marks a binary file as binary, with no line counts', async () => {
    writeFiles(work, { 'img.bin': Buffer.from([0x89, 0x50, 0x00, 0x01, 0x02]) })
    const snap = await shadow.snapshot(work)
    expect(snap.changed).toEqual([{ path: 'img.bin', status: 'added', binary: true }])
    expect(await shadow.read(snap.tree, 'img.bin')).toEqual({
      content: Buffer.from([0x89, 0x50, 0x00, 0x01, 0x02]),
      binary: true,
      type: 'file',
    })
  })

  it('records an empty directory as the empty tree', async () => {
    expect(await shadow.snapshot(work)).toEqual({ tree: EMPTY_TREE, previous: EMPTY_TREE, changed: [], large: [] })
    expect(await shadow.list(EMPTY_TREE)).toEqual([])
  })

  it('honours .gitignore files: an ignored file never appears, not even in list', async () => {
    writeFiles(work, {
      '.gitignore': 'build/\n*.log\n',
      'src/.gitignore': 'secret.txt\n',
      'src/main.ts': 'main\n',
      'src/secret.txt': 'hidden\n',
      'build/out.js': 'out\n',
      'debug.log': 'log\n',
    })
    const first = await shadow.snapshot(work)
    writeFiles(work, { 'build/more.js': 'more\n', 'other.log': 'x\n', 'src/secret.txt': 'changed\n' })
    const second = await shadow.snapshot(work)
    expect(first.changed.map((c) => c.path)).toEqual(['.gitignore', 'src/.gitignore', 'src/main.ts'])
    expect(second).toEqual({ tree: first.tree, previous: first.tree, changed: [], large: [] })
    expect((await shadow.list(second.tree)).map((e) => e.path)).toEqual(['.gitignore', 'src/.gitignore', 'src/main.ts'])
  })

  it("never records the server's data dir or the store itself, even when a workspace contains them", async () => {
    const dataDir = join(work, '.chronicle data [1]')
    const inside = createShadowStore({ root: join(dataDir, 'workspaces'), globalExcludes: null, exclude: [dataDir] })
    writeFiles(work, { 'a.txt': 'a\n', '.chronicle data [1]/token': 'secret\n', '.chronicle data [1]x/kept': 'k\n' })
    const first = await inside.snapshot(work)
    writeFiles(work, { '.chronicle data [1]/chronicle.db': 'db\n' })
    const second = await inside.snapshot(work)
    expect((await inside.list(first.tree)).map((e) => e.path)).toEqual(['.chronicle data [1]x/kept', 'a.txt'])
    expect(second.changed).toEqual([])
  })

  it("honours the user's global excludes and the repository's .git/info/exclude", async () => {
    const excludes = join(base.dir, 'global-ignore')
    writeFileSync(excludes, '*.swp\n')
    const store = createShadowStore({ root, globalExcludes: excludes })
    userGit(work, 'init', '-q')
    writeFileSync(join(work, '.git', 'info', 'exclude'), 'local-only/\n')
    writeFiles(work, { 'a.txt': 'a\n', '.a.txt.swp': 'swap\n', 'local-only/notes': 'n\n' })
    const snap = await store.snapshot(work)
    expect(snap.changed.map((c) => c.path)).toEqual(['a.txt'])
  })

  it('stores symlinks as symlinks, never following them out of the directory', async () => {
    const outside = join(base.dir, 'outside')
    writeFiles(outside, { 'secret.txt': 'outside\n' })
    writeFiles(work, { 'a.txt': 'a\n' })
    symlinkSync('a.txt', join(work, 'link'))
    symlinkSync(outside, join(work, 'out'))
    const snap = await shadow.snapshot(work)
    expect(await shadow.list(snap.tree)).toEqual([
      { path: 'a.txt', size: 2, mode: '100644', type: 'file' },
      { path: 'link', size: 5, mode: '120000', type: 'symlink' },
      { path: 'out', size: outside.length, mode: '120000', type: 'symlink' },
    ])
    expect(await shadow.read(snap.tree, 'link')).toEqual({
      content: Buffer.from('a.txt'),
      binary: false,
      type: 'symlink',
    })
  })

  it('follows a file becoming a directory and a directory becoming a symlink', async () => {
    writeFiles(work, { a: 'file\n', 'd/x.txt': 'x\n', 'real/x.txt': 'x\n' })
    const first = await shadow.snapshot(work)
    rmSync(join(work, 'a'))
    writeFiles(work, { 'a/inner.txt': 'inner\n' })
    rmSync(join(work, 'd'), { recursive: true })
    symlinkSync('real', join(work, 'd'))
    const second = await shadow.snapshot(work)
    expect(second.previous).toBe(first.tree)
    expect(second.changed).toEqual([
      { path: 'a', status: 'deleted', added: 0, removed: 1 },
      { path: 'a/inner.txt', status: 'added', added: 1, removed: 0 },
      { path: 'd', status: 'added', added: 1, removed: 0 },
      { path: 'd/x.txt', status: 'deleted', added: 0, removed: 1 },
    ])
    expect((await shadow.list(second.tree)).map((e) => `${e.path}:${e.type}`)).toEqual([
      'a/inner.txt:file',
      'd:symlink',
      'real/x.txt:file',
    ])
  })

  it('keeps paths with spaces, tabs, newlines, quotes and Unicode intact', async () => {
    const names = ['with space.txt', 'tab\there.txt', 'new\nline.txt', 'quote"s.txt', 'ünïcödé/日本語.md', '-dash.txt']
    writeFiles(work, Object.fromEntries(names.map((name, i) => [name, `${i}\n`])))
    const snap = await shadow.snapshot(work)
    const sorted = [...names].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
    expect(snap.changed).toEqual(sorted.map((path) => ({ path, status: 'added', added: 1, removed: 0 })))
    expect((await shadow.list(snap.tree)).map((e) => e.path)).toEqual(sorted)
    for (const [i, name] of names.entries())
      expect((await shadow.read(snap.tree, name)).content.toString()).toBe(`${i}\n`)
    writeFiles(work, { 'new\nline.txt': 'changed\n' })
    const next = await shadow.snapshot(work)
    expect(next.changed).toEqual([{ path: 'new\nline.txt', status: 'modified', added: 1, removed: 1 }])
  })

  it("leaves the user's own .git byte-identical through snapshots, restore and materialize", async () => {
    userGit(work, 'init', '-q')
    writeFiles(work, { 'a.txt': 'a\n', 'b.txt': 'b\n' })
    userGit(work, 'add', '-A')
    userGit(work, 'commit', '-qm', 'first')
    writeFiles(work, { 'a.txt': 'a2\n', 'c.txt': 'c\n' }) // uncommitted changes: the user's index is stale
    const gitBefore = hashTree(join(work, '.git'))
    const first = await shadow.snapshot(work)
    writeFiles(work, { 'b.txt': 'b2\n' })
    await shadow.snapshot(work)
    await shadow.restore(work, first.tree)
    await shadow.materialize(first.tree, join(base.dir, 'copy'))
    expect(hashTree(join(work, '.git'))).toEqual(gitBefore)
    expect((await shadow.list(first.tree)).map((e) => e.path)).toEqual(['a.txt', 'b.txt', 'c.txt'])
    expect(userGit(work, 'status', '--porcelain')).toBe(' M a.txt\n?? c.txt\n')
  })

  it('records a nested repository as a gitlink without recursing, and leaves one with no commit out', async () => {
    writeFiles(work, { 'top.txt': 'top\n', 'lib/inner.txt': 'inner\n', 'fresh/x.txt': 'x\n' })
    userGit(join(work, 'lib'), 'init', '-q')
    userGit(join(work, 'lib'), 'add', '-A')
    userGit(join(work, 'lib'), 'commit', '-qm', 'lib')
    userGit(join(work, 'fresh'), 'init', '-q')
    const head = userGit(join(work, 'lib'), 'rev-parse', 'HEAD').trim()
    const nestedBefore = hashTree(join(work, 'lib', '.git'))
    const first = await shadow.snapshot(work)
    expect(await shadow.list(first.tree)).toEqual([
      { path: 'lib', size: 0, mode: '160000', type: 'gitlink' },
      { path: 'top.txt', size: 4, mode: '100644', type: 'file' },
    ])
    writeFiles(work, { 'lib/inner.txt': 'dirty\n' }) // uncommitted work in the nested repository changes nothing here
    expect((await shadow.snapshot(work)).changed).toEqual([])
    expect(hashTree(join(work, 'lib', '.git'))).toEqual(nestedBefore)
    userGit(join(work, 'lib'), 'commit', '-qam', 'more')
    const moved = await shadow.snapshot(work)
    expect(moved.changed).toEqual([{ path: 'lib', status: 'modified', added: 1, removed: 1 }])
    expect((await shadow.diff(first.tree, moved.tree)).patch).toContain(`-Subproject commit ${head}\n`)
    userGit(join(work, 'fresh'), 'add', '-A')
    userGit(join(work, 'fresh'), 'commit', '-qm', 'fresh')
    const committed = await shadow.snapshot(work)
    expect(committed.changed.map((c) => c.path)).toEqual(['fresh'])
    // restoring a tree with the repository at its old commit leaves the repository as it is: its files are its own
    const nestedNow = hashTree(join(work, 'lib'))
    const restored = await shadow.restore(work, first.tree)
    expect(restored.changed.map((c) => `${c.status} ${c.path}`)).toEqual(['deleted fresh', 'modified lib'])
    expect(hashTree(join(work, 'lib'))).toEqual(nestedNow)
    expect(readFileSync(join(work, 'fresh', 'x.txt'), 'utf8')).toBe('x\n')
  })

  it('lists a file over the cap as large without storing it, and stores it once it shrinks', async () => {
    writeFiles(work, { 'small.txt': 'small\n' })
    await shadow.snapshot(work)
    const before = await shadow.bytesOnDisk()
    writeFiles(work, { 'data/big.bin': noise(256 * 1024) })
    const big = await shadow.snapshot(work)
    expect(big.changed).toEqual([])
    expect(big.large).toEqual([{ path: 'data/big.bin', size: 256 * 1024 }])
    expect((await shadow.list(big.tree)).map((e) => e.path)).toEqual(['small.txt'])
    expect((await shadow.bytesOnDisk()).bytes - before.bytes).toBeLessThan(16 * 1024)
    expect(await shadow.snapshot(work)).toEqual({ tree: big.tree, previous: big.tree, changed: [], large: big.large })
    writeFiles(work, { 'data/big.bin': noise(1000) })
    const shrunk = await shadow.snapshot(work)
    expect(shrunk.changed).toEqual([{ path: 'data/big.bin', status: 'added', binary: true }])
    expect(shrunk.large).toEqual([])
    expect((await shadow.read(shrunk.tree, 'data/big.bin')).content).toEqual(noise(1000))
  })

  it('drops a stored file that grows over the cap, and forgets a large file once deleted', async () => {
    writeFiles(work, { 'grow.txt': 'line\n' })
    const first = await shadow.snapshot(work)
    writeFiles(work, { 'grow.txt': 'line\n'.repeat(20_000) })
    const grown = await shadow.snapshot(work)
    expect(grown).toEqual({
      tree: EMPTY_TREE,
      previous: first.tree,
      changed: [{ path: 'grow.txt', status: 'deleted', added: 0, removed: 1 }],
      large: [{ path: 'grow.txt', size: 100_000 }],
    })
    unlinkSync(join(work, 'grow.txt'))
    expect(await shadow.snapshot(work)).toEqual({ tree: EMPTY_TREE, previous: EMPTY_TREE, changed: [], large: [] })
  })

  it('stores bytes exactly, whatever .gitattributes says about line endings, filters or ident', async () => {
    const mixed = Buffer.from('a\r\nb\nc\r\n$Id$\n')
    writeFiles(work, {
      '.gitattributes': '* text eol=crlf ident\n*.txt filter=lfs\n',
      'mixed.txt': mixed,
      'plain.md': 'x\n',
    })
    const snap = await shadow.snapshot(work)
    expect((await shadow.read(snap.tree, 'mixed.txt')).content).toEqual(mixed)
    const copy = join(base.dir, 'copy')
    await shadow.materialize(snap.tree, copy)
    expect(readFileSync(join(copy, 'mixed.txt'))).toEqual(mixed)
    expect(readFileSync(join(copy, 'plain.md'), 'utf8')).toBe('x\n')
  })

  it('is WORKSPACE_MISSING for a directory that does not exist or is not a directory', async () => {
    await expectCode(shadow.snapshot(join(base.dir, 'gone')), 'WORKSPACE_MISSING')
    writeFileSync(join(base.dir, 'file'), 'x')
    await expectCode(shadow.snapshot(join(base.dir, 'file')), 'WORKSPACE_MISSING')
    writeFiles(work, { 'a.txt': 'a\n' })
    const snap = await shadow.snapshot(work)
    rmSync(work, { recursive: true })
    await expectCode(shadow.snapshot(work), 'WORKSPACE_MISSING')
    await expectCode(shadow.restore(work, snap.tree), 'WORKSPACE_MISSING')
  })

  it('serialises concurrent snapshots of one workspace; different workspaces run side by side', async () => {
    const other = join(base.dir, 'other')
    writeFiles(work, { 'a.txt': 'a\n', 'b.txt': 'b\n' })
    writeFiles(other, { 'a.txt': 'a\n' })
    const [a, b, elsewhere] = await Promise.all([shadow.snapshot(work), shadow.snapshot(work), shadow.snapshot(other)])
    // one ran first and found both files; the other, after it, found nothing new
    const [first, second] = a.previous === EMPTY_TREE ? [a, b] : [b, a]
    expect(first.previous).toBe(EMPTY_TREE)
    expect(first.changed.map((c) => c.path)).toEqual(['a.txt', 'b.txt'])
    expect(second).toEqual({ tree: first.tree, previous: first.tree, changed: [], large: [] })
    expect(elsewhere.changed.map((c) => c.path)).toEqual(['a.txt'])
    writeFiles(work, { 'c.txt': 'c\n' })
    const many = await Promise.all(Array.from({ length: 5 }, () => shadow.snapshot(work)))
    expect(new Set(many.map((s) => s.tree)).size).toBe(1)
    expect(many.map((s) => s.changed.length).sort()).toEqual([0, 0, 0, 0, 1])
    expect(many.filter((s) => s.previous === first.tree).map((s) => s.changed)).toEqual([
      [{ path: 'c.txt', status: 'added', added: 1, removed: 0 }],
    ])
  })

  it("recovers from a crash's leftovers: a stale index lock", async () => {
    writeFiles(work, { 'a.txt': 'a\n' })
    await shadow.snapshot(work)
    const [key] = readdirSync(join(root, 'ws'))
    writeFileSync(join(root, 'ws', key as string, 'index.lock'), '')
    writeFiles(work, { 'b.txt': 'b\n' })
    const again = await createShadowStore({ root, globalExcludes: null }).snapshot(work)
    expect(again.changed).toEqual([{ path: 'b.txt', status: 'added', added: 1, removed: 0 }])
  })

  it('keeps its state across instances: a new store measures changes from the last snapshot', async () => {
    writeFiles(work, { 'a.txt': 'a\n' })
    const first = await shadow.snapshot(work)
    writeFiles(work, { 'b.txt': 'b\n' })
    const again = await createShadowStore({ root, globalExcludes: null }).snapshot(work)
    expect(again.previous).toBe(first.tree)
    expect(again.changed).toEqual([{ path: 'b.txt', status: 'added', added: 1, removed: 0 }])
  })
})

describe('read', () => {
  it('returns a file as it was at an earlier snapshot', async () => {
    writeFiles(work, { 'notes.md': 'version one\n' })
    const first = await shadow.snapshot(work)
    writeFiles(work, { 'notes.md': 'version two\n' })
    const second = await shadow.snapshot(work)
    expect((await shadow.read(first.tree, 'notes.md')).content.toString()).toBe('version one\n')
    expect((await shadow.read(second.tree, 'notes.md')).content.toString()).toBe('version two\n')
  })

  it('is NOT_IN_SNAPSHOT for a path it does not hold, a directory, or an unknown tree; BAD_REQUEST for a bad id', async () => {
    writeFiles(work, { 'dir/a.txt': 'a\n', '*': 'star\n' })
    const snap = await shadow.snapshot(work)
    await expectCode(shadow.read(snap.tree, 'missing.txt'), 'NOT_IN_SNAPSHOT')
    await expectCode(shadow.read(snap.tree, 'dir'), 'NOT_IN_SNAPSHOT')
    await expectCode(shadow.read(snap.tree, '../dir/a.txt'), 'NOT_IN_SNAPSHOT')
    await expectCode(shadow.read(snap.tree, 'dir/*'), 'NOT_IN_SNAPSHOT')
    expect((await shadow.read(snap.tree, '*')).content.toString()).toBe('star\n')
    await expectCode(shadow.read('0123456789abcdef0123456789abcdef01234567', 'a.txt'), 'NOT_IN_SNAPSHOT')
    await expectCode(shadow.list('--output=/tmp/x'), 'BAD_REQUEST')
  })
})

describe('diff', () => {
  it('gives the changes and the exact unified diff between two trees', async () => {
    writeFiles(work, { 'a.txt': 'one\ntwo\nthree\n', 'gone.txt': 'bye\n' })
    const first = await shadow.snapshot(work)
    writeFiles(work, { 'a.txt': 'one\n2\nthree\n', 'new.txt': 'hello\n' })
    unlinkSync(join(work, 'gone.txt'))
    const second = await shadow.snapshot(work)
    const diff = await shadow.diff(first.tree, second.tree)
    expect(diff.files).toEqual([
      { path: 'a.txt', status: 'modified', added: 1, removed: 1 },
      { path: 'gone.txt', status: 'deleted', added: 0, removed: 1 },
      { path: 'new.txt', status: 'added', added: 1, removed: 0 },
    ])
    expect(diff.patch).toBe(
      [
        'diff --git a/a.txt b/a.txt',
        `index ${blobId('one\ntwo\nthree\n')}..${blobId('one\n2\nthree\n')} 100644`,
        '--- a/a.txt',
        '+++ b/a.txt',
        '@@ -1,3 +1,3 @@',
        ' one',
        '-two',
        '+2',
        ' three',
        'diff --git a/gone.txt b/gone.txt',
        'deleted file mode 100644',
        `index ${blobId('bye\n')}..000000000000`,
        '--- a/gone.txt',
        '+++ /dev/null',
        '@@ -1 +0,0 @@',
        '-bye',
        'diff --git a/new.txt b/new.txt',
        'new file mode 100644',
        `index 000000000000..${blobId('hello\n')}`,
        '--- /dev/null',
        '+++ b/new.txt',
        '@@ -0,0 +1 @@',
        '+hello',
        '',
      ].join('\n'),
    )
    expect(await shadow.diff(second.tree, second.tree)).toEqual({ files: [], patch: '' })
    const fromEmpty = await shadow.diff(EMPTY_TREE, first.tree)
    expect(fromEmpty.files.map((f) => `${f.status} ${f.path}`)).toEqual(['added a.txt', 'added gone.txt'])
  })

  it('says a binary file differs without printing it', async () => {
    writeFiles(work, { 'x.bin': Buffer.from([0, 1, 2]) })
    const first = await shadow.snapshot(work)
    writeFiles(work, { 'x.bin': Buffer.from([0, 1, 3]) })
    const second = await shadow.snapshot(work)
    const diff = await shadow.diff(first.tree, second.tree)
    expect(diff.files).toEqual([{ path: 'x.bin', status: 'modified', binary: true }])
    expect(diff.patch.split('\n').slice(2)).toEqual(['Binary files a/x.bin and b/x.bin differ', ''])
  })
})

describe('restore', () => {
  it('never writes through a symlink planted where a directory was (the files stay inside the workspace)', async () => {
    const outside = join(base.dir, 'outside')
    mkdirSync(outside)
    writeFiles(work, { 'src/a.txt': 'a\n', 'src/deep/b.txt': 'b\n' })
    const before = await shadow.snapshot(work)
    // the model swaps the directory for a link to somewhere else
    rmSync(join(work, 'src'), { recursive: true })
    symlinkSync(outside, join(work, 'src'))
    await shadow.snapshot(work)
    await shadow.restore(work, before.tree)
    expect(readdirSync(outside)).toEqual([])
    expect(lstatSync(join(work, 'src')).isDirectory()).toBe(true)
    expect(readFileSync(join(work, 'src', 'deep', 'b.txt'), 'utf8')).toBe('b\n')
  })

  it('brings a directory back byte for byte, leaving ignored and large files alone', async () => {
    userGit(work, 'init', '-q')
    writeFiles(work, {
      '.gitignore': 'node_modules/\n',
      'src/a.ts': 'a\n',
      'src/b.ts': 'b\n',
      'bin/run.sh': '#!/bin/sh\necho run\n',
      'node_modules/dep/index.js': 'dep\n',
    })
    chmodSync(join(work, 'bin/run.sh'), 0o755)
    symlinkSync('src/a.ts', join(work, 'link'))
    const original = hashTree(work, ['.git'])
    const first = await shadow.snapshot(work)

    // the agent's work: an edit, a delete, a new file and directory, a mode change, a retargeted link, a large file
    writeFiles(work, { 'src/a.ts': 'a changed\n', 'docs/new.md': 'new\n', 'node_modules/dep/index.js': 'dep 2\n' })
    unlinkSync(join(work, 'src/b.ts'))
    chmodSync(join(work, 'bin/run.sh'), 0o644)
    unlinkSync(join(work, 'link'))
    symlinkSync('src/b.ts', join(work, 'link'))
    writeFiles(work, { 'big.bin': noise(100 * 1024) })
    const afterWork = await shadow.snapshot(work)
    const gitBefore = hashTree(join(work, '.git'))

    const restored = await shadow.restore(work, first.tree)
    expect(restored.before.tree).toBe(afterWork.tree)
    expect(restored.tree).toBe(first.tree)
    expect(restored.changed).toEqual([
      { path: 'bin/run.sh', status: 'modified', added: 0, removed: 0 },
      { path: 'docs/new.md', status: 'deleted', added: 0, removed: 1 },
      { path: 'link', status: 'modified', added: 1, removed: 1 },
      { path: 'src/a.ts', status: 'modified', added: 1, removed: 1 },
      { path: 'src/b.ts', status: 'added', added: 1, removed: 0 },
    ])
    expect(hashTree(work, ['.git', 'big.bin', 'node_modules'])).toEqual(
      Object.fromEntries(Object.entries(original).filter(([path]) => !path.startsWith('node_modules'))),
    )
    expect(readFileSync(join(work, 'node_modules/dep/index.js'), 'utf8')).toBe('dep 2\n')
    expect(readFileSync(join(work, 'big.bin'))).toEqual(noise(100 * 1024))
    expect(readlinkSync(join(work, 'link'))).toBe('src/a.ts')
    expect(hashTree(join(work, '.git'))).toEqual(gitBefore)

    // the next snapshot measures from the restored tree, and the restore can itself be undone
    expect(await shadow.snapshot(work)).toEqual({
      tree: first.tree,
      previous: first.tree,
      changed: [],
      large: [{ path: 'big.bin', size: 100 * 1024 }],
    })
    const undone = await shadow.restore(work, restored.before.tree)
    expect(undone.changed.map((c) => `${c.status} ${c.path}`)).toEqual([
      'modified bin/run.sh',
      'added docs/new.md',
      'modified link',
      'modified src/a.ts',
      'deleted src/b.ts',
    ])
    expect(readFileSync(join(work, 'src/a.ts'), 'utf8')).toBe('a changed\n')
  })

  it('records changes made since the last snapshot before restoring, so they can be brought back', async () => {
    writeFiles(work, { 'a.txt': 'a\n' })
    const first = await shadow.snapshot(work)
    writeFiles(work, { 'a.txt': 'unrecorded\n' })
    const restored = await shadow.restore(work, first.tree)
    expect(restored.before.changed).toEqual([{ path: 'a.txt', status: 'modified', added: 1, removed: 1 }])
    expect(readFileSync(join(work, 'a.txt'), 'utf8')).toBe('a\n')
    expect((await shadow.read(restored.before.tree, 'a.txt')).content.toString()).toBe('unrecorded\n')
  })

  it('is NOT_IN_SNAPSHOT for a tree the store does not hold, and changes nothing', async () => {
    writeFiles(work, { 'a.txt': 'a\n' })
    await expectCode(shadow.restore(work, '0123456789abcdef0123456789abcdef01234567'), 'NOT_IN_SNAPSHOT')
    expect(readdirSync(work)).toEqual(['a.txt'])
  })
})

describe('materialize', () => {
  it('writes the tree into a new directory, which then snapshots as the same tree with nothing to hash', async () => {
    writeFiles(work, { 'a.txt': 'a\n', 'src/b.ts': 'bb\n', '.gitignore': 'tmp/\n', 'tmp/x': 'ignored\n' })
    symlinkSync('a.txt', join(work, 'link'))
    const snap = await shadow.snapshot(work)
    const target = join(base.dir, 'forks', 'child')
    const made = await shadow.materialize(snap.tree, target)
    expect(made).toEqual({ directory: target, files: 4, bytes: 2 + 3 + 5 + 5 })
    expect(hashTree(target)).toEqual(hashTree(work, ['tmp']))
    expect(readdirSync(join(base.dir, 'forks'))).toEqual(['child'])
    expect(await shadow.snapshot(target)).toEqual({ tree: snap.tree, previous: snap.tree, changed: [], large: [] })
  })

  it('materializes into an existing empty directory, and refuses one that is not empty', async () => {
    writeFiles(work, { 'a.txt': 'a\n' })
    const snap = await shadow.snapshot(work)
    const empty = join(base.dir, 'empty')
    mkdirSync(empty)
    expect((await shadow.materialize(snap.tree, empty)).files).toBe(1)
    await expectCode(shadow.materialize(snap.tree, empty), 'DIRECTORY_NOT_EMPTY')
    writeFileSync(join(base.dir, 'a-file'), 'x')
    await expectCode(shadow.materialize(snap.tree, join(base.dir, 'a-file')), 'DIRECTORY_NOT_EMPTY')
    expect(readdirSync(base.dir).filter((name) => name.includes('.partial-'))).toEqual([])
  })

  it('leaves nothing named like the target when the checkout fails mid-way', async () => {
    writeFiles(work, { 'a.txt': 'first\n', 'b.txt': 'second\n', 'c.txt': 'third\n' })
    const snap = await shadow.snapshot(work)
    // a damaged store: one of the blobs is gone, so git writes some files and then fails
    const id = blobId('second\n', 40)
    unlinkSync(join(root, 'objects.git', 'objects', id.slice(0, 2), id.slice(2)))
    const target = join(base.dir, 'forks', 'child')
    const err = await rejection(shadow.materialize(snap.tree, target))
    expect(isChronicleError(err, 'WORKSPACE_DAMAGED')).toBe(true)
    expect(readdirSync(join(base.dir, 'forks'))).toEqual([])
    expect(readdirSync(join(root, 'tmp'))).toEqual([])
  })

  it('fails cleanly where the target cannot be created', async () => {
    writeFiles(work, { 'a.txt': 'a\n' })
    const snap = await shadow.snapshot(work)
    writeFileSync(join(base.dir, 'plain-file'), 'x')
    const target = join(base.dir, 'plain-file', 'child')
    await expect(shadow.materialize(snap.tree, target)).rejects.toThrow(/EEXIST|ENOTDIR/)
    expect(existsSync(target)).toBe(false)
    expect(readdirSync(base.dir).sort()).toEqual(['data', 'plain-file', 'work'])
  })

  it('does not follow the old name: a materialized directory moved away is a new workspace', async () => {
    writeFiles(work, { 'a.txt': 'a\n' })
    const snap = await shadow.snapshot(work)
    const target = join(base.dir, 'child')
    await shadow.materialize(snap.tree, target)
    renameSync(target, join(base.dir, 'moved'))
    const moved = await shadow.snapshot(join(base.dir, 'moved'))
    expect(moved.tree).toBe(snap.tree)
    expect(moved.previous).toBe(EMPTY_TREE)
  })
})

describe('global excludes', () => {
  const saved = { HOME: process.env.HOME, XDG_CONFIG_HOME: process.env.XDG_CONFIG_HOME }
  afterEach(() => {
    for (const [name, value] of Object.entries(saved))
      if (value === undefined) delete process.env[name]
      else process.env[name] = value
  })

  it("finds the server user's excludes file as git would: core.excludesFile, else the XDG default", async () => {
    const home = join(base.dir, 'home')
    mkdirSync(home)
    process.env.HOME = home
    delete process.env.XDG_CONFIG_HOME
    expect(await findGlobalExcludes(join(root, 'objects.git'))).toBe(join(home, '.config', 'git', 'ignore'))
    process.env.XDG_CONFIG_HOME = join(base.dir, 'xdg')
    expect(await findGlobalExcludes(join(root, 'objects.git'))).toBe(join(base.dir, 'xdg', 'git', 'ignore'))
    writeFileSync(join(home, '.gitconfig'), '[core]\n\texcludesFile = ~/my-ignore\n')
    expect(await findGlobalExcludes(join(root, 'objects.git'))).toBe(join(home, 'my-ignore'))
  })

  it('uses it by default', async () => {
    const home = join(base.dir, 'home')
    writeFiles(home, { '.gitconfig': '[core]\n\texcludesFile = ~/my-ignore\n', 'my-ignore': '*.tmp\n' })
    process.env.HOME = home
    writeFiles(work, { 'a.txt': 'a\n', 'b.tmp': 'b\n' })
    const snap = await createShadowStore({ root }).snapshot(work)
    expect(snap.changed.map((c) => c.path)).toEqual(['a.txt'])
  })
})

describe('background snapshots of a quiet workspace', () => {
  let restorePath: (() => void) | undefined
  afterEach(() => restorePath?.())

  /** Puts a `git` on the PATH that logs each invocation before running the real one; returns the calls so far. */
  function countGit(): () => number {
    const shim = join(base.dir, 'shim')
    const log = join(base.dir, 'git-calls.log')
    mkdirSync(shim, { recursive: true })
    const real = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim()
    writeFileSync(join(shim, 'git'), `#!/bin/sh\necho "$*" >> '${log}'\nexec '${real}' "$@"\n`, { mode: 0o755 })
    const path = process.env.PATH
    process.env.PATH = `${shim}:${path}`
    restorePath = () => {
      process.env.PATH = path
    }
    return () => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').length : 0)
  }
  const settle = () => new Promise((resolve) => setTimeout(resolve, 100)) // inotify events reach the watch

  it('starts no git process when nothing changed in the recorded directories, and sees every change made', async () => {
    writeFiles(work, { 'a.txt': 'a\n', 'src/b.ts': 'b\n', 'src/deep/c.ts': 'c\n' })
    const calls = countGit()
    const first = await shadow.snapshot(work, { background: true })
    await settle()
    // the directories are watched from the end of the first snapshot: what happened before that, the second finds
    await shadow.snapshot(work, { background: true })
    await settle()
    const before = calls()
    const again = await shadow.snapshot(work, { background: true })
    expect(calls()).toBe(before)
    expect(again).toEqual({ tree: first.tree, previous: first.tree, changed: [], large: [] })

    // each kind of change is seen: an edit deep down, a new file in a new directory, a removal
    const changes = [
      () => writeFiles(work, { 'src/deep/c.ts': 'changed\n' }),
      () => writeFiles(work, { 'new/dir/d.ts': 'd\n' }),
      () => writeFiles(work, { 'new/dir/d.ts': 'edited where nothing was watched before\n' }),
      () => rmSync(join(work, 'a.txt')),
    ]
    for (const change of changes) {
      const prior = await shadow.snapshot(work, { background: true })
      await settle()
      change()
      await settle()
      const after = await shadow.snapshot(work, { background: true })
      expect(after.tree).not.toBe(prior.tree)
      expect(after.changed).toHaveLength(1)
    }
  })

  it('a .gitignore edited makes git look at everything: a file it no longer ignores is recorded', async () => {
    writeFiles(work, { '.gitignore': '*.log\n', 'a.txt': 'a\n', 'logs/debug.log': 'log\n' })
    await shadow.snapshot(work)
    await settle()
    await shadow.snapshot(work)
    await settle()
    writeFiles(work, { '.gitignore': '' })
    const snap = await shadow.snapshot(work)
    expect(snap.changed.map((c) => c.path)).toEqual(['.gitignore', 'logs/debug.log'])
  })

  it('a snapshot someone waits for looks, after a barrier, at exactly the paths that changed', async () => {
    writeFiles(work, { 'a.txt': 'a\n', 'src/b.ts': 'b\n', 'src/c.ts': 'c\n' })
    await shadow.snapshot(work)
    await settle() // its directories get watched
    await shadow.snapshot(work) // what happened before they were, it finds
    await settle()
    countGit()
    // written just before: the barrier makes sure their events are in before git is asked
    writeFiles(work, { 'src/b.ts': 'changed\n', 'src/new.ts': 'new\n' })
    const snap = await shadow.snapshot(work)
    expect(snap.changed.map((c) => [c.path, c.status])).toEqual([
      ['src/b.ts', 'modified'],
      ['src/new.ts', 'added'],
    ])
    const looked = readFileSync(join(base.dir, 'git-calls.log'), 'utf8').split('\n')
    expect(looked.find((line) => line.includes('ls-files'))).toMatch(
      / -- (src\/b\.ts src\/new\.ts|src\/new\.ts src\/b\.ts)$/,
    )
  })
})
