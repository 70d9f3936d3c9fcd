import { ChronicleError } from '../events/errors.js'
import type { Session } from '../projections/fold/model.js'

/**
 * An imported session (Session.imported, set by `session.imported`) is history
 * to read, replay and fork — never to act on: its rules, approvals, inbox and
 * unfinished run came from a file, not from this store's user. Every command
 * that would append to it is refused with SESSION_READ_ONLY; the runtime never
 * runs it. Archiving it stays allowed (it only hides it from the listing).
 */
export function assertWritable(session: Session): void {
  if (!session.imported) return
  throw new ChronicleError(
    'SESSION_READ_ONLY',
    `session ${session.id} was imported (as ${session.imported.originalId}) and is read-only: ` +
      'fork it into a directory of your choice to continue it (session.fork with a directory; chronicle fork <id> --at <seq> --dir <path>)',
    { sessionId: session.id, originalId: session.imported.originalId },
  )
}
