import type { StoredEvent } from '../../events/envelope.js'
import type { ErrorBody } from '../problem.js'

/**
 * Server → client messages (docs/API.md "WebSocket protocol"), serialised here only.
 * An event's JSON is built once and shared by every subscription that
 * delivers it: only the `sub` prefix differs between subscribers.
 */

export type RequestId = string | number | null

const eventTails = new WeakMap<StoredEvent, string>()

function eventTail(e: StoredEvent): string {
  let tail = eventTails.get(e)
  if (tail === undefined) {
    tail = JSON.stringify({
      seq: e.seq,
      session: e.sessionId,
      version: e.version,
      event: { type: e.type, data: e.data, at: e.at, meta: e.meta },
    }).slice(1)
    eventTails.set(e, tail)
  }
  return tail
}

export function eventFrame(sub: string, e: StoredEvent): string {
  return `{"type":"event","sub":${JSON.stringify(sub)},${eventTail(e)}`
}

export const caughtUpFrame = (sub: string, seq: number): string => JSON.stringify({ type: 'caught-up', sub, seq })

export const heartbeatFrame = (head: number): string => JSON.stringify({ type: 'heartbeat', head })

export const resultFrame = (id: RequestId, result: unknown): string => JSON.stringify({ id, result })

export const errorFrame = (id: RequestId, error: ErrorBody): string => JSON.stringify({ id, error })

export function closingFrame(
  reason: 'slow-consumer' | 'shutdown' | 'revoked',
  after: number,
  subs: Record<string, number>,
): string {
  return JSON.stringify({ type: 'closing', reason, resume: { after, subs } })
}
