import { rmSync } from 'node:fs'
import { sqlitePorts } from '../src/projections/store-ports.js'
import { performance } from 'node:perf_hooks'
import { foldSession } from '../src/projections/fold/fold.js'
import { openStore } from '../src/projections/open.js'
import { audit } from '../src/runtime/audit/audit.js'
import { setup, turn } from './conversation.js'

/**
 * `npm run bench -- audit [turns=1000] [runs=3]` — `chronicle audit` of the
 * conversation workload (bench/CONVERSATION.md: tool call, result and a
 * streamed answer per turn): every model step's request rebuilt from the
 * log and its digest checked. The baseline, measured on the same file in
 * the same run, is a plain fold of the session from its first event (what
 * any replay costs); the ratio is what rebuilding the requests adds.
 */
export default async function auditBench(args: string[]): Promise<object> {
  const turns = Number(args[0] ?? 1000)
  const runs = Number(args[1] ?? 3)
  const { store, runtime, sessionId, dir, path } = await setup()
  try {
    const recordStart = performance.now()
    for (let t = 0; t < turns; t++) await turn(runtime, sessionId, 'audit', t)
    const recordMs = performance.now() - recordStart
    await runtime.stop()
    store.close()

    const auditMs: number[] = []
    const foldMs: number[] = []
    let report: Awaited<ReturnType<typeof audit>> | undefined
    for (let r = 0; r < runs; r++) {
      const fresh = openStore(path) // a cold start, as the CLI has
      let t = performance.now()
      report = await audit(sqlitePorts(fresh), 'all')
      auditMs.push(performance.now() - t)
      t = performance.now()
      foldSession(fresh, sessionId)
      foldMs.push(performance.now() - t)
      fresh.close()
    }
    const events = (() => {
      const s = openStore(path)
      const n = s.head()
      s.close()
      return n
    })()
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number
    return {
      turns,
      events,
      steps: report?.steps,
      verified: report?.verified,
      mismatches: report?.mismatches.length,
      recordSeconds: Math.round(recordMs / 100) / 10,
      auditMs: Math.round(med(auditMs)),
      auditRuns: auditMs.map(Math.round),
      foldBaselineMs: Math.round(med(foldMs)),
      ratioToFold: Math.round((med(auditMs) / med(foldMs)) * 100) / 100,
      target: 'auditMs <= 5000',
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
