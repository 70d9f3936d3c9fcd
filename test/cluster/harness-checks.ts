import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import type { StoredEvent } from '../../src/events/envelope.js'
import { OWNER_MARKER } from './harness-script.js'

/**
 * What the cluster harness asserts of a session once it is quiet (docs/CLUSTER.md): read from the one
 * PostgreSQL log, the session's directory and the node that owns the session. Each violation is recorded
 * under its counter with a key, so a session checked again in a later iteration is not counted twice.
 */
export const COUNTERS = [
  'lostInputs',
  'duplicateInputs',
  'gaps',
  'staleEpochAppends',
  'overlappingOwners',
  'danglingTools',
  'wsMissed',
  'wsDuplicated',
  'verifyFailures',
  'workspaceMismatches',
  'auditMismatches',
] as const
export type Counter = (typeof COUNTERS)[number]

export class Violations {
  private readonly keys = new Map<Counter, Map<string, string>>(COUNTERS.map((c) => [c, new Map()]))
  /** counts found by whole-log checks (verify, audit, the clients' totals) rather than key by key */
  private readonly totals = new Map<Counter, number>()

  add(counter: Counter, key: string, why: string): void {
    const found = this.keys.get(counter) as Map<string, string>
    if (!found.has(key)) found.set(key, why)
  }

  /** a count from a check that does not name its violations one by one: the larger of it and the keyed ones */
  atLeast(counter: Counter, n: number): void {
    this.totals.set(counter, Math.max(this.totals.get(counter) ?? 0, n))
  }

  count(counter: Counter): number {
    return Math.max(this.keys.get(counter)?.size ?? 0, this.totals.get(counter) ?? 0)
  }

  lines(limit = 50): string[] {
    return [...this.keys].flatMap(([counter, found]) =>
      [...found.values()].slice(0, limit).map((why) => `${counter}: ${why}`),
    )
  }
}

export interface Acked {
  readonly inputId: string
  readonly sessionId: string
  readonly seq: number
}

/** One session's log: inputs once, versions gap-free, epochs never going back, every tool call settled once. */
export function checkSessionLog(
  sessionId: string,
  events: readonly StoredEvent[],
  acked: readonly Acked[],
  v: Violations,
): void {
  const accepted = new Map<string, number>()
  const delivered = new Map<string, number>()
  for (const e of events) {
    if (e.type === 'input.accepted') accepted.set(e.data.inputId, (accepted.get(e.data.inputId) ?? 0) + 1)
    if (e.type === 'input.delivered') delivered.set(e.data.inputId, (delivered.get(e.data.inputId) ?? 0) + 1)
  }
  for (const a of acked) {
    const n = accepted.get(a.inputId) ?? 0
    if (n === 0)
      v.add('lostInputs', a.inputId, `input ${a.inputId} acknowledged at seq ${a.seq} is not in ${sessionId}`)
    else if ((delivered.get(a.inputId) ?? 0) === 0)
      v.add('lostInputs', a.inputId, `input ${a.inputId} acknowledged at seq ${a.seq} was never delivered`)
  }
  for (const [inputId, n] of accepted)
    if (n > 1) v.add('duplicateInputs', `${inputId}/accepted`, `input ${inputId} accepted ${n} times in ${sessionId}`)
  for (const [inputId, n] of delivered)
    if (n > 1) v.add('duplicateInputs', `${inputId}/delivered`, `input ${inputId} delivered ${n} times in ${sessionId}`)

  events.forEach((e, i) => {
    if (e.version !== i + 1)
      v.add('gaps', `${sessionId}/${i + 1}`, `${sessionId}: event ${i + 1} is version ${e.version} (seq ${e.seq})`)
  })

  // An event appended under an epoch older than one already in the log: a deposed owner's write that landed.
  let epoch = 0
  for (const e of events) {
    const at = e.meta.epoch
    if (at === undefined) continue
    if (at < epoch)
      v.add(
        'staleEpochAppends',
        `${sessionId}/${e.seq}`,
        `${sessionId}: ${e.type} at seq ${e.seq} under epoch ${at} after epoch ${epoch}`,
      )
    epoch = Math.max(epoch, at)
  }

  const settled = new Map<string, number>()
  for (const e of events)
    if (e.type === 'tool.completed' || e.type === 'tool.failed')
      settled.set(e.data.partId, (settled.get(e.data.partId) ?? 0) + 1)
  for (const e of events) {
    if (e.type !== 'tool.called') continue
    const n = settled.get(e.data.partId) ?? 0
    if (n !== 1)
      v.add(
        'danglingTools',
        `${sessionId}/${e.data.partId}`,
        `${sessionId}: ${e.data.tool} call ${e.data.partId} (seq ${e.seq}, epoch ${e.meta.epoch}) settled ${n} times`,
      )
  }
}

interface Job {
  readonly node: string
  readonly job: string
  start: number
  end: number
}

/**
 * The bash jobs' owner marker in a session's directory: each job's span, from its first line to its last. Two
 * jobs of different node incarnations that overlap in time ran at once for one session: two owners.
 */
export function checkOwnerMarkers(sessionId: string, dir: string, v: Violations): number {
  const file = join(dir, OWNER_MARKER)
  if (!existsSync(file)) return 0
  const jobs = new Map<string, Job>()
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const [node, job, , ms] = line.split(' ')
    const t = Number(ms)
    if (!node || !job || !Number.isFinite(t)) continue
    const key = `${node} ${job}`
    const found = jobs.get(key)
    if (found) {
      found.start = Math.min(found.start, t)
      found.end = Math.max(found.end, t)
    } else jobs.set(key, { node, job, start: t, end: t })
  }
  const all = [...jobs.values()]
  for (let i = 0; i < all.length; i++)
    for (let j = i + 1; j < all.length; j++) {
      const [a, b] = [all[i] as Job, all[j] as Job]
      if (a.node !== b.node && a.start <= b.end && b.start <= a.end)
        v.add(
          'overlappingOwners',
          `${sessionId}/${a.job}/${b.job}`,
          `${sessionId}: ${a.node}'s job ran ${a.start}–${a.end}, ${b.node}'s ${b.start}–${b.end}`,
        )
    }
  return all.length
}

/** Every file under `dir` (relative path → content). */
export function filesIn(dir: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>()
  const walk = (at: string) => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (entry.isFile()) out.set(relative(dir, path), readFileSync(path))
    }
  }
  if (existsSync(dir)) walk(dir)
  return out
}

/** What a node answers for the session's recorded workspace: its files with their contents, or why it cannot. */
export type RecordedWorkspace = Readable | { readonly unreadable: string; readonly elsewhere?: Readable }
interface Readable {
  readonly files: ReadonlyMap<string, Buffer>
  readonly snapshotSeq: number | null
  /** the node that answered */
  readonly node: string
}

/** The session's directory equals the tree its last `workspace.snapshotted` records, as `recorded` answers it. */
export function checkWorkspace(sessionId: string, dir: string, recorded: RecordedWorkspace, v: Violations): void {
  if ('unreadable' in recorded) {
    const { elsewhere } = recorded
    const there = elsewhere
      ? `; at ${elsewhere.node} the directory ${differences(dir, elsewhere).join('; ') || 'equals it'}`
      : '; no other node can read it either'
    v.add('workspaceMismatches', sessionId, `${sessionId}: its owner cannot: ${recorded.unreadable}${there}`)
    return
  }
  const problems = differences(dir, recorded)
  if (problems.length > 0)
    v.add(
      'workspaceMismatches',
      sessionId,
      `${sessionId}: ${dir} against the snapshot at seq ${recorded.snapshotSeq} (${recorded.node}): ${problems.join('; ')}`,
    )
}

function differences(dir: string, recorded: Readable): string[] {
  const actual = filesIn(dir)
  const problems: string[] = []
  for (const [path, content] of recorded.files) {
    const found = actual.get(path)
    if (!found) problems.push(`${path} recorded, not in the directory`)
    else if (!found.equals(content))
      problems.push(`${path} differs (${found.length} bytes, recorded ${content.length})`)
  }
  for (const path of actual.keys()) if (!recorded.files.has(path)) problems.push(`${path} not recorded`)
  return problems
}
