import type { Message } from '../fold/model.js'

/**
 * How message rows are stored: the JSON leaves out `id` and `sessionId`, which
 * the row's columns already hold (as part rows do, see part-rows.ts). Only a
 * message whose first two keys are exactly those, equal to the columns, is
 * stored so; any other is stored whole and read back as it is, so the
 * message read back is the one written, key order included. Rows written by
 * older code (whole JSON) read the same.
 */

/** The `data` column of the row (`sessionId`, `id`) holding message `m`. */
export function messageRow(sessionId: string, id: string, m: Message): string {
  const keys = Object.keys(m)
  if (keys[0] !== 'id' || keys[1] !== 'sessionId' || m.sessionId !== sessionId || m.id !== id) return JSON.stringify(m)
  const { id: _id, sessionId: _sessionId, ...rest } = m
  return JSON.stringify(rest)
}

/** The message a row holds. */
export function messageFromRow(sessionId: string, id: string, data: string): Message {
  const stored = JSON.parse(data) as Partial<Message>
  if ('id' in stored) return stored as Message
  return { id, sessionId, ...stored } as Message
}
