import type { ModelFailure } from './adapter.js'

/**
 * Backoff for retryable model failures (429, 5xx, network): exponential from
 * `initialMs`, capped at `maxMs`, unless the provider said when to come back
 * (retry-after), which is honoured up to `maxMs`.
 */
export interface RetryPolicy {
  readonly maxRetries: number
  readonly initialMs: number
  readonly maxMs: number
  /**
   * A model stream silent this long is cancelled as a `stalled` failure: retried like a network error when
   * it had sent nothing of the step yet, else the step fails with it (docs/RECOVERY.md "Stuck sessions").
   */
  readonly stallMs: number
}

export const DEFAULT_RETRY: RetryPolicy = { maxRetries: 4, initialMs: 2000, maxMs: 30_000, stallMs: 300_000 }

export function retryDelay(attempt: number, failure: ModelFailure, policy: RetryPolicy): number {
  if (failure.retryAfterMs !== undefined) return Math.round(Math.min(failure.retryAfterMs, policy.maxMs))
  return Math.round(Math.min(policy.initialMs * 2 ** (attempt - 1), policy.maxMs))
}

/** Resolves after `ms`, or at once when `signal` aborts (the caller checks which). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve()
    const timer = setTimeout(done, ms)
    function done() {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    signal?.addEventListener('abort', done, { once: true })
  })
}
