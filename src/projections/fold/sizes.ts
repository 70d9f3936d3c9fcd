import type { SessionView } from './model.js'

/**
 * About how many bytes a read-model value holds on the heap: two per string
 * character, 16 per property or element, 32 per object. What bounds the
 * caches of views (src/events/bounded-cache.ts), not a measure: a string
 * shared by two objects counts twice.
 */
export function approxBytes(value: unknown, depth = 0): number {
  if (typeof value === 'string') return 16 + 2 * value.length
  if (value === undefined) return 0
  if (value === null || typeof value !== 'object' || depth > 8) return 8
  let bytes = 32
  if (Array.isArray(value)) {
    for (const item of value) bytes += 8 + approxBytes(item, depth + 1)
    return bytes
  }
  for (const key in value) bytes += 16 + approxBytes((value as Record<string, unknown>)[key], depth + 1)
  return bytes
}

/** approxBytes of a whole view: its session, messages and parts. */
export function viewBytes(view: SessionView): number {
  let bytes = approxBytes(view.session)
  for (const m of view.messages.values()) bytes += approxBytes(m)
  for (const p of view.parts.values()) bytes += approxBytes(p)
  return bytes
}
