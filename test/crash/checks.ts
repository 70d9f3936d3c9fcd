import { execFile } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { StoredEvent } from '../../src/events/envelope.js'
import { openStore } from '../../src/projections/open.js'
import { openPostgresStore } from '../../src/projections/postgres/open.js'
import { verifyPostgresAt } from '../../src/projections/postgres/verify.js'
import { postgresPorts, sqlitePorts, type StorePorts } from '../../src/projections/store-ports.js'
import { verify } from '../../src/projections/upkeep/verify.js'
import { NOT_STARTED_BEFORE_RESTART, NOT_STARTED_LEASE_LAPSED } from '../../src/runtime/loop/tool-exec.js'
import { STORE_LOST_MESSAGE } from '../../src/runtime/recovery/outage.js'
import { INTERRUPTED_MESSAGE } from '../../src/runtime/recovery/recovery.js'
import { createShadowStore } from '../../src/runtime/workspace/shadow-store.js'
import { cliArgs } from '../cli/helpers.js'

/**
 * What the harness asserts after the last clean shutdown, reading the store
 * the server ran on — SQLite's file in the data directory, or PostgreSQL —
 * through its ports (the invariants of docs/RECOVERY.md), and the scripted
 * model's request log. Every failed check adds a line to `violations`.
 */

/** The store the server ran on: SQLite's file, or a PostgreSQL database. */
export type CheckedStore = { readonly dbPath: string } | { readonly url: string }

export interface Acked {
  readonly inputId: string
  readonly sessionId: string
  readonly seq: number
}

export interface CheckInput {
  readonly store: CheckedStore
  readonly requestLog: string
  readonly acked: readonly Acked[]
  /** sessions and their directories (bash markers live there) */
  readonly sessions: readonly { readonly id: string; readonly dir: string }[]
}

export interface CheckResult {
  lostInputs: number
  duplicateInputs: number
  gaps: number
  danglingTools: number
  verifyFailures: number
  interruptedTools: number
  interruptedCompactions: number
  requests: number
  resumeRequests: number
  resumedRuns: number
  failedAfterBudget: number
  cancelledRuns: number
  violations: string[]
}

/** The store's ports, every event of its log, and its own checks (verify; SQLite's integrity_check). */
interface Opened {
  readonly ports: Pick<StorePorts, 'log' | 'readModels'>
  readonly events: readonly StoredEvent[]
  /** verify's differences (the first shown), and anything else wrong with the store */
  verify(): Promise<{ differences: number; first?: unknown; problems: string[] }>
  close(): Promise<void>
}

async function openChecked(target: CheckedStore): Promise<Opened> {
  if ('url' in target) {
    const log = await openPostgresStore(target.url)
    const ports = postgresPorts(log)
    return {
      ports,
      events: await everyEvent(ports),
      async verify() {
        const report = await verifyPostgresAt(target.url)
        return { differences: report.differences.length, first: report.differences[0], problems: [] }
      },
      close: () => log.close(),
    }
  }
  const store = openStore(target.dbPath)
  const ports = sqlitePorts(store)
  return {
    ports,
    events: await everyEvent(ports),
    async verify() {
      const report = verify(store)
      const integrity = store.asCommitted.reader().pragma('integrity_check', { simple: true })
      return {
        differences: report.differences.length,
        first: report.differences[0],
        problems: integrity === 'ok' ? [] : [`integrity_check: ${String(integrity)}`],
      }
    },
    close: async () => store.close(),
  }
}

async function everyEvent(ports: Pick<StorePorts, 'log'>): Promise<StoredEvent[]> {
  const all: StoredEvent[] = []
  for (let page = await ports.log.readAll(0, 5000); page.length > 0; ) {
    all.push(...page)
    page = await ports.log.readAll((page.at(-1) as StoredEvent).seq, 5000)
  }
  return all
}

const field = (e: StoredEvent, path: string): unknown =>
  path.split('.').reduce<unknown>((v, k) => (v as Record<string, unknown> | undefined)?.[k], e.data)
const text = (e: StoredEvent, path: string): string | undefined => {
  const v = field(e, path)
  return v === undefined || v === null ? undefined : typeof v === 'string' ? v : JSON.stringify(v)
}

/**
 * What an interrupted call may say: cut off by a restart, or by the store lost under the run, or (on a cluster,
 * test/cluster/harness.ts) not started by a node whose lease on the session ran out.
 */
const INTERRUPTED = [
  'interrupted by a server restart',
  'interrupted while the event store was unavailable',
  NOT_STARTED_LEASE_LAPSED,
]

export async function checkStore(input: CheckInput): Promise<CheckResult> {
  const opened = await openChecked(input.store)
  const { events } = opened
  const r: CheckResult = {
    lostInputs: 0,
    duplicateInputs: 0,
    gaps: 0,
    danglingTools: 0,
    verifyFailures: 0,
    interruptedTools: 0,
    interruptedCompactions: 0,
    requests: 0,
    resumeRequests: 0,
    resumedRuns: 0,
    failedAfterBudget: 0,
    cancelledRuns: 0,
    violations: [],
  }
  const fail = (msg: string) => {
    if (r.violations.length < 50) r.violations.push(msg)
  }
  const ofType = (...types: string[]) => events.filter((e) => types.includes(e.type))
  try {
    // Every acknowledged input exactly once, in its session, at the acknowledged seq.
    const byInput = new Map<string, StoredEvent[]>()
    for (const a of ofType('input.accepted')) {
      const inputId = text(a, 'inputId') as string
      byInput.set(inputId, [...(byInput.get(inputId) ?? []), a])
    }
    for (const [inputId, list] of byInput) {
      if (list.length > 1) {
        r.duplicateInputs += list.length - 1
        fail(`input ${inputId} accepted ${list.length} times`)
      }
    }
    for (const ack of input.acked) {
      const found = byInput.get(ack.inputId)?.find((a) => a.sessionId === ack.sessionId)
      if (!found) {
        r.lostInputs++
        fail(`acknowledged input ${ack.inputId} (seq ${ack.seq}) is not in the log`)
      } else if (found.seq !== ack.seq)
        fail(`input ${ack.inputId} acknowledged at seq ${ack.seq} but stored at ${found.seq}`)
    }

    // seq has no gaps; each session's versions are 1..n.
    const n = events.length
    if (n > 0) {
      const lo = (events[0] as StoredEvent).seq
      const hi = (events.at(-1) as StoredEvent).seq
      if (lo !== 1 || hi - lo + 1 !== n) {
        r.gaps += hi - lo + 1 - n + (lo - 1)
        fail(`seq is not contiguous: ${n} events in ${lo}..${hi}`)
      }
    }
    const versions = new Map<string, { n: number; v: number }>()
    for (const e of events) {
      const s = versions.get(e.sessionId) ?? { n: 0, v: 0 }
      versions.set(e.sessionId, { n: s.n + 1, v: Math.max(s.v, e.version) })
    }
    for (const [s, { n: count, v }] of versions) {
      if (count !== v) {
        r.gaps++
        fail(`session ${s}: ${count} events but version ${v}`)
      }
    }

    // Every tool call: exactly one terminal event; interrupted ones say so.
    const terminals = new Map<string, number>()
    for (const t of ofType('tool.completed', 'tool.failed')) {
      const key = `${t.sessionId}/${text(t, 'partId')}`
      terminals.set(key, (terminals.get(key) ?? 0) + 1)
      if (text(t, 'error.kind') === 'interrupted') {
        r.interruptedTools++
        const message = text(t, 'error.message')
        if (!INTERRUPTED.some((cause) => message?.includes(cause)))
          fail(`tool ${text(t, 'partId')} failed interrupted without saying so: ${message}`)
        if (
          message !== INTERRUPTED_MESSAGE &&
          message !== STORE_LOST_MESSAGE &&
          message !== NOT_STARTED_BEFORE_RESTART &&
          message !== NOT_STARTED_LEASE_LAPSED &&
          !message?.includes('waited for permission')
        )
          fail(`tool ${text(t, 'partId')}: unexpected interrupted message ${message}`)
      }
    }
    for (const started of ofType('tool.input.started')) {
      const count = terminals.get(`${started.sessionId}/${text(started, 'partId')}`) ?? 0
      if (count !== 1) {
        r.danglingTools++
        fail(`tool call ${text(started, 'partId')} in ${started.sessionId} has ${count} terminal events`)
      }
    }

    // Every started compaction ended exactly once (completed, or failed — by recovery when cut off).
    for (const c of ofType('compaction.started')) {
      const id = text(c, 'compactionId')
      const ends = ofType('compaction.completed', 'compaction.failed').filter(
        (t) => t.sessionId === c.sessionId && text(t, 'compactionId') === id,
      )
      r.interruptedCompactions += ends.filter(
        (t) => t.type === 'compaction.failed' && INTERRUPTED.some((cause) => text(t, 'error')?.startsWith(cause)),
      ).length
      if (ends.length !== 1) fail(`compaction ${id} in ${c.sessionId} ended ${ends.length} times`)
    }

    // Runs: one at a time in a session, and every run started ends exactly once (each session ends idle).
    // A fork's child may end the run it inherited at the fork point, which it did not start.
    const ends = new Map<string, number>()
    for (const e of ofType('run.finished')) {
      const key = `${e.sessionId}/${text(e, 'runId')}`
      ends.set(key, (ends.get(key) ?? 0) + 1)
    }
    const tail = (sessionId: string) =>
      events
        .filter((x) => x.sessionId === sessionId)
        .slice(-4)
        .map((x) => `${x.seq} ${x.type}`)
        .join(', ')
    const open = new Map<string, string>()
    for (const e of ofType('session.forked', 'run.started', 'run.resumed', 'run.finished')) {
      const runId = text(e, 'runId') as string
      const current = open.get(e.sessionId)
      if (e.type === 'session.forked' || e.type === 'run.finished') open.delete(e.sessionId)
      else if (e.type === 'run.resumed' && current !== runId)
        fail(`session ${e.sessionId}: run ${runId} resumed at seq ${e.seq} while ${current ?? 'no run'} was open`)
      else if (e.type === 'run.started') {
        if (current) fail(`session ${e.sessionId}: run ${runId} started at seq ${e.seq} while run ${current} was open`)
        open.set(e.sessionId, runId)
        const n = ends.get(`${e.sessionId}/${runId}`) ?? 0
        if (n !== 1)
          fail(`run ${runId} in ${e.sessionId} ended ${n} times; the session's last events: ${tail(e.sessionId)}`)
      }
    }

    // Runs: resumed within budget, cancelled ones never resumed after the cancel.
    r.resumedRuns = ofType('run.resumed').length
    r.failedAfterBudget = ofType('run.finished').filter(
      (e) => text(e, 'error.kind') === 'RESUME_BUDGET_EXHAUSTED',
    ).length
    for (const c of ofType('run.cancel.requested')) {
      r.cancelledRuns++
      const runId = text(c, 'runId')
      const resumed = ofType('run.resumed').filter(
        (e) => e.sessionId === c.sessionId && text(e, 'runId') === runId && e.seq > c.seq,
      ).length
      const finished = ofType('run.finished')
        .filter((e) => e.sessionId === c.sessionId && text(e, 'runId') === runId)
        .map((e) => text(e, 'outcome'))
      if (resumed > 0) fail(`cancelled run ${runId} was resumed`)
      if (finished.length !== 1 || finished[0] !== 'cancelled')
        fail(`cancelled run ${runId} in ${c.sessionId} finished ${JSON.stringify(finished)}`)
    }

    // Every session ends idle: no run, no parked call, nothing left to deliver (unless a cancel parked it).
    const { readModels } = opened.ports
    for (const { id, dir } of input.sessions) {
      const s = await readModels.session(id)
      if (!s) {
        fail(`session ${id} is missing`)
        continue
      }
      if (s.run || s.status !== 'idle') fail(`session ${id} ends ${s.status} with run ${JSON.stringify(s.run)}`)
      if (s.pendingPermissions.length > 0) fail(`session ${id} ends with pending permission requests`)
      if (s.inbox.length > 0 && s.lastRun?.outcome !== 'cancelled') fail(`session ${id} ends with undelivered input`)
      const outcome = s.lastRun?.outcome
      if (
        outcome &&
        outcome !== 'idle' &&
        outcome !== 'cancelled' &&
        outcome !== 'rejected' && // a person's plain reject ends the run (the harness rejects some asks)
        !(outcome === 'failed' && s.lastRun?.error?.kind === 'RESUME_BUDGET_EXHAUSTED')
      ) {
        fail(`session ${id}: last run ended ${outcome} ${JSON.stringify(s.lastRun?.error)}`)
      }
      // A completed bash call ran to the end, so its marker line exists (at least once) — unless a revert took
      // the files back to before its end: to before its message (marked reverted then), or to an event while it
      // ran (its message stays, its write is undone: the files at that event had no line yet).
      const view = await readModels.view(id)
      const mine = events.filter((e) => e.sessionId === id)
      const completedAt = new Map(
        mine.filter((e) => e.type === 'tool.completed').map((e) => [text(e, 'partId') as string, e.seq]),
      )
      const reverts = mine
        .filter((e) => e.type === 'workspace.restore.started' && text(e, 'kind') === 'revert')
        .flatMap((started) =>
          mine
            .filter(
              (c) => c.type === 'workspace.restore.completed' && text(c, 'restoreId') === text(started, 'restoreId'),
            )
            .map((c) => ({ to: Number(field(started, 'to')), done: c.seq })),
        )
      const undone = (seq: number) => reverts.some((rv) => rv.to < seq && seq < rv.done)
      const completedJobs = [...view.parts.values()].filter(
        (p) =>
          p.type === 'tool' &&
          p.state === 'completed' &&
          JSON.stringify(p.input ?? '').includes('work.marker') &&
          !view.messages.get(p.messageId)?.reverted &&
          !undone(completedAt.get(p.id) ?? 0),
      ).length
      const marker = join(dir, 'work.marker')
      const lines = existsSync(marker) ? readFileSync(marker, 'utf8').split('\n').filter(Boolean).length : 0
      if (lines < completedJobs) fail(`session ${id}: ${completedJobs} completed jobs but ${lines} marker lines`)
    }

    // Read models equal a fresh fold; the store is intact.
    const report = await opened.verify()
    r.verifyFailures = report.differences + report.problems.length
    if (report.differences > 0)
      fail(`verify: ${report.differences} differences, first ${describeDifference(report.first)}`)
    for (const problem of report.problems) fail(problem)
  } finally {
    await opened.close()
  }

  // What the model received: every call paired with exactly one result, no orphan results.
  if (existsSync(input.requestLog)) {
    for (const line of readFileSync(input.requestLog, 'utf8').split('\n')) {
      if (!line.trim()) continue
      let entry: { prompt: PromptMessage[] }
      try {
        entry = JSON.parse(line) as { prompt: PromptMessage[] }
      } catch {
        continue // the last line may be torn by the kill
      }
      r.requests++
      const problem = pairingProblem(entry.prompt)
      if (problem) {
        r.danglingTools++
        fail(`model request ${r.requests}: ${problem}`)
      }
      if (
        entry.prompt.some(
          (m) =>
            m.role === 'tool' && m.content.some((c) => INTERRUPTED.some((cause) => JSON.stringify(c).includes(cause))),
        )
      ) {
        r.resumeRequests++
      }
    }
  }
  return r
}

interface PromptMessage {
  readonly role: string
  readonly content: { readonly type: string; readonly toolCallId?: string }[]
}

/** Providers' rule: each assistant tool call is answered in the very next tool message, once; no result without a call. */
export function pairingProblem(prompt: readonly PromptMessage[]): string | undefined {
  for (let i = 0; i < prompt.length; i++) {
    const m = prompt[i] as PromptMessage
    if (m.role === 'tool') {
      const prev = prompt[i - 1]
      const calls = new Set(
        prev?.role === 'assistant' ? prev.content.filter((c) => c.type === 'tool-call').map((c) => c.toolCallId) : [],
      )
      for (const c of m.content)
        if (c.type === 'tool-result' && !calls.has(c.toolCallId)) return `orphan result ${c.toolCallId}`
      continue
    }
    if (m.role !== 'assistant') continue
    const calls = m.content.filter((c) => c.type === 'tool-call').map((c) => c.toolCallId)
    if (calls.length === 0) continue
    const next = prompt[i + 1]
    const results =
      next?.role === 'tool' ? next.content.filter((c) => c.type === 'tool-result').map((c) => c.toolCallId) : []
    for (const id of calls) {
      const n = results.filter((x) => x === id).length
      if (n !== 1) return `call ${id} has ${n} results`
    }
  }
  return undefined
}

/**
 * The files agree with the log: every session directory equals the tree its
 * read model records last (a revert or a fork's directory cut off by a kill
 * was finished or rolled back on restart), and no workspace task is left
 * open. Each session that does not is one mismatch.
 */
export async function checkWorkspaces(
  target: CheckedStore,
  sessions: readonly { readonly id: string; readonly dir: string }[],
  scratch: string,
): Promise<{
  workspaceMismatches: number
  workspaceTasks: number
  workspaceTasksRecovered: number
  violations: string[]
}> {
  const opened = await openChecked(target)
  // a store of its own: trees are content ids, so its snapshot of a directory names the same tree
  const shadow = createShadowStore({ root: scratch, globalExcludes: null })
  const out = { workspaceMismatches: 0, workspaceTasks: 0, workspaceTasksRecovered: 0, violations: [] as string[] }
  try {
    const { events } = opened
    out.workspaceTasks = events.filter(
      (e) => e.type === 'workspace.restore.started' || e.type === 'workspace.materialize.started',
    ).length
    // tasks a kill cut off, which the restart finished (or rolled back)
    const ends = [
      'workspace.restore.completed',
      'workspace.restore.failed',
      'workspace.materialized',
      'workspace.materialize.failed',
    ]
    out.workspaceTasksRecovered = events.filter((e) => ends.includes(e.type) && e.meta.actor === 'recovery').length
    for (const { id, dir } of sessions) {
      const session = await opened.ports.readModels.session(id)
      if (!session) continue
      if (session.restoring || session.materializing) {
        out.workspaceMismatches++
        out.violations.push(`session ${id}: a workspace task is still open after the last restart`)
        continue
      }
      if (!session.workspace) continue
      const found = await shadow.snapshot(dir).then(
        (s) => s.tree,
        (err: unknown) => `unreadable (${String(err)})`,
      )
      if (found !== session.workspace.tree) {
        out.workspaceMismatches++
        out.violations.push(`session ${id}: ${dir} is ${found}, the log says ${session.workspace.tree}`)
      }
    }
  } finally {
    await opened.close()
  }
  return out
}

/**
 * `chronicle audit --all`, the real command, on the final data dir: every
 * model step's request rebuilt from the log has the digest recorded when it
 * was sent — across kills, resumed runs, compactions, reverts and forks.
 */
export async function auditDataDir(
  dataDir: string,
  /** the PostgreSQL database the server ran on, if it did: audit reads it there */
  databaseUrl?: string,
): Promise<{ auditMismatches: number; auditedSteps: number; violations: string[] }> {
  const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>(
    (resolve) => {
      const child = execFile(
        process.execPath,
        cliArgs(['audit', '--all']),
        {
          env: {
            PATH: process.env.PATH ?? '',
            HOME: process.env.HOME ?? '/tmp',
            CHRONICLE_CLI: '1',
            CHRONICLE_DATA_DIR: dataDir,
            ...(databaseUrl && { CHRONICLE_DATABASE_URL: databaseUrl }),
          },
        },
        (err, out, errOut) => resolve({ code: err ? (child.exitCode ?? 1) : 0, stdout: out, stderr: errOut }),
      )
    },
  )
  const summary = stdout.match(/(\d+) model steps: (\d+) verified, (\d+) mismatches/)
  if (!summary) return { auditMismatches: 1, auditedSteps: 0, violations: [`audit failed (exit ${code}): ${stderr}`] }
  const mismatches = Number(summary[3])
  const violations = stdout.split('\n').filter((l) => l.startsWith('MISMATCH'))
  if (code !== (mismatches === 0 ? 0 : 1)) violations.push(`audit exited ${code} with ${mismatches} mismatches`)
  return { auditMismatches: mismatches, auditedSteps: Number(summary[2]), violations }
}

/** A verify difference as a line: which entity, and only the fields where the stored read model and the fold part. */
function describeDifference(first: unknown): string {
  const d = first as
    | { sessionId?: string; entity?: string; id?: string; stored?: unknown; expected?: unknown }
    | undefined
  if (!d) return 'none'
  const stored = (d.stored ?? {}) as Record<string, unknown>
  const expected = (d.expected ?? {}) as Record<string, unknown>
  const fields = [...new Set([...Object.keys(stored), ...Object.keys(expected)])]
    .filter((k) => JSON.stringify(stored[k]) !== JSON.stringify(expected[k]))
    .map(
      (k) =>
        `${k}: stored ${JSON.stringify(stored[k])?.slice(0, 400)}, folded ${JSON.stringify(expected[k])?.slice(0, 400)}`,
    )
  const missing = d.stored === undefined ? ' (not stored)' : d.expected === undefined ? ' (not in the fold)' : ''
  return `${d.entity} ${d.id} of ${d.sessionId}${missing}: ${fields.join('; ')}`
}
