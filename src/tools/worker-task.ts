import { Worker } from 'node:worker_threads'

/**
 * One task in a fresh worker thread, stopped from outside: work a tool must
 * not do on the server's event loop (a backtracking regex, a large page's
 * DOM), which cannot be interrupted from inside its own thread. The worker
 * is terminated at the deadline or when the call is cancelled, and the
 * caller names each way it can end.
 */
export interface WorkerTask {
  readonly url: URL
  readonly data: unknown
  readonly heapMb: number
  readonly deadlineMs: number
  readonly signal: AbortSignal
  /** the error for each way the task ends without an answer */
  readonly errors: {
    readonly cancelled: () => unknown
    readonly tooSlow: () => unknown
    readonly failed: (err: Error) => unknown
    readonly exited: (code: number) => unknown
  }
}

export function runWorker<T>(task: WorkerTask): Promise<T> {
  const { signal, errors } = task
  if (signal.aborted) return Promise.reject(errors.cancelled())
  return new Promise<T>((resolve, reject) => {
    // execArgv: none of the parent's flags (a --import loader would only slow the start of a plain .cjs file)
    const worker = new Worker(task.url, {
      workerData: task.data,
      execArgv: [],
      resourceLimits: { maxOldGenerationSizeMb: task.heapMb },
    })
    const finish = (settle: () => void) => {
      clearTimeout(timer)
      signal.removeEventListener('abort', onAbort)
      worker.removeAllListeners()
      worker.on('error', () => {}) // a late error from a worker being terminated is of no interest
      void worker.terminate()
      settle()
    }
    const onAbort = () => finish(() => reject(errors.cancelled()))
    const timer = setTimeout(() => finish(() => reject(errors.tooSlow())), task.deadlineMs)
    signal.addEventListener('abort', onAbort, { once: true })
    worker.once('message', (answer: T) => finish(() => resolve(answer)))
    worker.once('error', (err) => finish(() => reject(errors.failed(err))))
    worker.once('exit', (code) => finish(() => reject(errors.exited(code))))
  })
}
