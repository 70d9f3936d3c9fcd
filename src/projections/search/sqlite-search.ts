import { existsSync } from 'node:fs'
import { Worker } from 'node:worker_threads'
import Database from 'better-sqlite3'
import { ChronicleError } from '../../events/errors.js'
import type { EventStore } from '../../events/store.js'
import type { FromWorker, ToWorker, WorkerData } from './index-worker.js'
import type { Search, SearchOptions, SearchPage } from './port.js'
import type { SearchQuery } from './query.js'
import { queryIndex } from './sqlite-query.js'
import { PositionWaiters } from './waiters.js'

/**
 * SQLite's search (docs/SEARCH.md): the index is built off the append path,
 * by a worker thread (index-worker.ts) reading the store's file through a
 * connection of its own, so an append pays one coalesced message for it
 * and nothing more. This side tells the worker when the log has grown, keeps
 * the position it reports, and answers queries from the index file through a
 * read-only connection. A search waits (up to `waitMs`) for the index to
 * reach the log's head as of the request, then answers with what it holds
 * and says how far that is (`indexedThrough`).
 *
 * The worker starts at the first search, or `startAfterMs` after this is
 * made: a server that lives a moment (a test's) spends nothing on it.
 */

export interface SqliteSearchOptions {
  readonly store: EventStore
  /** the store's file */
  readonly source: string
  /** the index's file (`<dataDir>/search.db`) */
  readonly path: string
  /** start indexing this long after creation (a search starts it at once); default 2000 ms */
  readonly startAfterMs?: number
  /** index at most this often while the log grows; default 50 ms */
  readonly debounceMs?: number
  /** the worker stopped with an error: it starts again at the next search */
  readonly onError?: (err: Error) => void
}

export interface SqliteSearch extends Search {
  /** the last seq the index has read, as the worker last said */
  readonly position: number
  /** starts the worker (if it is not running) and resolves once the index has reached `seq` */
  caughtUp(seq: number, timeoutMs?: number): Promise<boolean>
}

const WORKER = new URL('./index-worker.mjs', import.meta.url)
/** How long a search waits for a worker that has not said where it stands yet. */
const STARTING_MS = 15_000

export function createSqliteSearch(options: SqliteSearchOptions): SqliteSearch {
  const { store } = options
  let worker: Worker | undefined
  /** -1 until the worker has opened the index and said where it stands */
  let position = -1
  let told = false
  let closed = false
  let reader: Database.Database | undefined
  const waiters = new PositionWaiters()
  const tell = () => {
    if (!worker || told) return
    told = true
    worker.postMessage({ type: 'grown' } satisfies ToWorker)
  }
  const start = () => {
    if (worker || closed) return
    const data: WorkerData = { source: options.source, index: options.path, debounceMs: options.debounceMs ?? 50 }
    const started = new Worker(WORKER, { workerData: data, execArgv: [] })
    started.unref() // the server stops it; it never holds a process open by itself
    started.on('message', (message: FromWorker) => {
      position = message.seq
      told = false
      waiters.moved(position)
      if (position < store.head()) tell() // commits heard while it ran that it may not have read
    })
    started.on('error', (err) => {
      worker = undefined
      options.onError?.(err)
    })
    started.on('exit', () => {
      if (worker === started) worker = undefined
    })
    worker = started
  }
  const unsubscribe = store.onCommit(tell)
  const timer = setTimeout(start, options.startAfterMs ?? 2000)
  timer.unref()

  const caughtUp = (seq: number, timeoutMs = 2000): Promise<boolean> => {
    start()
    if (position >= 0 && position >= seq) return Promise.resolve(true)
    tell()
    return waiters.wait(seq, timeoutMs)
  }

  return {
    get position() {
      return Math.max(position, 0)
    },
    caughtUp,
    async search(query: SearchQuery, opts: SearchOptions = {}): Promise<SearchPage> {
      if (closed) throw new ChronicleError('SEARCH_UNAVAILABLE', 'the search index is closed')
      const head = store.head()
      // a worker still starting (its first moments, a loaded machine) is waited for longer than one catching up
      if (position < 0) await caughtUp(0, STARTING_MS)
      await caughtUp(head, opts.waitMs ?? 2000)
      if (!reader) {
        if (position < 0 || !existsSync(options.path))
          throw new ChronicleError('SEARCH_UNAVAILABLE', 'the search index is still being created: try again shortly')
        reader = new Database(options.path, { readonly: true, fileMustExist: true })
        reader.pragma('busy_timeout = 5000')
      }
      const indexedThrough = Math.max(position, 0)
      const page = queryIndex(reader, query, opts)
      return { hits: page.hits, ...(page.cursor !== undefined && { cursor: page.cursor }), indexedThrough, head }
    },
    async close() {
      if (closed) return
      closed = true
      clearTimeout(timer)
      unsubscribe()
      waiters.close()
      const stopping = worker
      worker = undefined
      if (stopping) {
        // held open while it stops: a process with nothing else left to do must not exit under this await
        stopping.ref()
        const exited = new Promise<void>((resolve) => stopping.once('exit', () => resolve()))
        stopping.postMessage({ type: 'stop' } satisfies ToWorker)
        let timer: NodeJS.Timeout | undefined
        await Promise.race([exited, new Promise((resolve) => (timer = setTimeout(resolve, 2000)))])
        clearTimeout(timer)
        await stopping.terminate()
      }
      reader?.close()
    },
  }
}
