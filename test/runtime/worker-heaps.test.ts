import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { WORKER_SEMI_SPACE_MB } from '../../src/worker-heaps.js'

const child = fileURLToPath(new URL('./fixtures/worker-heap-child.ts', import.meta.url))
const START_SEMI_SPACE_MB = 64 // package.json's `start`

/** The largest young generation (two semi-spaces, MiB) of a worker thread and of the main thread, in a process started as `npm start` starts the server. */
async function youngGenerations(mode: 'keep' | 'none'): Promise<{ workerMb: number; mainMb: number }> {
  const args = [`--max-semi-space-size=${START_SEMI_SPACE_MB}`, '--import', 'tsx', child, mode]
  const { stdout } = await promisify(execFile)(process.execPath, args, { timeout: 60_000 })
  return JSON.parse(stdout) as { workerMb: number; mainMb: number }
}

describe("worker threads' heaps", () => {
  it("a worker made after keepWorkerHeapsSmall grows its young generation only to V8's default, and the main thread still to what the command line set", async () => {
    const [kept, raised] = await Promise.all([youngGenerations('keep'), youngGenerations('none')])
    // without it, the worker takes the command line's semi-space: the growth the soak found in the search index's worker
    expect(raised.workerMb).toBe(2 * START_SEMI_SPACE_MB)
    expect(kept.workerMb).toBeLessThanOrEqual(2 * WORKER_SEMI_SPACE_MB)
    expect(kept.mainMb).toBe(2 * START_SEMI_SPACE_MB)
  }, 90_000)

  it('npm start raises the main thread semi-space this spec starts its child with', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      scripts: { start: string }
    }
    expect(pkg.scripts.start).toContain(`--max-semi-space-size=${START_SEMI_SPACE_MB}`)
  })
})
