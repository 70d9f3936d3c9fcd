import { execFile } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { openStore } from '../../src/projections/open.js'
import { getSession, loadView } from '../../src/projections/queries/read-model.js'
import { verify } from '../../src/projections/upkeep/verify.js'
import { NOT_STARTED_BEFORE_RESTART } from '../../src/runtime/loop/tool-exec.js'
import { INTERRUPTED_MESSAGE } from '../../src/runtime/recovery/recovery.js'
import { createShadowStore } from '../../src/runtime/workspace/shadow-store.js'
import { cliArgs } from '../cli/helpers.js'

/**
 * What the harness asserts after the last clean shutdown, reading the data
 * directory directly (the invariants of docs/RECOVERY.md) and the scripted model's request
 * log. Every failed check adds a line to `violations`.
 */

export interface Acked {
  readonly inputId: string
  readonly sessionId: string
  readonly seq: number
}

export interface CheckInput {
  readonly dbPath: string
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

export function checkDataDir(input: CheckInput): CheckResult {
  const store = openStore(input.dbPath)
  const db = store.asCommitted.reader()
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
  try {
    // Every acknowledged input exactly once, in its session, at the acknowledged seq.
    const accepted = db
      .prepare(
        "SELECT seq, session_id AS sessionId, data ->> '$.inputId' AS inputId FROM events WHERE type = 'input.accepted'",
      )
      .all() as { seq: number; sessionId: string; inputId: string }[]
    const byInput = new Map<string, typeof accepted>()
    for (const a of accepted) byInput.set(a.inputId, [...(byInput.get(a.inputId) ?? []), a])
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
    const span = db.prepare('SELECT COUNT(*) AS n, MIN(seq) AS lo, MAX(seq) AS hi FROM events').get() as {
      n: number
      lo: number
      hi: number
    }
    if (span.n > 0 && (span.lo !== 1 || span.hi - span.lo + 1 !== span.n)) {
      r.gaps += span.hi - span.lo + 1 - span.n + (span.lo - 1)
      fail(`seq is not contiguous: ${span.n} events in ${span.lo}..${span.hi}`)
    }
    for (const row of db
      .prepare('SELECT session_id AS s, COUNT(*) AS n, MAX(version) AS v FROM events GROUP BY session_id')
      .all() as {
      s: string
      n: number
      v: number
    }[]) {
      if (row.n !== row.v) {
        r.gaps++
        fail(`session ${row.s}: ${row.n} events but version ${row.v}`)
      }
    }

    // Every tool call: exactly one terminal event; interrupted ones say so.
    const started = db
      .prepare("SELECT session_id AS s, data ->> '$.partId' AS p FROM events WHERE type = 'tool.input.started'")
      .all() as { s: string; p: string }[]
    const terminals = new Map<string, number>()
    for (const t of db
      .prepare(
        "SELECT session_id AS s, data ->> '$.partId' AS p, type, data ->> '$.error.kind' AS kind, data ->> '$.error.message' AS message FROM events WHERE type IN ('tool.completed', 'tool.failed')",
      )
      .all() as { s: string; p: string; type: string; kind: string | null; message: string | null }[]) {
      terminals.set(`${t.s}/${t.p}`, (terminals.get(`${t.s}/${t.p}`) ?? 0) + 1)
      if (t.kind === 'interrupted') {
        r.interruptedTools++
        if (!t.message?.includes('interrupted by a server restart'))
          fail(`tool ${t.p} failed interrupted without saying so: ${t.message}`)
        if (
          t.message !== INTERRUPTED_MESSAGE &&
          t.message !== NOT_STARTED_BEFORE_RESTART &&
          !t.message?.includes('waited for permission')
        )
          fail(`tool ${t.p}: unexpected interrupted message ${t.message}`)
      }
    }
    for (const { s, p } of started) {
      const n = terminals.get(`${s}/${p}`) ?? 0
      if (n !== 1) {
        r.danglingTools++
        fail(`tool call ${p} in ${s} has ${n} terminal events`)
      }
    }

    // Every started compaction ended exactly once (completed, or failed — by recovery when cut off).
    for (const c of db
      .prepare(
        `SELECT s.session_id AS s, s.data ->> '$.compactionId' AS id,
           (SELECT COUNT(*) FROM events t WHERE t.session_id = s.session_id AND t.type IN ('compaction.completed', 'compaction.failed')
              AND t.data ->> '$.compactionId' = s.data ->> '$.compactionId') AS ends,
           (SELECT COUNT(*) FROM events t WHERE t.session_id = s.session_id AND t.type = 'compaction.failed' AND t.data ->> '$.error' LIKE 'interrupted by a server restart%'
              AND t.data ->> '$.compactionId' = s.data ->> '$.compactionId') AS interrupted
         FROM events s WHERE s.type = 'compaction.started'`,
      )
      .all() as { s: string; id: string; ends: number; interrupted: number }[]) {
      r.interruptedCompactions += c.interrupted
      if (c.ends !== 1) fail(`compaction ${c.id} in ${c.s} ended ${c.ends} times`)
    }

    // Runs: resumed within budget, cancelled ones never resumed after the cancel.
    r.resumedRuns = (db.prepare("SELECT COUNT(*) FROM events WHERE type = 'run.resumed'").pluck().get() as number) ?? 0
    r.failedAfterBudget = db
      .prepare(
        "SELECT COUNT(*) FROM events WHERE type = 'run.finished' AND data ->> '$.error.kind' = 'RESUME_BUDGET_EXHAUSTED'",
      )
      .pluck()
      .get() as number
    for (const c of db
      .prepare(
        "SELECT seq, session_id AS s, data ->> '$.runId' AS runId FROM events WHERE type = 'run.cancel.requested'",
      )
      .all() as { seq: number; s: string; runId: string }[]) {
      r.cancelledRuns++
      const resumed = db
        .prepare(
          "SELECT COUNT(*) FROM events WHERE session_id = ? AND type = 'run.resumed' AND data ->> '$.runId' = ? AND seq > ?",
        )
        .pluck()
        .get(c.s, c.runId, c.seq) as number
      const finished = db
        .prepare(
          "SELECT data ->> '$.outcome' FROM events WHERE session_id = ? AND type = 'run.finished' AND data ->> '$.runId' = ?",
        )
        .pluck()
        .all(c.s, c.runId) as string[]
      if (resumed > 0) fail(`cancelled run ${c.runId} was resumed`)
      if (finished.length !== 1 || finished[0] !== 'cancelled')
        fail(`cancelled run ${c.runId} finished ${JSON.stringify(finished)}`)
    }

    // Every session ends idle: no run, no parked call, nothing left to deliver (unless a cancel parked it).
    for (const { id, dir } of input.sessions) {
      const s = getSession({ reader: () => db }, id)
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
      const view = loadView({ reader: () => db }, id)
      const completedAt = new Map(
        (
          db
            .prepare(
              "SELECT seq, data ->> '$.partId' AS part FROM events WHERE session_id = ? AND type = 'tool.completed'",
            )
            .all(id) as { seq: number; part: string }[]
        ).map((r) => [r.part, r.seq]),
      )
      const reverts = db
        .prepare(
          `SELECT s.data ->> '$.to' AS "to", c.seq AS done FROM events s JOIN events c ON c.session_id = s.session_id
             AND c.type = 'workspace.restore.completed' AND c.data ->> '$.restoreId' = s.data ->> '$.restoreId'
           WHERE s.session_id = ? AND s.type = 'workspace.restore.started' AND s.data ->> '$.kind' = 'revert'`,
        )
        .all(id) as { to: number; done: number }[]
      const undone = (seq: number) => reverts.some((r) => r.to < seq && seq < r.done)
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

    // Read models equal a fresh fold; the file is intact.
    const report = verify(store)
    r.verifyFailures = report.differences.length
    if (report.differences.length > 0)
      fail(
        `verify: ${report.differences.length} differences, first ${JSON.stringify(report.differences[0]).slice(0, 300)}`,
      )
    const integrity = db.pragma('integrity_check', { simple: true })
    if (integrity !== 'ok') {
      r.verifyFailures++
      fail(`integrity_check: ${String(integrity)}`)
    }
  } finally {
    store.close()
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
            m.role === 'tool' && m.content.some((c) => JSON.stringify(c).includes('interrupted by a server restart')),
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
  dbPath: string,
  sessions: readonly { readonly id: string; readonly dir: string }[],
  scratch: string,
): Promise<{
  workspaceMismatches: number
  workspaceTasks: number
  workspaceTasksRecovered: number
  violations: string[]
}> {
  const store = openStore(dbPath)
  // a store of its own: trees are content ids, so its snapshot of a directory names the same tree
  const shadow = createShadowStore({ root: scratch, globalExcludes: null })
  const out = { workspaceMismatches: 0, workspaceTasks: 0, workspaceTasksRecovered: 0, violations: [] as string[] }
  try {
    out.workspaceTasks = (
      store.asCommitted
        .reader()
        .prepare(
          "SELECT COUNT(*) AS n FROM events WHERE type IN ('workspace.restore.started', 'workspace.materialize.started')",
        )
        .get() as { n: number }
    ).n
    // tasks a kill cut off, which the restart finished (or rolled back)
    out.workspaceTasksRecovered = (
      store.asCommitted
        .reader()
        .prepare(
          "SELECT COUNT(*) AS n FROM events WHERE type IN ('workspace.restore.completed', 'workspace.restore.failed', 'workspace.materialized', 'workspace.materialize.failed') AND meta ->> '$.actor' = 'recovery'",
        )
        .get() as { n: number }
    ).n
    for (const { id, dir } of sessions) {
      const session = getSession(store, id)
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
    store.close()
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
