import { runWorker } from '../worker-task.js'
import { ToolFailure } from '../tool.js'

/**
 * Runs grep's line matching off the event loop. JavaScript regexes backtrack:
 * `^(a+)+$` against thirty `a`s and a `!` takes seconds, and tens of seconds
 * a few characters later, and a RegExp cannot be interrupted from inside its
 * own thread. So the files are read and tested in a worker thread
 * (grep-worker.cjs) and the worker is terminated — which stops even a regex
 * in the middle of backtracking, within milliseconds — at the deadline or when
 * the call is cancelled. A fresh worker per call costs about 50 ms.
 */

/** How long one grep may search before it is stopped (the factory's `deadlineMs` overrides it). */
export const GREP_DEADLINE_MS = 20_000

/** The worker's heap limit: a few 5 MB files and 100 matches need far less. */
const WORKER_HEAP_MB = 256

const WORKER_URL = new URL('./grep-worker.cjs', import.meta.url)

export interface GrepSearch {
  /** a JavaScript regular expression (already known to compile) */
  readonly source: string
  /** the files to search, in output order (absolute paths; also how matches name them) */
  readonly files: readonly string[]
  /** matches kept (all are counted) */
  readonly limit: number
  /** a matching line is cut after this many characters */
  readonly maxLineChars: number
  /** larger files are skipped */
  readonly maxFileBytes: number
}

export interface GrepFound {
  /** "path:line: text", at most `limit` */
  readonly matches: readonly string[]
  readonly total: number
}

export function searchInWorker(
  search: GrepSearch,
  opts: { deadlineMs: number; signal: AbortSignal },
): Promise<GrepFound> {
  if (search.files.length === 0 && !opts.signal.aborted) return Promise.resolve({ matches: [], total: 0 })
  return runWorker<GrepFound>({
    url: WORKER_URL,
    data: search,
    heapMb: WORKER_HEAP_MB,
    deadlineMs: opts.deadlineMs,
    signal: opts.signal,
    errors: {
      cancelled,
      tooSlow: () => tooSlow(opts.deadlineMs),
      failed: (err) => new ToolFailure('failed', `grep's search failed: ${err.message}`),
      exited: (code) => new ToolFailure('failed', `grep's search stopped unexpectedly (exit code ${code}).`),
    },
  })
}

function cancelled(): ToolFailure {
  return new ToolFailure('aborted', 'grep was cancelled')
}

function tooSlow(deadlineMs: number): ToolFailure {
  return new ToolFailure(
    'failed',
    `grep took longer than ${deadlineMs / 1000} s and was stopped. Regular expressions with nested quantifiers, such as (a+)+ or (\\w*)*, can take exponential time on some lines: simplify the pattern, or narrow the path or include.`,
  )
}
