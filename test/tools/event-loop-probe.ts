/**
 * A timer that should fire every `everyMs`: the longest gap between two firings
 * is how long the event loop was blocked while something else ran.
 */
export interface EventLoopProbe {
  /** stops the timer; the longest gap seen (ms) and how often it fired */
  stop(): { maxGapMs: number; fired: number }
}

export function startProbe(everyMs = 5): EventLoopProbe {
  let last = performance.now()
  let maxGapMs = 0
  let fired = 0
  const timer = setInterval(() => {
    const now = performance.now()
    maxGapMs = Math.max(maxGapMs, now - last)
    last = now
    fired++
  }, everyMs)
  return {
    stop() {
      clearInterval(timer)
      maxGapMs = Math.max(maxGapMs, performance.now() - last)
      return { maxGapMs, fired }
    },
  }
}
