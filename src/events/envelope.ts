import { z } from 'zod'
import type { ChronicleEvent, EventType } from './catalogue.js'

/**
 * Who caused an event: the actor and, where there is one, the run / input / call / command behind it. An
 * event a client caused also names the principal whose token it used (`by`), the connection it came over
 * and the client's command id (docs/EVENTS.md "The envelope").
 */
export const EventMeta = z.object({
  actor: z.enum(['user', 'model', 'runtime', 'recovery', 'tool', 'system']),
  by: z.object({ id: z.string(), name: z.string() }).optional(),
  connection: z.string().optional(),
  commandId: z.string().optional(),
  run: z.string().optional(),
  input: z.string().optional(),
  call: z.string().optional(),
  command: z.string().optional(),
  request: z.string().optional(),
  /** the W3C traceparent of the traced request that caused it (docs/OBSERVABILITY.md "Traces") */
  trace: z.string().max(64).optional(),
  /** (cluster) the owner's epoch the event was appended under (docs/CLUSTER.md "Ownership and the fence") */
  epoch: z.number().int().positive().optional(),
})
export type EventMeta = z.infer<typeof EventMeta>

interface Envelope {
  readonly seq: number
  readonly sessionId: string
  /** per-session position, 1-based and contiguous; used for optimistic concurrency */
  readonly version: number
  readonly schemaVersion: number
  readonly meta: EventMeta
  /** ISO-8601 commit time */
  readonly at: string
}

/** An event as stored: the fact plus the envelope the store adds. A union discriminated by `type`. */
export type StoredEvent<E extends ChronicleEvent = ChronicleEvent> = E extends ChronicleEvent
  ? Envelope & { readonly type: E['type']; readonly data: E['data'] }
  : never

export type StoredEventOf<T extends EventType> = StoredEvent<Extract<ChronicleEvent, { type: T }>>

export function isType<T extends EventType>(event: StoredEvent, type: T): event is StoredEventOf<T> {
  return event.type === type
}
