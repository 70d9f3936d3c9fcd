import { z } from 'zod'
import { ChronicleEvent, CURRENT_SCHEMA_VERSION } from './catalogue.js'
import type { EventMeta, StoredEvent } from './envelope.js'
import { ChronicleError } from './errors.js'

/**
 * Events on their way into and out of the events table: validation before
 * anything is written (INVALID_EVENT) and decoding of rows as they are read,
 * each checked against its schema (CORRUPT_EVENT naming the seq).
 */

export interface EventRow {
  seq: number
  session_id: string
  version: number
  type: string
  schema_version: number
  data: string
  meta: string
  at: number
}

/** Each type's data schema, for checking rows as they are read. */
const DATA_SCHEMAS = new Map<string, z.ZodType>(ChronicleEvent.options.map((o) => [o.shape.type.value, o.shape.data]))

/**
 * The delta types, most of the log, and the field holding each one's text:
 * checked by hand below (with the schema's result), merged by the store under
 * load, and appended to their part by the projection's tails (part-rows.ts).
 */
const DELTA_FIELD: Readonly<Record<string, DeltaField>> = {
  'text.delta': 'text',
  'reasoning.delta': 'text',
  'tool.input.delta': 'delta',
}
const ID_MAX = 200
type DeltaField = 'text' | 'delta'

/** The field a delta event's text is in ('text' or 'delta'); undefined for any other type. */
export function deltaField(type: string): DeltaField | undefined {
  return Object.hasOwn(DELTA_FIELD, type) ? DELTA_FIELD[type] : undefined
}

function plainDelta(type: string, data: unknown): ChronicleEvent | undefined {
  const field = deltaField(type)
  if (field === undefined || data === null || typeof data !== 'object' || Object.keys(data).length !== 2)
    return undefined
  const { partId, [field]: value } = data as Record<string, unknown>
  if (typeof partId !== 'string' || partId.length === 0 || partId.length > ID_MAX || typeof value !== 'string')
    return undefined
  // anything else (a missing field, an extra key, a wrong type) goes through the schema, for its error or its stripping
  return { type, data: { partId, [field]: value } } as ChronicleEvent
}

export function validate(events: readonly ChronicleEvent[]): ChronicleEvent[] {
  return events.map((e, i) => {
    const type = (e as { type?: unknown } | null)?.type
    const delta = typeof type === 'string' ? plainDelta(type, (e as { data?: unknown }).data) : undefined
    if (delta) return delta
    // The type's own data schema: a third of the cost of parsing against the whole union.
    const schema = typeof type === 'string' ? DATA_SCHEMAS.get(type) : undefined
    if (!schema) {
      throw new ChronicleError('INVALID_EVENT', `event ${i} (${String(type)}) fails its schema: unknown event type`, {
        issues: [{ path: 'type', message: `unknown event type ${JSON.stringify(type)}` }],
      })
    }
    const parsed = schema.safeParse((e as { data?: unknown }).data)
    if (!parsed.success) {
      throw new ChronicleError(
        'INVALID_EVENT',
        `event ${i} (${type}) fails its schema: ${z.prettifyError(parsed.error)}`,
        {
          issues: parsed.error.issues.map((x) => ({ path: ['data', ...x.path].join('.'), message: x.message })),
        },
      )
    }
    return { type, data: parsed.data } as ChronicleEvent
  })
}

/** A row of the events table as a StoredEvent (for queries outside the store, e.g. time travel). */
export function toEvent(row: EventRow): StoredEvent {
  const schema = DATA_SCHEMAS.get(row.type)
  if (!schema) {
    throw new ChronicleError('CORRUPT_EVENT', `event at seq ${row.seq} has unknown type ${JSON.stringify(row.type)}`, {
      seq: row.seq,
    })
  }
  if (row.schema_version > CURRENT_SCHEMA_VERSION) {
    throw new ChronicleError(
      'CORRUPT_EVENT',
      `event at seq ${row.seq} has schema version ${row.schema_version}, newer than this server`,
      { seq: row.seq },
    )
  }
  let data: unknown
  let meta: EventMeta
  try {
    data = JSON.parse(row.data)
    meta = JSON.parse(row.meta) as EventMeta
  } catch {
    throw new ChronicleError('CORRUPT_EVENT', `event at seq ${row.seq} has a corrupt JSON body`, { seq: row.seq })
  }
  // Cheap (a fraction of a microsecond): a row that no longer fits its schema is named, not folded into nonsense.
  if (!schema.safeParse(data).success || meta === null || typeof meta !== 'object') {
    throw new ChronicleError('CORRUPT_EVENT', `event at seq ${row.seq} (${row.type}) does not match its schema`, {
      seq: row.seq,
    })
  }
  return {
    seq: row.seq,
    sessionId: row.session_id,
    version: row.version,
    type: row.type,
    schemaVersion: row.schema_version,
    data,
    meta,
    at: isoTime(row.at),
  } as StoredEvent
}

/** Rows of one commit share a time: format it once. */
let lastAt = Number.NaN
let lastIso = ''
function isoTime(at: number): string {
  if (at !== lastAt) {
    lastIso = new Date(at).toISOString()
    lastAt = at
  }
  return lastIso
}
