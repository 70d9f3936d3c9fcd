/**
 * When a failed MCP server is tried again: exponential backoff with jitter,
 * so servers that failed together (a network blip) do not all come back at
 * the same instant, and a server that keeps crashing is tried ever less
 * often. A connection that stays up `stableMs` resets the count.
 */

export interface McpReconnectOptions {
  /** the first delay (default 1 s) */
  readonly initialMs?: number
  /** the longest delay (default 60 s) */
  readonly maxMs?: number
  /** up this long, a connection counts as stable and the next failure starts from `initialMs` (default 60 s) */
  readonly stableMs?: number
  /** [0, 1): the jitter's source (tests pass a fixed one) */
  readonly random?: () => number
}

export type ReconnectPolicy = Required<McpReconnectOptions>

export function reconnectPolicy(options: McpReconnectOptions = {}): ReconnectPolicy {
  return {
    initialMs: options.initialMs ?? 1000,
    maxMs: options.maxMs ?? 60_000,
    stableMs: options.stableMs ?? 60_000,
    random: options.random ?? Math.random,
  }
}

/** The delay before the attempt after `failures` failures: half the doubled delay fixed, half random ("equal jitter"). */
export function backoffDelay(policy: ReconnectPolicy, failures: number): number {
  const ceiling = Math.min(policy.maxMs, policy.initialMs * 2 ** Math.min(failures, 30))
  return Math.round(ceiling / 2 + (policy.random() * ceiling) / 2)
}
