import { setImmediate } from 'node:timers/promises'

/**
 * Cooperative yielding for long synchronous loops on the main thread (walking
 * a large tree, checking thousands of paths against the rules): `await tick()`
 * after each unit of work returns at once until `budgetMs` of wall time has
 * passed since the last yield, then lets the event loop run (timers, I/O,
 * other sessions) before going on. With the default 10 ms a search adds at
 * most about that much to anyone else's latency.
 */
export const SLICE_MS = 10

export type Tick = () => Promise<void>

export function createTick(budgetMs = SLICE_MS): Tick {
  let since = performance.now()
  return async () => {
    if (performance.now() - since < budgetMs) return
    await setImmediate()
    since = performance.now()
  }
}
