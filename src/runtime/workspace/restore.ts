import { existsSync } from 'node:fs'
import type { ChangedFile, ChronicleEvent, DataOf, GitHead } from '../../events/catalogue.js'
import { ChronicleError } from '../../events/errors.js'
import type { EventMeta } from '../../events/envelope.js'
import type { IdSource } from '../../events/ids.js'
import { execute } from '../../commands/execute.js'
import { decideRestoreEnd, taskError } from '../../commands/workspace-tasks.js'
import { assertWritable } from '../../commands/read-only.js'
import type { Session } from '../../projections/fold/model.js'
import type { StorePorts } from '../../projections/store-ports.js'
import { firstSnapshot, requireSession, sessionEvents } from './recorded.js'
import { findRepository } from './repository.js'
import type { ShadowStore } from './shadow-store.js'

/**
 * Revert and unrevert (docs/TIME-TRAVEL.md "Revert"): the session directory
 * brought back to the workspace at a seq, and back again.
 *
 * A revert first records the directory as it is (`workspace.snapshotted`,
 * reason `revert`), refuses with WORKSPACE_CONFLICT if it would overwrite a
 * file changed outside the agent since the target point (unless `force`),
 * then runs as a recorded task: `workspace.restore.started` → the files
 * restored → `workspace.restore.completed` (or `.failed`, the directory put
 * back). Messages created after the target point are hidden from the model
 * (they stay in the log). An unrevert restores what the revert replaced and
 * shows them again; a new input makes the revert final. A crash between
 * started and completed is finished on restart by `recover`: restoring a
 * tree is idempotent, so the directory ends equal to the recorded tree.
 */

export interface RestoreOptions {
  /** overwrite files changed outside the agent */
  readonly force?: boolean
  /** who asked, for the events' meta (docs/EVENTS.md "The envelope") */
  readonly by?: Partial<Pick<EventMeta, 'by' | 'connection' | 'commandId'>>
}

export interface Restored {
  readonly restoreId: string
  readonly kind: 'revert' | 'unrevert'
  /** the tree the directory now equals */
  readonly tree: string
  readonly changed: ChangedFile[]
  /** revert: the messages hidden from the model; unrevert: those shown again */
  readonly messages: readonly string[]
}

export interface WorkspaceRestorer {
  revert(sessionId: string, to: number, options?: RestoreOptions): Promise<Restored>
  unrevert(sessionId: string, options?: RestoreOptions): Promise<Restored>
  /** finishes every restore a crash interrupted; returns how many */
  /** `among`: only these sessions (a cluster node's claimed ones: docs/CLUSTER.md) */
  recover(among?: ReadonlySet<string>): Promise<number>
  /**
   * (cluster, docs/CLUSTER.md "Workspaces that move") A session this node just claimed, whose run a dead node
   * left open: its directory is made its last recorded tree before the run resumes — what the cut-off step
   * changed since is put aside, as its tools are settled interrupted — recorded as a restore (`handover`),
   * the directory as found recorded first. False when there is nothing to do: no open run, no recorded tree,
   * no directory here, or the directory is the recorded tree.
   */
  handover(sessionId: string): Promise<boolean>
}

export interface WorkspaceRestorerDeps {
  /** what a restore reads the session and its past through, and its start and end append through */
  readonly ports: StorePorts
  readonly shadow: ShadowStore
  readonly ids: IdSource
  readonly log?: { warn(obj: object, msg?: string): void }
}

const COMMAND_META = (command: string) => ({ actor: 'user' as const, command })
const RECOVERY_META = { actor: 'recovery' as const }

export function createWorkspaceRestorer(deps: WorkspaceRestorerDeps): WorkspaceRestorer {
  const { ports, shadow } = deps
  /** sessions with a revert or unrevert under way in this process (before its start is recorded, too) */
  const working = new Set<string>()
  const exclusive = async <T>(sessionId: string, work: () => Promise<T>): Promise<T> => {
    if (working.has(sessionId))
      throw new ChronicleError('SESSION_BUSY', `session ${sessionId} is busy: a revert is in progress`, { sessionId })
    working.add(sessionId)
    try {
      return await work()
    } finally {
      working.delete(sessionId)
    }
  }

  /** The snapshot taken as a restore begins, with what changed since the session's recorded tree (made outside the agent). */
  async function current(session: Session): Promise<{ tree: string; outside: ChangedFile[]; git?: GitHead }> {
    const [snapshot, repository] = await Promise.all([
      shadow.snapshot(session.directory),
      findRepository(session.directory),
    ])
    const git = repository?.head
    const recorded = session.workspace?.tree
    if (!recorded || recorded === snapshot.tree) return { tree: snapshot.tree, outside: [], ...(git && { git }) }
    const outside =
      snapshot.previous === recorded ? snapshot.changed : (await shadow.diff(recorded, snapshot.tree)).files
    return { tree: snapshot.tree, outside, ...(git && { git }) }
  }

  /**
   * Appends the pre-restore snapshot and the task's start, re-checking in the
   * same append that nothing started meanwhile (a run, another restore).
   */
  function start(
    sessionId: string,
    now: { tree: string; outside: ChangedFile[]; git?: GitHead },
    data: DataOf<'workspace.restore.started'>,
    by?: RestoreOptions['by'],
  ): Promise<unknown> {
    return execute(
      ports,
      sessionId,
      (session) => {
        if (!session) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
        assertIdle(session)
        const events: ChronicleEvent[] = []
        if (session.workspace?.tree !== now.tree)
          events.push({
            type: 'workspace.snapshotted',
            data: { tree: now.tree, reason: 'revert', changed: now.outside, ...(now.git && { git: now.git }) },
          })
        events.push({ type: 'workspace.restore.started', data })
        return events
      },
      { durability: 'full', meta: { ...COMMAND_META(data.kind), ...by } },
    )
  }

  /** Restores the tree and records the outcome; a failure puts the directory back to `from` and is rethrown. */
  async function finish(
    session: Session,
    data: DataOf<'workspace.restore.started'>,
    meta: EventMeta = COMMAND_META(data.kind),
  ): Promise<ChangedFile[]> {
    const end = (result: Parameters<typeof decideRestoreEnd>[2]) =>
      execute(ports, session.id, (now) => decideRestoreEnd(now, data.restoreId, result), { meta, durability: 'full' })
    let changed: ChangedFile[]
    try {
      await shadow.restore(session.directory, data.tree)
      changed = (await shadow.diff(data.from, data.tree)).files
    } catch (err) {
      await shadow.restore(session.directory, data.from).catch((rollback: unknown) => {
        deps.log?.warn(
          { err: rollback, sessionId: session.id },
          'the directory could not be put back after a failed restore',
        )
      })
      await end({ ok: false, error: taskError(err) })
      throw err
    }
    await end({ ok: true, changed })
    return changed
  }

  async function revert(sessionId: string, to: number, options: RestoreOptions): Promise<Restored> {
    const session = await requireSession(ports.readModels, sessionId)
    assertWritable(session)
    assertIdle(session)
    const past = await ports.timeTravel.viewAt(sessionId, to) // SEQ_OUT_OF_RANGE, or a seq of another session
    const target = past.session?.workspace?.tree ?? (await firstSnapshot(ports.log, sessionId))?.tree
    if (!target)
      throw new ChronicleError(
        'NO_WORKSPACE_HISTORY',
        `session ${sessionId} has no recorded workspace to revert to (no step has run, or snapshots are off)`,
      )
    const now = await ports.readModels.view(sessionId)
    const hidden = [...now.messages.values()]
      .filter((m) => {
        const then = past.messages.get(m.id)
        // created after the point, or an answer still being written at it
        return !then || (then.role === 'assistant' && then.completedAt === undefined)
      })
      .map((m) => m.id)
    const summary = session.compaction?.applied?.summaryMessageId
    if (summary && hidden.includes(summary))
      throw new ChronicleError(
        'REVERT_BEFORE_COMPACTION',
        `seq ${to} is before the session's latest compaction: the model's context starts at its summary`,
        { to },
      )

    const here = await current(session)
    const { files: restoring } = await shadow.diff(here.tree, target)
    if (!options.force) {
      const touched = new Set(restoring.map((f) => f.path))
      const outside = new Set([...(await changedOutside(ports, sessionId, to)), ...here.outside.map((f) => f.path)])
      const files = [...outside].filter((path) => touched.has(path)).sort()
      if (files.length > 0)
        throw new ChronicleError(
          'WORKSPACE_CONFLICT',
          `the revert would overwrite files changed outside the agent since seq ${to}: ${files.join(', ')} (force to overwrite)`,
          { files },
        )
    }
    const data: DataOf<'workspace.restore.started'> = {
      restoreId: deps.ids.next('rst'),
      kind: 'revert',
      to,
      from: here.tree,
      tree: target,
      messages: hidden,
      ...(options.force && { force: true as const }),
    }
    await start(sessionId, here, data, options.by)
    const changed = await finish(session, data, { ...COMMAND_META(data.kind), ...options.by })
    return { restoreId: data.restoreId, kind: 'revert', tree: target, changed, messages: hidden }
  }

  async function unrevert(sessionId: string, options: RestoreOptions): Promise<Restored> {
    const session = await requireSession(ports.readModels, sessionId)
    assertWritable(session)
    assertIdle(session)
    const revert = session.revert
    if (!revert)
      throw new ChronicleError(
        'NOTHING_TO_UNREVERT',
        `session ${sessionId} has no revert to undo (none was made, or an input since made it final)`,
      )
    const here = await current(session)
    const { files: restoring } = await shadow.diff(here.tree, revert.from)
    if (!options.force) {
      const touched = new Set(restoring.map((f) => f.path))
      const files = here.outside
        .map((f) => f.path)
        .filter((path) => touched.has(path))
        .sort()
      if (files.length > 0)
        throw new ChronicleError(
          'WORKSPACE_CONFLICT',
          `the unrevert would overwrite files changed since the revert: ${files.join(', ')} (force to overwrite)`,
          { files },
        )
    }
    const data: DataOf<'workspace.restore.started'> = {
      restoreId: deps.ids.next('rst'),
      kind: 'unrevert',
      from: here.tree,
      tree: revert.from,
      messages: [...revert.messages],
      ...(options.force && { force: true as const }),
    }
    await start(sessionId, here, data, options.by)
    const changed = await finish(session, data, { ...COMMAND_META(data.kind), ...options.by })
    return { restoreId: data.restoreId, kind: 'unrevert', tree: revert.from, changed, messages: revert.messages }
  }

  async function handover(sessionId: string): Promise<boolean> {
    const session = await requireSession(ports.readModels, sessionId)
    const recorded = session.workspace?.tree
    if (!session.run || !recorded || session.restoring || session.materializing) return false
    if (!existsSync(session.directory)) return false // its tools say so (WORKSPACE_MISSING); nothing is made up
    const here = await current(session)
    if (here.tree === recorded) return false
    const data: DataOf<'workspace.restore.started'> = {
      restoreId: deps.ids.next('rst'),
      kind: 'handover',
      from: here.tree,
      tree: recorded,
      messages: [],
    }
    const { events } = await execute(
      ports,
      sessionId,
      (now) => {
        if (!now || now.restoring || now.workspace?.tree !== recorded) return [] // decided again: another's turn
        return [
          {
            type: 'workspace.snapshotted',
            data: { tree: here.tree, reason: 'recovery', changed: here.outside, ...(here.git && { git: here.git }) },
          },
          { type: 'workspace.restore.started', data },
        ]
      },
      { durability: 'full', meta: RECOVERY_META },
    )
    if (events.length === 0) return false
    await finish(session, data, RECOVERY_META)
    return true
  }

  return {
    handover: (sessionId) => exclusive(sessionId, () => handover(sessionId)),
    revert: (sessionId, to, options = {}) => exclusive(sessionId, () => revert(sessionId, to, options)),
    unrevert: (sessionId, options = {}) => exclusive(sessionId, () => unrevert(sessionId, options)),

    async recover(among) {
      let finished = 0
      for (const session of await interrupted(ports)) {
        if (among && !among.has(session.id)) continue
        const data = session.restoring as DataOf<'workspace.restore.started'>
        // restoring a tree is idempotent: whatever the crash left, the directory ends equal to it (or back at `from`)
        await finish(session, data, RECOVERY_META).catch((err: unknown) => {
          deps.log?.warn({ err, sessionId: session.id }, 'an interrupted restore could not be completed; rolled back')
        })
        finished++
      }
      return finished
    },
  }
}

/** SESSION_BUSY unless nothing is going on in the session: no run, no queued input, no restore or materialization. */
export function assertIdle(session: Session): void {
  const busy = session.run
    ? 'a run is in progress'
    : session.inbox.length > 0
      ? 'an input is waiting to run'
      : session.restoring
        ? 'a revert is in progress'
        : session.materializing
          ? 'its directory is still being written'
          : undefined
  if (busy)
    throw new ChronicleError('SESSION_BUSY', `session ${session.id} is busy: ${busy}`, { sessionId: session.id })
}

/** Paths changed outside the agent after seq `to`: what snapshots other than a tool's found changed. */
async function changedOutside(ports: Pick<StorePorts, 'log'>, sessionId: string, to: number): Promise<string[]> {
  const paths: string[] = []
  for await (const event of sessionEvents(ports.log, sessionId, { after: to, first: 1000 })) {
    if (event.type !== 'workspace.snapshotted') continue
    const data = event.data as DataOf<'workspace.snapshotted'>
    if (data.reason !== 'tool') paths.push(...data.changed.map((f) => f.path))
  }
  return paths
}

/** Sessions whose restore a crash interrupted. */
async function interrupted(ports: Pick<StorePorts, 'readModels'>): Promise<Session[]> {
  const sessions = await Promise.all(
    (await ports.readModels.sessionsWithWorkspaceTask()).map((id) => requireSession(ports.readModels, id)),
  )
  return sessions.filter((session) => session.restoring !== undefined)
}
