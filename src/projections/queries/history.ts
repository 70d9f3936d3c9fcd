import type { StoredEvent } from '../../events/envelope.js'
import { ChronicleError } from '../../events/errors.js'
import type { EventStore } from '../../events/store.js'
import { eventsByVersion, lineage, type Segment, versionAtOrBefore } from '../time-travel/lineage.js'

/**
 * A session's history, paged by seq (keyset, both directions). For a fork it
 * is the parent's history up to the fork point (recursively), then its own
 * events; inherited events carry `inherited: true`. A page is always in
 * ascending seq order.
 *
 * - `after` (default 0): events with seq > after, oldest first; `next` is the
 *   `after` of the following page.
 * - `before` alone: the newest events with seq < before; `next` is the
 *   `before` of the previous (older) page.
 * - both: the events between them, paged forward from `after`.
 *
 * Cost: one index range per segment (a seq bound becomes a version bound by
 * binary search), never a scan from the session's start.
 */
export type HistoryEvent = StoredEvent & { readonly inherited?: true }

export interface HistoryPage {
  readonly events: HistoryEvent[]
  /** the cursor for the next page in the same direction; absent at the end */
  readonly next?: number
}

export interface HistoryQuery {
  readonly after?: number
  readonly before?: number
  readonly limit?: number
}

export const DEFAULT_HISTORY_LIMIT = 200
export const MAX_HISTORY_LIMIT = 5000

export function history(store: EventStore, sessionId: string, query: HistoryQuery = {}): HistoryPage {
  const bounds = historyBounds(query)
  const segments = lineage(store, sessionId)
  const events: HistoryEvent[] = []
  for (const segment of bounds.backward ? [...segments].reverse() : segments) {
    const wanted = bounds.limit + 1 - events.length // one extra tells whether there is a next page
    if (wanted <= 0) break
    for (const event of range(store, segment, bounds.lo, bounds.hi, bounds.backward, wanted)) {
      events.push(segment.sessionId === sessionId ? event : Object.assign({}, event, { inherited: true }))
    }
  }
  return historyPage(events, bounds)
}

/** A history query checked (BAD_REQUEST), as bounds: seq > lo and seq <= hi, newest first when backward. */
export interface HistoryBounds {
  readonly limit: number
  readonly backward: boolean
  /** exclusive */
  readonly lo: number
  /** inclusive */
  readonly hi: number
}

export function historyBounds(query: HistoryQuery): HistoryBounds {
  const limit = query.limit ?? DEFAULT_HISTORY_LIMIT
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_HISTORY_LIMIT) {
    throw new ChronicleError('BAD_REQUEST', `limit must be an integer from 1 to ${MAX_HISTORY_LIMIT}`)
  }
  for (const [name, value] of [
    ['after', query.after],
    ['before', query.before],
  ] as const) {
    if (value !== undefined && (!Number.isSafeInteger(value) || value < 0)) {
      throw new ChronicleError('BAD_REQUEST', `${name} must be a non-negative integer seq`)
    }
  }
  return {
    limit,
    backward: query.before !== undefined && query.after === undefined,
    lo: query.after ?? 0,
    hi: query.before === undefined ? Number.MAX_SAFE_INTEGER : query.before - 1,
  }
}

/** The page of up to limit + 1 events gathered in the query's direction: `next` when there was one more. */
export function historyPage(events: HistoryEvent[], bounds: HistoryBounds): HistoryPage {
  const more = events.length > bounds.limit
  const page = events.slice(0, bounds.limit)
  if (bounds.backward) page.reverse()
  const edge = bounds.backward ? page[0] : page[page.length - 1]
  return { events: page, ...(more && edge && { next: edge.seq }) }
}

/** The segment's events with lo < seq <= hi, at most `limit`, in the given direction. */
function* range(store: EventStore, segment: Segment, lo: number, hi: number, backward: boolean, limit: number) {
  const from = Math.max(lo, segment.firstSeq - 1)
  const to = Math.min(hi, segment.upTo)
  if (from >= to) return
  const max = store.version(segment.sessionId)
  const db = store.reader(segment.sessionId)
  const afterVersion = versionAtOrBefore(db, segment.sessionId, from, max)
  const upToVersion = versionAtOrBefore(db, segment.sessionId, to, max)
  let n = 0
  for (const event of eventsByVersion(
    db,
    segment.sessionId,
    afterVersion,
    upToVersion,
    backward ? 'backward' : 'forward',
    Math.min(limit, 1000),
  )) {
    yield event
    if (++n >= limit) return
  }
}
