/**
 * Runs work for one key at a time, each after the one before it has settled
 * (whether it succeeded or failed); work for different keys runs
 * concurrently. Nothing is kept for a key once its queue is empty.
 */
export function keyedLock(): <T>(key: string, work: () => Promise<T>) => Promise<T> {
  const tails = new Map<string, Promise<void>>()
  return (key, work) => {
    const run = (tails.get(key) ?? Promise.resolve()).then(work)
    const tail = run.then(
      () => undefined,
      () => undefined,
    )
    tails.set(key, tail)
    void tail.then(() => {
      if (tails.get(key) === tail) tails.delete(key)
    })
    return run
  }
}
