import { sqlitePorts } from '../src/projections/store-ports.js'
import { spawn } from 'node:child_process'
import { rmSync } from 'node:fs'
import { createMetrics } from '../src/observability/metrics.js'
import { startTracing } from '../src/observability/tracing.js'
import { setup, turn } from './conversation.js'

/**
 * `npm run bench -- observability [turns] [rounds] [both|metrics|traces]` — what metrics and traces
 * cost a turn (docs/OBSERVABILITY.md "Cost"): the conversation bench's turn
 * (submit → lookup tool call → 500-character answer, ~90 events through the
 * real runtime and store) with the metrics registry and the OTLP trace
 * exporter listening to the store's commits, against the same turns with
 * neither, in alternating blocks of one sitting (on/off, then off/on, …) so
 * drift and neighbours' load fall on both. Spans go over HTTP to a receiver
 * in a process of its own that reads and drops them (a collector is not the
 * server: its CPU is not the turn's); /metrics is rendered once per block.
 * Target (#42): turn time on ≤ 1.05 × off.
 */

/** An OTLP/HTTP receiver that reads each export, answers it, and tells the bench how many bytes it was. */
const RECEIVER = `require('node:http').createServer((req, res) => {
  let n = 0
  req.on('data', (c) => { n += c.length })
  req.on('end', () => { process.send(n); res.writeHead(200, { 'content-type': 'application/json' }).end('{}') })
}).listen(0, '127.0.0.1', function () { console.log(this.address().port) })`

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length === 0 ? 0 : s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2
}
const round = (x: number, d = 3) => Math.round(x * 10 ** d) / 10 ** d

type Mode = 'both' | 'metrics' | 'traces'

async function block(
  on: boolean,
  mode: Mode,
  turns: number,
  endpoint: string,
): Promise<{ ms: number[]; cpuMs: number[] }> {
  const { store, runtime, sessionId, dir } = await setup()
  const metrics = on && mode !== 'traces' ? createMetrics(sqlitePorts(store)) : undefined
  const tracing = on && mode !== 'metrics' ? startTracing(store, { endpoint, version: 'bench' }) : undefined
  const ms: number[] = []
  const cpuMs: number[] = []
  for (let t = 0; t < turns; t++) {
    const r = await turn(runtime, sessionId, on ? 'on' : 'off', t)
    // the first turns warm the JIT and the caches: left out of both sides
    if (t >= 10) {
      ms.push(r.ms)
      cpuMs.push(r.cpuMs)
    }
  }
  if (metrics) await metrics.render()
  await runtime.stop()
  await tracing?.close()
  metrics?.close()
  store.close()
  rmSync(dir, { recursive: true, force: true })
  return { ms, cpuMs }
}

export default async function observability(args: string[]): Promise<object> {
  const turns = Number(args[0] ?? 150)
  const rounds = Number(args[1] ?? 6)
  const mode = (args[2] ?? 'both') as Mode
  // the receiver is a process of its own, as a collector is: what it spends reading the spans is not the server's
  const receiver = spawn(process.execPath, ['-e', RECEIVER], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] })
  let spansBytes = 0
  receiver.on('message', (bytes) => {
    spansBytes += Number(bytes)
  })
  const port = await new Promise<string>((resolve) => receiver.stdout?.once('data', (d) => resolve(String(d).trim())))
  const endpoint = `http://127.0.0.1:${port}`
  const on = { ms: [] as number[], cpuMs: [] as number[] }
  const off = { ms: [] as number[], cpuMs: [] as number[] }
  const blockRatios: number[] = []
  // a block of each side first, left out: the first block of the process would otherwise pay for compiling
  // the runtime, the store and the SDK, and round 0 runs the traced side first
  await block(false, mode, turns, endpoint)
  await block(true, mode, turns, endpoint)
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? [true, false] : [false, true]
    const medians: Record<string, number> = {}
    for (const which of order) {
      const b = await block(which, mode, turns, endpoint)
      const side = which ? on : off
      side.ms.push(...b.ms)
      side.cpuMs.push(...b.cpuMs)
      medians[String(which)] = median(b.ms)
    }
    blockRatios.push(round((medians.true ?? 0) / (medians.false ?? 1)))
  }
  receiver.kill()
  const figures = {
    mode,
    turnsPerBlock: turns,
    rounds,
    medianTurnMsOff: round(median(off.ms)),
    medianTurnMsOn: round(median(on.ms)),
    turnRatio: round(median(on.ms) / median(off.ms)),
    medianTurnCpuMsOff: round(median(off.cpuMs)),
    medianTurnCpuMsOn: round(median(on.cpuMs)),
    cpuRatio: round(median(on.cpuMs) / median(off.cpuMs)),
    costPerTurnMs: round(median(on.ms) - median(off.ms)),
    blockRatios,
    spansBytesReceived: spansBytes,
    target: { turnRatioMax: 1.05 },
  }
  return figures
}
