import { customAlphabet } from 'nanoid'

/**
 * Entity ids are prefixed and time-ordered (`ses_…`, `msg_…`, `prt_…`) so that
 * sorting by id sorts by creation. The time prefix is monotonic within a
 * process even when the clock stalls or steps back.
 */
export type IdPrefix =
  | 'ses'
  | 'msg'
  | 'prt'
  | 'run'
  | 'in'
  | 'per'
  | 'eli'
  | 'rul'
  | 'cmp'
  | 'call'
  | 'imp'
  | 'rst'
  | 'ttl'
  | 'tok'
  | 'shr'

export interface IdSource {
  next(prefix: IdPrefix): string
}

const random = customAlphabet('0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ', 10)

export function createIdSource(now: () => number = Date.now): IdSource {
  let last = 0
  return {
    next(prefix) {
      // 12 hex digits of (ms * 4096 + counter): ordered, and unique per ms up to 4096 ids.
      last = Math.max(last + 1, now() * 4096)
      return `${prefix}_${last.toString(16).padStart(12, '0')}${random()}`
    },
  }
}

/** Deterministic ids for tests: `ses_000001`, `msg_000002`, … */
export function sequentialIds(): IdSource {
  let n = 0
  return { next: (prefix) => `${prefix}_${String(++n).padStart(6, '0')}` }
}
