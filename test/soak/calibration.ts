import { type ChildProcess, spawn } from 'node:child_process'

/**
 * The machine's pace, measured beside the server: a process of its own runs
 * the same fixed piece of work twice a second — JSON, hashing, maps and the
 * garbage they leave, what a turn is made of — and reports the CPU time it
 * took. On these VMs a turn's CPU time moves with the host, not only with the
 * server: in a 300 s soak, while other work ran on the machine, the probe's
 * time rose from 2.2 to 3.3 ms and the server's CPU per turn from 12.3 to
 * 15.4 ms, both falling back after. But the probe also moves on its own: in
 * a CI run it went 3.4 → 2.4 → 3.5 ms between intervals while the server's
 * CPU per turn moved 8%. So the soak reports it beside the server's CPU, to
 * read a result by, and does not divide by it.
 */
const PROBE = `
const { createHash } = require('node:crypto')
const doc = { messages: Array.from({ length: 200 }, (_, i) => ({ id: 'msg_' + i, role: i % 2 ? 'user' : 'assistant', text: 'lorem ipsum dolor sit amet '.repeat(6) + i })) }
function unit() {
  const hash = createHash('sha256')
  const byId = new Map()
  for (let k = 0; k < 12; k++) {
    const s = JSON.stringify(doc)
    hash.update(s)
    for (const m of JSON.parse(s).messages) byId.set(m.id + ':' + k, m)
  }
  return hash.digest('hex').length + byId.size
}
for (let i = 0; i < 20; i++) unit()
setInterval(() => {
  const from = process.cpuUsage()
  unit()
  const used = process.cpuUsage(from)
  process.stdout.write((used.user + used.system) + '\\n')
}, 500)
`

export class Calibration {
  private readonly samples: { at: number; us: number }[] = []
  private partial = ''

  private constructor(private readonly child: ChildProcess) {
    child.stdout?.on('data', (d: Buffer) => {
      const lines = (this.partial + String(d)).split('\n')
      this.partial = lines.pop() ?? ''
      for (const line of lines) if (line) this.samples.push({ at: Date.now(), us: Number(line) })
    })
  }

  static start(): Calibration {
    return new Calibration(spawn(process.execPath, ['-e', PROBE], { stdio: ['ignore', 'pipe', 'inherit'] }))
  }

  /** The median CPU time of the probe's work in [from, until) (epoch ms), in ms; 0 with no sample. */
  paceMs(from: number, until: number): number {
    const xs = this.samples
      .filter((s) => s.at >= from && s.at < until)
      .map((s) => s.us)
      .sort((a, b) => a - b)
    return xs.length === 0 ? 0 : (xs[Math.floor(xs.length / 2)] as number) / 1000
  }

  stop(): void {
    this.child.kill()
  }
}
