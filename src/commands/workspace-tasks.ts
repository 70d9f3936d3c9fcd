import type { ChangedFile, ChronicleEvent, GitHead } from '../events/catalogue.js'
import { ChronicleError, isChronicleError } from '../events/errors.js'
import type { Session } from '../projections/fold/model.js'

/**
 * The ends of the workspace's recorded tasks (docs/TIME-TRAVEL.md): a
 * restore (revert or unrevert) and a fork's materialization. Each ends once:
 * an end for a task that is not open (already ended, by another process or an
 * earlier recovery) is a VERSION_CONFLICT, so nothing is recorded twice.
 */

export type TaskEnd = { readonly ok: true } | { readonly ok: false; readonly error: { code: string; message: string } }

/** What a failure says in a task's end event. */
export function taskError(err: unknown): { code: string; message: string } {
  return {
    code: isChronicleError(err) ? err.code : 'INTERNAL',
    message: err instanceof Error ? err.message : String(err),
  }
}

export function decideRestoreEnd(
  session: Session | undefined,
  restoreId: string,
  end: TaskEnd & { readonly changed?: ChangedFile[] },
): ChronicleEvent[] {
  if (session?.restoring?.restoreId !== restoreId)
    throw new ChronicleError('VERSION_CONFLICT', `restore ${restoreId} is not in progress`)
  return end.ok
    ? [{ type: 'workspace.restore.completed', data: { restoreId, changed: end.changed ?? [] } }]
    : [{ type: 'workspace.restore.failed', data: { restoreId, error: end.error } }]
}

export function decideMaterializeEnd(
  session: Session | undefined,
  end: TaskEnd & { readonly written?: { tree: string; files: number; bytes: number; git?: GitHead } },
): ChronicleEvent[] {
  if (!session?.materializing)
    throw new ChronicleError('VERSION_CONFLICT', `session ${session?.id ?? '?'} has no directory being written`)
  if (!end.ok) return [{ type: 'workspace.materialize.failed', data: { error: end.error } }]
  const written = end.written ?? { tree: session.materializing.tree, files: 0, bytes: 0 }
  return [{ type: 'workspace.materialized', data: written }]
}
