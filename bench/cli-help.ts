import { execFileSync } from 'node:child_process'
import { join } from 'node:path'

/**
 * `npm run bench -- cli-help [--runs 10]`: how long `chronicle --help` takes,
 * as a user runs it — `node bin/chronicle.mjs --help`, a fresh process each
 * time, on the compiled CLI in dist/ (so `npm run build` first after editing
 * src/). Wall-clock per run, median (target ≤ 300 ms): what a command that
 * needs no server costs before it does anything.
 */
export default async function (args: string[]): Promise<object> {
  const runs = flag(args, '--runs', 10)
  const bin = join(import.meta.dirname, '..', 'bin', 'chronicle.mjs')
  const times: number[] = []
  for (let i = 0; i < runs; i++) {
    const start = performance.now()
    // throws, with the bin's one line on stderr, when dist/ is not built
    execFileSync(process.execPath, [bin, '--help'], { stdio: ['ignore', 'ignore', 'inherit'] })
    times.push(performance.now() - start)
  }
  const sorted = [...times].sort((a, b) => a - b)
  const round = (ms: number) => Math.round(ms * 10) / 10
  return {
    runs,
    medianMs: round(median(sorted)),
    minMs: round(sorted[0] ?? 0),
    maxMs: round(sorted[sorted.length - 1] ?? 0),
  }
}

function median(sorted: readonly number[]): number {
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2
}

function flag(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name)
  const value = i >= 0 ? Number(args[i + 1]) : fallback
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must be a positive whole number`)
  return value
}
