import { ChronicleError, isChronicleError } from '../../events/errors.js'
import { apply, evolve } from '../../projections/fold/evolve.js'
import { inheritedView } from '../../projections/fold/fold.js'
import { emptyView, type Part } from '../../projections/fold/model.js'
import type { StorePorts } from '../../projections/store-ports.js'
import { attachedHashes, fetchedBlobs, fetchInto } from '../loop/attached-blobs.js'
import { Transcript } from '../loop/transcript.js'
import {
  type CompiledFrom,
  chatOptions,
  digestOfSources,
  readSources,
  sourceBlobs,
  type StepSources,
  type StepStarted,
} from './recorded.js'

/**
 * `chronicle audit` (docs/AUDIT.md): every model step's request rebuilt from
 * the log alone and its digest compared with the `contextDigest` recorded
 * when it was sent. One pass per session: its events are folded once, and
 * the history's digest chain is taken at each version a step was compiled
 * from — O(events), not O(steps × history).
 */

export interface StepMismatch {
  readonly sessionId: string
  readonly seq: number
  readonly step: number
  readonly messageId: string
  readonly recorded: string
  /** the digest rebuilt from the log, when it could be */
  readonly computed?: string
  readonly reason: string
}

export interface AuditReport {
  readonly sessions: number
  /** model steps found */
  readonly steps: number
  /** steps whose rebuilt request has the recorded digest */
  readonly verified: number
  /** steps logged before requests were recorded (no `context` on step.started): nothing to compare */
  readonly unrecorded: number
  readonly mismatches: StepMismatch[]
  readonly ms: number
}

/** Events read per page while a session is walked. */
const PAGE = 2000

export async function audit(
  ports: StorePorts,
  sessions: readonly string[] | 'all',
  options: { progress?: (done: number, total: number) => void } = {},
): Promise<AuditReport> {
  const started = performance.now()
  const ids = sessions === 'all' ? await ports.readModels.sessionIds() : sessions
  for (const id of ids)
    if (!(await ports.readModels.session(id))) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${id}`)
  let steps = 0
  let verified = 0
  let unrecorded = 0
  const mismatches: StepMismatch[] = []
  for (const [i, sessionId] of ids.entries()) {
    const r = await auditSession(ports, sessionId)
    steps += r.steps
    verified += r.verified
    unrecorded += r.unrecorded
    mismatches.push(...r.mismatches)
    options.progress?.(i + 1, ids.length)
  }
  return { sessions: ids.length, steps, verified, unrecorded, mismatches, ms: Math.round(performance.now() - started) }
}

async function auditSession(
  ports: StorePorts,
  sessionId: string,
): Promise<{ steps: number; verified: number; unrecorded: number; mismatches: StepMismatch[] }> {
  const { log, timeTravel } = ports
  const all = (await log.readSessionOfType(sessionId, 'step.started')) as StepStarted[]
  const recorded = all.filter((e) => e.data.context !== undefined)
  const mismatches: StepMismatch[] = []
  const fail = (e: StepStarted, reason: string, computed?: string) =>
    mismatches.push({
      sessionId,
      seq: e.seq,
      step: e.data.step,
      messageId: e.data.messageId,
      recorded: e.data.contextDigest,
      ...(computed !== undefined && { computed }),
      reason,
    })

  // the steps waiting for the history at each version
  const byVersion = new Map<number, { event: StepStarted; sources: StepSources }[]>()
  for (const e of recorded) {
    const from = e.data.context as CompiledFrom
    let sources: StepSources
    try {
      sources = readSources(await fetchedBlobs(log.blobs, sourceBlobs(from)), from)
    } catch (err) {
      fail(e, isChronicleError(err) ? err.message : `its sources cannot be read: ${String(err)}`)
      continue
    }
    if (from.version === undefined) {
      check(e, sources, '') // a compaction's request holds its own messages
      continue
    }
    const list = byVersion.get(from.version) ?? []
    list.push({ event: e, sources })
    byVersion.set(from.version, list)
  }

  function check(e: StepStarted, sources: StepSources, chain: string): void {
    const computed = digestOfSources(sources, e.data.context as CompiledFrom, chain)
    if (computed !== e.data.contextDigest) fail(e, 'the request rebuilt from the log has another digest', computed)
  }

  if (byVersion.size > 0) {
    let view = emptyView()
    let transcript: Transcript | undefined
    // the contents of attached files, fetched as their parts appear: the transcript reads them at once
    const blobs = new Map<string, string>()
    const fetchAttached = (parts: Iterable<Part>) => fetchInto(log.blobs, attachedHashes(parts), blobs)
    const read = (hash: string) => blobs.get(hash)
    let last = 0
    walk: for (let after = 0; ; ) {
      const page = await log.readSession(sessionId, { after, limit: PAGE })
      for (const event of page) {
        if (!transcript) {
          if (event.type === 'session.forked') {
            const inherited = await timeTravel.viewAt(event.data.from.sessionId, event.data.from.seq)
            view = inheritedView(() => inherited, event)
            await fetchAttached(view.parts.values())
          }
          transcript = new Transcript(view, read)
        }
        const changes = evolve(view, event)
        await fetchAttached(changes.parts ?? [])
        apply(view, changes)
        transcript.apply(changes)
        last = event.version
        const waiting = byVersion.get(event.version)
        if (!waiting) continue
        byVersion.delete(event.version)
        for (const { event: step, sources } of waiting) {
          const { chain } = transcript.chat(chatOptions(read, step.data.context as CompiledFrom).accepts)
          check(step, sources, chain)
        }
        if (byVersion.size === 0) break walk
      }
      if (page.length < PAGE) break
      after = (page[page.length - 1] as { seq: number }).seq
    }
    for (const waiting of byVersion.values())
      for (const { event } of waiting)
        fail(event, `it names history version ${(event.data.context as CompiledFrom).version}, past the end (${last})`)
  }
  const verified = recorded.length - mismatches.length
  return { steps: all.length, verified, unrecorded: all.length - recorded.length, mismatches }
}
