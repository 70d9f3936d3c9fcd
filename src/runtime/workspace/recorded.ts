import type { DataOf, GitHead } from '../../events/catalogue.js'
import type { StoredEvent } from '../../events/envelope.js'
import { ChronicleError } from '../../events/errors.js'
import type { EventLog } from '../../events/log.js'
import type { Session } from '../../projections/fold/model.js'
import type { ReadModels } from '../../projections/read-models.js'

/**
 * What the log recorded of a session and its workspace, read through the
 * store's ports (docs/ARCHITECTURE.md "The store port"), so revert, fork
 * and the workspace history run on either engine.
 */

/** The session's read model; SESSION_NOT_FOUND when there is none. */
export async function requireSession(readModels: ReadModels, sessionId: string): Promise<Session> {
  const session = await readModels.session(sessionId)
  if (!session) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
  return session
}

/**
 * A session's own events after a seq, in pages by seq: a long session is
 * never read whole at once. Pages grow from `first` to `most` events, so a
 * reader that stops early (the first snapshot is among a session's first
 * events) reads little.
 */
export async function* sessionEvents(
  log: EventLog,
  sessionId: string,
  { after = 0, first = 64, most = 1000 }: { after?: number; first?: number; most?: number } = {},
): AsyncGenerator<StoredEvent> {
  let cursor = after
  for (let limit = first; ; limit = Math.min(limit * 4, most)) {
    const page = await log.readSession(sessionId, { after: cursor, limit })
    yield* page
    if (page.length < limit) return
    cursor = (page[page.length - 1] as StoredEvent).seq
  }
}

/**
 * The session's first recorded snapshot: its baseline, taken as its first
 * step began. Before it the agent had changed nothing, so it stands for the
 * files at any earlier seq.
 */
export async function firstSnapshot(
  log: EventLog,
  sessionId: string,
): Promise<{ tree: string; seq: number; large?: DataOf<'workspace.snapshotted'>['large']; git?: GitHead } | undefined> {
  for await (const event of sessionEvents(log, sessionId)) {
    if (event.type !== 'workspace.snapshotted') continue
    const { tree, large, git } = event.data as DataOf<'workspace.snapshotted'>
    return { tree, seq: event.seq, ...(large && large.length > 0 && { large }), ...(git && { git }) }
  }
  return undefined
}
