import { ChronicleError } from './errors.js'

/**
 * What any event store checks of an append, whatever it is built on: the
 * version the caller decided on, and that each event belongs where it is
 * appended — a session starts with `session.created` or `session.forked`
 * and only there; a system stream (`sys_tokens`, `sys_mcp`) holds only its
 * own types, and no session starts one.
 */

/** Streams that are not sessions (`sys_tokens`, `sys_mcp`): they hold only their own event types, and no session starts them. */
export const SYSTEM_STREAM_PREFIX = 'sys_'
export const isSystemStream = (streamId: string) => streamId.startsWith(SYSTEM_STREAM_PREFIX)

const SYSTEM_TYPES = new Set([
  'token.created',
  'token.revoked',
  'share.created',
  'share.revoked',
  'mcp.server.connecting',
  'mcp.server.ready',
  'mcp.server.failed',
  'mcp.server.auth_required',
  'mcp.server.disconnected',
])

const FIRST_TYPES = new Set(['session.created', 'session.forked'])

/** VERSION_CONFLICT unless the stream is at the version the caller decided on (undefined: any). */
export function checkExpectedVersion(sessionId: string, actual: number, expected: number | undefined): void {
  if (expected !== undefined && expected !== actual) {
    throw new ChronicleError('VERSION_CONFLICT', `session ${sessionId} is at version ${actual}, expected ${expected}`, {
      sessionId,
      actual,
      expected,
    })
  }
}

/** INVALID_EVENT or SESSION_NOT_FOUND unless an event of `type` may be the stream's event at `version`. */
export function checkBelongs(sessionId: string, version: number, type: string): void {
  if (isSystemStream(sessionId) !== SYSTEM_TYPES.has(type))
    throw new ChronicleError('INVALID_EVENT', `${type} does not belong in stream ${sessionId}`)
  if (!isSystemStream(sessionId) && (version === 1) !== FIRST_TYPES.has(type)) {
    throw new ChronicleError(
      version === 1 ? 'SESSION_NOT_FOUND' : 'INVALID_EVENT',
      version === 1 ? `no session ${sessionId}` : `${type} can only start a session; ${sessionId} already exists`,
    )
  }
}
