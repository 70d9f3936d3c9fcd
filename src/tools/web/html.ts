import { runWorker } from '../worker-task.js'
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
  const failed = (why: string) => new FetchError('CONVERSION_FAILED', why)
  return runWorker<string>({
    url: WORKER_URL,
    data: { html, format },
    heapMb: WORKER_HEAP_MB,
    deadlineMs: opts.deadlineMs,
    signal: opts.signal,
    errors: {
      cancelled: () => opts.signal.reason,
      tooSlow: () => failed(`converting the page took longer than ${opts.deadlineMs} ms`),
      failed: (err) => failed(`converting the page failed: ${err.message}`),
      exited: (code) => failed(`the conversion stopped unexpectedly (exit ${code})`),
    },
  })
}
