import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { deflateSync } from 'node:zlib'
import { createShadowStore } from '../src/runtime/workspace/shadow-store.js'
import { createWorkspaceSnapshots } from '../src/runtime/workspace/snapshots.js'
import { sqlitePorts } from '../src/projections/store-ports.js'
import { setup, turn } from './conversation.js'

/**
 * `npm run bench -- workspace [--files 10000] [--mb 100] [--steps 100] [--runs 50]`:
 * the workspace snapshot store (src/runtime/workspace/shadow-store.ts) on a
 * generated repository of `files` text files (`mb` MB in all, in ~100
 * directories; a real `git init` repository whose `.gitignore` ignores
 * `build/`, which holds more files).
 *
 * 1. The initial snapshot (every file hashed and stored).
 * 2. A snapshot after a one-file change, `runs` times: p50 / p99 (target p50
 *    ≤ 100 ms), and the bytes each change added to the store (median; target
 *    ≤ 2 × the changed file zlib-compressed + 4 KB, reported beside it).
 * 3. `diff` from the first to the last tree of `steps` one-file changes
 *    (target ≤ 200 ms).
 * 4. `materialize` of the whole last tree into a new directory (target ≤ 3 s).
 * 5. The added cost per turn on the conversation workload (bench/conversation.ts,
 *    `turns` turns, through the real runtime, the workspace already recorded
 *    once as a running server has it): the median turn with step snapshots
 *    over the median turn without, in the same run, alternating —
 *    for a session in a small project (200 files) and in the generated repository
 *    (target ≤ 1.10).
 */
export default async function (args: string[]): Promise<object> {
  const files = flag(args, '--files', 10_000)
  const mb = flag(args, '--mb', 100)
  const steps = flag(args, '--steps', 100)
  const runs = flag(args, '--runs', 50)
  const turns = flag(args, '--turns', 40)
  const loadBefore = loadavg()[0] as number
  const base = realpathSync(mkdtempSync(join(tmpdir(), 'chronicle-bench-workspace-')))
  try {
    const repo = join(base, 'repo')
    const paths = generate(repo, files, mb)
    const shadow = createShadowStore({ root: join(base, 'data', 'workspaces'), globalExcludes: null })
    const random = mulberry32(7)

    let started = performance.now()
    const initial = await shadow.snapshot(repo)
    const initialMs = performance.now() - started
    if (initial.changed.length !== files + 1)
      throw new Error(`the initial snapshot listed ${initial.changed.length} files`)
    const storeAfterInitial = await shadow.bytesOnDisk()

    started = performance.now()
    await shadow.snapshot(repo)
    const unchangedMs = performance.now() - started

    // timed on their own: measuring the store between snapshots (a walk of every object file) would disturb them
    const ms: number[] = []
    for (let i = 0; i < runs; i++) {
      const path = paths[Math.floor(random() * paths.length)] as string
      change(join(repo, path), random)
      started = performance.now()
      const snap = await shadow.snapshot(repo)
      ms.push(performance.now() - started)
      if (snap.changed.length !== 1 || snap.changed[0]?.path !== path) throw new Error(`run ${i}: unexpected changes`)
    }
    const added: number[] = []
    const allocated: number[] = []
    const bounds: number[] = []
    for (let i = 0; i < runs; i++) {
      const content = change(join(repo, paths[Math.floor(random() * paths.length)] as string), random)
      const before = await shadow.bytesOnDisk()
      await shadow.snapshot(repo)
      const after = await shadow.bytesOnDisk()
      added.push(after.bytes - before.bytes)
      allocated.push(after.allocated - before.allocated)
      bounds.push(2 * deflateSync(content).length + 4096)
    }

    const first = (await shadow.snapshot(repo)).tree
    let last = first
    for (let i = 0; i < steps; i++) {
      change(join(repo, paths[Math.floor(random() * paths.length)] as string), random)
      last = (await shadow.snapshot(repo)).tree
    }
    const diffMs: number[] = []
    let diffFiles = 0
    let patchBytes = 0
    for (let i = 0; i < 5; i++) {
      started = performance.now()
      const diff = await shadow.diff(first, last)
      diffMs.push(performance.now() - started)
      diffFiles = diff.files.length
      patchBytes = diff.patch.length
    }

    const fork = join(base, 'fork')
    started = performance.now()
    const made = await shadow.materialize(last, fork)
    const materializeMs = performance.now() - started
    started = performance.now()
    const forkSnapshot = await shadow.snapshot(fork)
    const forkSnapshotMs = performance.now() - started
    if (forkSnapshot.tree !== last || forkSnapshot.changed.length > 0) throw new Error('the fork differs from its tree')

    const store = await shadow.bytesOnDisk()

    const small = join(base, 'small')
    generate(small, 200, 2)
    const conversation = {
      turns,
      smallProject: await conversationCost(small, join(base, 'conv-small'), turns),
      generatedRepository: await conversationCost(repo, join(base, 'conv-repo'), turns),
      targetRatio: 1.1,
    }
    return {
      repository: { files, mb, directories: 100, ignoredFiles: 200, gitignore: 'build/' },
      initialSnapshotMs: round(initialMs),
      storeAfterInitial: { bytes: storeAfterInitial.bytes, allocated: storeAfterInitial.allocated },
      unchangedSnapshotMs: round(unchangedMs),
      oneFileChange: {
        runs,
        snapshotMs: { ...percentiles(ms), max: round(Math.max(...ms)) },
        targetP50Ms: 100,
        bytesAddedMedian: median(added),
        allocatedBytesAddedMedian: median(allocated),
        boundMedian: median(bounds),
        bound: '2 × zlib(changed file) + 4096',
        withinBound: `${added.filter((b, i) => b <= (bounds[i] as number)).length}/${runs}`,
      },
      diffAcrossSteps: {
        steps,
        files: diffFiles,
        patchBytes,
        ms: { first: round(diffMs[0] as number), median: round(median(diffMs)) },
        targetMs: 200,
      },
      materialize: {
        ms: round(materializeMs),
        files: made.files,
        bytes: made.bytes,
        targetMs: 3000,
        hardLinks: 'no: git writes each file from its compressed object',
        firstSnapshotOfForkMs: round(forkSnapshotMs),
      },
      store: { bytes: store.bytes, allocated: store.allocated },
      conversation,
      environment: {
        git: execFileSync('git', ['--version'], { encoding: 'utf8' }).trim(),
        cpus: cpus().length,
        cpu: cpus()[0]?.model,
        platform: `${process.platform} ${process.arch}`,
        // other work on the machine while the bench ran (1-minute load average before and after)
        loadAverage: { before: round(loadBefore), after: round(loadavg()[0] as number) },
      },
    }
  } finally {
    rmSync(base, { recursive: true, force: true })
  }
}

/**
 * Median turn time without and with step snapshots of `directory`, three rounds
 * of `turns` turns each way, alternating so that drift in the machine's load
 * falls on both.
 */
async function conversationCost(directory: string, storeRoot: string, turns: number) {
  const without: number[] = []
  const withSnapshots: number[] = []
  // the server's store is long-lived: the directory is already recorded (its first snapshot, which hashes
  // every file, happens once per workspace, not per turn)
  const shadow = createShadowStore({ root: storeRoot, globalExcludes: null })
  await shadow.snapshot(directory)
  for (let round = 0; round < 3; round++) {
    for (const snapshots of [false, true]) {
      const s = await setup({
        directory,
        ...(snapshots && { workspace: (store) => createWorkspaceSnapshots({ ports: sqlitePorts(store), shadow }) }),
      })
      const samples = snapshots ? withSnapshots : without
      for (let t = 0; t < turns; t++) samples.push((await turn(s.runtime, s.sessionId, `r${round}`, t)).ms)
      await s.runtime.stop()
      s.store.close()
      rmSync(s.dir, { recursive: true, force: true })
    }
  }
  shadow.close()
  const a = median(without)
  const b = median(withSnapshots)
  return { medianTurnMs: round(a), medianTurnMsWithSnapshots: round(b), ratio: round(b / a) }
}

const WORDS = (
  'const let function return import export from async await value index result error string number ' +
  'object array map filter reduce promise resolve reject throw catch class extends interface type ' +
  'session event store append commit version snapshot tree file path directory workspace'
).split(' ')

/** `files` text files of about `mb`·1 MB / `files` bytes each in ~100 directories, plus ignored `build/` files. */
function generate(repo: string, files: number, mb: number): string[] {
  mkdirSync(repo, { recursive: true })
  execFileSync('git', ['init', '-q'], { cwd: repo, env: { PATH: process.env.PATH ?? '', HOME: repo } })
  writeFileSync(join(repo, '.gitignore'), 'build/\n')
  const random = mulberry32(1)
  const perFile = Math.round((mb * 1024 * 1024) / files)
  const perDirectory = Math.ceil(files / 100)
  const paths: string[] = []
  for (let i = 0; i < files; i++) {
    const dir = `src/module-${String(Math.floor(i / perDirectory)).padStart(3, '0')}`
    if (i % perDirectory === 0) mkdirSync(join(repo, dir), { recursive: true })
    const path = `${dir}/file-${String(i).padStart(5, '0')}.ts`
    writeFileSync(join(repo, path), text(perFile, random))
    paths.push(path)
  }
  mkdirSync(join(repo, 'build'))
  for (let i = 0; i < 200; i++) writeFileSync(join(repo, 'build', `out-${i}.js`), text(perFile, random))
  return paths
}

function text(bytes: number, random: () => number): string {
  const lines: string[] = []
  let size = 0
  while (size < bytes) {
    const words = Array.from({ length: 8 }, () => WORDS[Math.floor(random() * WORDS.length)])
    const line = `  ${words.join(' ')} ${Math.floor(random() * 100_000)};`
    lines.push(line)
    size += line.length + 1
  }
  return `${lines.join('\n')}\n`
}

/** An edit an agent might make: one line replaced, one added. Returns the new content. */
function change(file: string, random: () => number): Buffer {
  const lines = readFileSync(file, 'utf8').split('\n')
  const at = Math.floor(random() * (lines.length - 1))
  lines[at] = `  edited ${Math.floor(random() * 1e9)};`
  lines.splice(at + 1, 0, `  added ${Math.floor(random() * 1e9)};`)
  const content = Buffer.from(lines.join('\n'))
  writeFileSync(file, content)
  return content
}

function mulberry32(seed: number): () => number {
  let a = seed
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

function percentiles(values: number[]) {
  const sorted = [...values].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number
  return { p50: round(at(0.5)), p99: round(at(0.99)) }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] as number
}

function round(n: number): number {
  return Math.round(n * 100) / 100
}

function flag(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name)
  const value = i >= 0 ? Number(args[i + 1]) : fallback
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`)
  return value
}
