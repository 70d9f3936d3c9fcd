import { setPriority } from 'node:os'
import { parentPort, workerData } from 'node:worker_threads'
import { createIndexer, openLogSource } from './indexer.js'
import { openIndexFile } from './sqlite-index.js'

/**
 * The search index's worker thread (started by sqlite-search.ts through
 * index-worker.mjs): it owns the index file and a read-only connection to
 * the store's, and indexes what the log holds past its position whenever the
 * server says the log has grown — at most once per `debounceMs`, so a
 * streaming server's commits are indexed in runs, never one by one. It
 * answers each run with the position reached.
 *
 * The thread runs at a lower priority (nice 10): on a busy machine the
 * server's own threads come first and the index falls a little behind, which
 * its position says.
 */

export interface WorkerData {
  /** the store's file */
  readonly source: string
  /** the index's file */
  readonly index: string
  readonly debounceMs: number
}

/** From the server: the log has grown; stop. To the server: the position reached. */
export type ToWorker = { readonly type: 'grown' } | { readonly type: 'stop' }
export type FromWorker = { readonly type: 'position'; readonly seq: number }

const port = parentPort
if (!port) throw new Error('index-worker runs as a worker thread')
const data = workerData as WorkerData
try {
  setPriority(0, 10) // Linux keeps a nice value per thread: this one yields to the server's
} catch {}
const index = openIndexFile(data.index)
const log = openLogSource(data.source)
const indexer = createIndexer(index, log)
let timer: NodeJS.Timeout | undefined

const post = (message: FromWorker) => port.postMessage(message)
const run = () => {
  timer = undefined
  post({ type: 'position', seq: indexer.catchUp() })
}

port.on('message', (message: ToWorker) => {
  if (message.type === 'grown') timer ??= setTimeout(run, data.debounceMs)
  else {
    clearTimeout(timer)
    index.close()
    log.close()
    port.close()
  }
})
run()
