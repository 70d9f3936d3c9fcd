import { readFileSync, statSync } from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'
import { calls, results, startHostile, whileHealthy, type HostileServer } from './hostile-server.js'

/**
 * Finding 6 (docs/SECURITY.md), bash half: one command cannot stall or kill
 * the server. A real server runs a command that prints 600 MB (it used to
 * keep all of it in one string: 4 GB of RSS, then death at the heap limit),
 * and a long chatty one (every progress event used to repeat up to 30 KB of
 * everything printed so far, into the immutable log). Throughout, /health
 * answers within a second.
 */

const ALLOW_BASH = { permission: [{ permission: 'bash', pattern: '*', action: 'allow' }] }
/** The saved output stops growing at 64 MiB; a progress event holds at most 4 KiB of new output (docs/TOOLS.md). */
const MAX_SAVED_BYTES = 64 * 1024 * 1024
const PROGRESS_MAX_CHARS = 4 * 1024

let server: HostileServer | undefined
afterEach(async () => {
  await server?.stop().catch(() => undefined)
  server = undefined
})

/** The server process's resident set, from /proc (kB → MB). */
function rssMb(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]
  return Number(kb) / 1024
}

describe('a command cannot exhaust the server', () => {
  it('600 MB of output: bounded memory, a capped saved file, a bounded result; /health answers throughout', async () => {
    server = await startHostile({
      steps: calls({ name: 'bash', input: { command: 'yes chronicle | head -c 600000000; echo; echo finished' } }),
      config: ALLOW_BASH,
    })
    const s = server
    const before = rssMb(s.pid)
    let peak = before
    const sampler = setInterval(() => (peak = Math.max(peak, rssMb(s.pid))), 50)
    const { result: session, slowestMs } = await whileHealthy(s, () => s.prompt('go')).finally(() =>
      clearInterval(sampler),
    )
    const events = await s.events(session)
    const completed = events.find((e) => e.type === 'tool.completed')?.data as {
      output: string
      metadata: { outputPath: string; truncated: boolean }
    }
    expect(completed.metadata.truncated).toBe(true)
    expect(completed.output.length).toBeLessThan(60 * 1024)
    expect(completed.output).toContain('finished')
    expect(statSync(completed.metadata.outputPath).size).toBe(MAX_SAVED_BYTES)
    expect(peak - before).toBeLessThan(150) // MB: nothing near the output's size
    expect(slowestMs).toBeLessThan(1000)
  }, 120_000)

  it('a long chatty command: each progress event carries only new output, bounded, a few per second', async () => {
    const command = 'for i in $(seq 1 40); do seq 1 2000; sleep 0.05; done; echo finished'
    server = await startHostile({ steps: calls({ name: 'bash', input: { command } }), config: ALLOW_BASH })
    const s = server
    const { result: session, slowestMs } = await whileHealthy(s, () => s.prompt('go'))
    const events = await s.events(session)
    const progressed = events
      .filter((e) => e.type === 'tool.progressed')
      .map((e) => e.data.metadata as { output: string; skipped?: number })
    const printed =
      40 * Buffer.byteLength(Array.from({ length: 2000 }, (_, i) => `${i + 1}\n`).join('')) + 'finished\n'.length
    const logged = progressed.reduce((n, p) => n + p.output.length, 0)
    expect(progressed.every((p) => p.output.length <= PROGRESS_MAX_CHARS)).toBe(true)
    expect(logged).toBeLessThan(printed) // never more than was printed: nothing is repeated
    expect(progressed.at(-1)?.output).toContain('finished')
    const at = (type: string) => Date.parse(String(events.find((e) => e.type === type)?.at))
    const seconds = (at('tool.completed') - at('tool.called')) / 1000
    expect(progressed.length).toBeLessThanOrEqual(Math.ceil(seconds * 4) + 2) // at most one every 250 ms
    expect(results(events)[0]).toContain('finished')
    expect(slowestMs).toBeLessThan(1000)
  }, 120_000)
})
