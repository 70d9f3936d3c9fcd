import type { EventStore } from '../../events/store.js'
import { prepared } from '../rows/prepared.js'

/** Whether the session accepted an input with this id (a query of the log, for one-off checks). */
export function inputAccepted(store: EventStore, sessionId: string, inputId: string): boolean {
  return (
    prepared(
      store.reader(sessionId),
      "SELECT 1 FROM events WHERE session_id = ? AND type = 'input.accepted' AND json_extract(data, '$.inputId') = ? LIMIT 1",
      true,
    ).get(sessionId, inputId) !== undefined
  )
}
