import type { ChronicleEvent } from './catalogue.js'
import type { EventMeta, StoredEvent } from './envelope.js'
import { deltaField } from './rows.js'
import type { AppendOptions } from './store.js'

/**
 * Which queued deltas merge, and how the callers that merged hear of it (docs/EVENTS.md "Deltas"): one rule
 * for both logs' queues — SQLite's commit scheduler (src/events/commit-scheduler.ts) and PostgreSQL's log
 * (src/events/postgres/log.ts). When a queue counts as behind is each queue's own; what may merge, into
 * what, and what each caller then hears, is here.
 */

/** Hears how one queued append ended (EventStore.submit, EventLog.submit). */
export interface Settle {
  resolve(events: StoredEvent[]): void
  reject(err: unknown): void
}

/** A queued append a lone delta may join. */
export interface Joinable {
  /** validated: the log's own list (a merge replaces its last event) */
  readonly events: ChronicleEvent[]
  readonly options: AppendOptions
  /** hears how it ended: the caller's own (append, enqueue, a run's recorder) */
  readonly done: Settle
  /** its caller waits on it (append, enqueue): it is stored as it came, and nothing joins it */
  readonly awaited: boolean
  /** later appends merged into this one's last event (a delta): each settles with that event */
  merged: Settle[] | undefined
}

/**
 * Deltas merge into a queue this long whatever else: a queue of this many appends waiting for one commit
 * is a server behind the model.
 */
export const MERGE_FROM_QUEUED = 64

/**
 * Sessions whose appends must share a queue (or an interval's commits) for it to count as load: one
 * session's own burst (a turn appends some 60 events within milliseconds) is a user waiting on it, and
 * gains nothing from sharing commits with nobody.
 */
export const LOADED_SESSIONS = 8

/**
 * Merges a lone delta (`events`) into `queued`, its session's last queued append, when both are plain
 * deltas of one part with the same meta and nobody awaits either (a run's recorder queues its deltas so):
 * `done` then settles with the merged event. True if it did: the caller queues nothing.
 */
export function joinDelta(
  queued: Joinable,
  events: readonly ChronicleEvent[],
  options: AppendOptions,
  done: Settle,
  awaited: boolean,
): boolean {
  if (awaited || queued.awaited || !mergeDelta(queued, events, options)) return false
  queued.merged ??= []
  queued.merged.push(done)
  return true
}

/** `item` committed as `stored`: its caller hears that, and each caller merged into it the merged event. */
export function settleJoined(item: Joinable, stored: StoredEvent[]): void {
  item.done.resolve(stored)
  if (item.merged) {
    const last = stored.slice(-1) // a merged delta's event: the item's last
    for (const m of item.merged) m.resolve(last)
  }
}

/** `item` failed: its caller and every caller merged into it hear why. */
export function failJoined(item: Joinable, err: unknown): void {
  item.done.reject(err)
  for (const m of item.merged ?? []) m.reject(err)
}

/** Merges a lone delta into the queued append's last event when both are deltas of one part; true if it did. */
function mergeDelta(queued: Joinable, events: readonly ChronicleEvent[], options: AppendOptions): boolean {
  const next = events[0]
  const field = events.length === 1 && next ? deltaField(next.type) : undefined
  const last = queued.events[queued.events.length - 1]
  if (field === undefined || last?.type !== next?.type || !plainAppend(options) || !plainAppend(queued.options))
    return false
  const into = last?.data as Record<string, string>
  const from = next?.data as Record<string, string>
  if (into.partId !== from.partId || !sameMeta(queued.options.meta, options.meta)) return false
  // a new event, not the queued one changed: its data keeps one hidden class, written once
  const merged = { type: last?.type, data: { partId: into.partId, [field]: (into[field] as string) + from[field] } }
  queued.events[queued.events.length - 1] = merged as ChronicleEvent
  return true
}

/** No version check, no fsync, no given time: an append another may join. */
const plainAppend = (o: AppendOptions) =>
  o.expectedVersion === undefined && o.durability !== 'full' && o.at === undefined

function sameMeta(a: EventMeta, b: EventMeta): boolean {
  if (a === b) return true
  const keys = Object.keys(a)
  return keys.length === Object.keys(b).length && keys.every((k) => a[k as keyof EventMeta] === b[k as keyof EventMeta])
}
