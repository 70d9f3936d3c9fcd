import { Worker } from 'node:worker_threads'
import { FetchError } from './fetch-error.js'

/**
 * HTML to Markdown or text (docs/TOOLS.md "webfetch"), in a worker thread
 * (html-worker.cjs): the conversion of a large page takes seconds of CPU
 * (about 0.8 s per MB to Markdown on this class of machine), and no tool
 * call may stall the server's event loop (docs/SECURITY.md). A worker is
 * terminated when the call is cancelled or the conversion outlives its
 * deadline.
 */

const WORKER_URL = new URL('./html-worker.cjs', import.meta.url)
/** A 5 MB page parses into a DOM of a few hundred MB at most. */
const WORKER_HEAP_MB = 512

export function convertHtml(
  html: string,
  format: 'markdown' | 'text',
  opts: { readonly deadlineMs: number; readonly signal: AbortSignal },
): Promise<string> {
  if (opts.signal.aborted) return Promise.reject(opts.signal.reason)
  return new Promise<string>((resolve, reject) => {
    // execArgv: none of the parent's flags (a --import loader would only slow the start of a plain .cjs file)
    const worker = new Worker(WORKER_URL, {
      workerData: { html, format },
      execArgv: [],
      resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
    })
    const finish = (settle: () => void) => {
      clearTimeout(timer)
      opts.signal.removeEventListener('abort', onAbort)
      worker.removeAllListeners()
      worker.on('error', () => {}) // a late error from a worker being terminated is of no interest
      void worker.terminate()
      settle()
    }
    const onAbort = () => finish(() => reject(opts.signal.reason))
    const timer = setTimeout(
      () =>
        finish(() =>
          reject(new FetchError('CONVERSION_FAILED', `converting the page took longer than ${opts.deadlineMs} ms`)),
        ),
      opts.deadlineMs,
    )
    opts.signal.addEventListener('abort', onAbort, { once: true })
    worker.once('message', (text: string) => finish(() => resolve(text)))
    worker.once('error', (err) =>
      finish(() => reject(new FetchError('CONVERSION_FAILED', `converting the page failed: ${err.message}`))),
    )
    worker.once('exit', (code) =>
      finish(() => reject(new FetchError('CONVERSION_FAILED', `the conversion stopped unexpectedly (exit ${code})`))),
    )
  })
}
