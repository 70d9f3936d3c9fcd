/**
 * Those waiting for a search index to reach a seq (a search that waits for
 * the head, a bench): each is woken once the index's position has reached
 * its seq, or told no when its time is up or the index closes.
 */
export class PositionWaiters {
  private readonly waiting = new Set<{ seq: number; resolve: (reached: boolean) => void; timer: NodeJS.Timeout }>()

  /** true once `moved` reports a position at or past `seq`; false after `timeoutMs` or at `close` */
  wait(seq: number, timeoutMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      const waiter = {
        seq,
        resolve,
        timer: setTimeout(() => {
          this.waiting.delete(waiter)
          resolve(false)
        }, timeoutMs),
      }
      this.waiting.add(waiter)
    })
  }

  /** the index's position moved to `position`: those it reached are woken */
  moved(position: number): void {
    for (const w of this.waiting)
      if (position >= w.seq) {
        clearTimeout(w.timer)
        this.waiting.delete(w)
        w.resolve(true)
      }
  }

  close(): void {
    for (const w of this.waiting) {
      clearTimeout(w.timer)
      w.resolve(false)
    }
    this.waiting.clear()
  }
}
