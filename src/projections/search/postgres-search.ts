import pg from 'pg'
import { ChronicleError } from '../../events/errors.js'
import { COMMITTED, PG_TYPES, type PostgresEventLog } from '../../events/postgres/log.js'
import type { Search, SearchOptions, SearchPage } from './port.js'
import { createPostgresIndexer, ensurePostgresIndex } from './postgres-index.js'
import { queryPostgresIndex } from './postgres-query.js'
import type { SearchQuery } from './query.js'
import { PositionWaiters } from './waiters.js'

/**
 * PostgreSQL's search (docs/SEARCH.md "PostgreSQL"): the index lives in the
 * store's database and is built off the append path, as SQLite's is, by an
 * indexer on a connection of its own that runs after commits (at most every
 * `debounceMs`) and reads the log past its position. An append pays nothing
 * for it. A search waits (up to `waitMs`) for the index to reach the log's
 * head as of the request, then answers from it through the store's readers
 * and says how far it has read (`indexedThrough`).
 *
 * The indexer starts at the first search, or `startAfterMs` after this is
 * made. Indexers of several servers on one database take turns (the
 * position's row, locked with SKIP LOCKED: one that finds it taken tries
 * again shortly).
 */

export interface PostgresSearchOptions {
  readonly log: PostgresEventLog
  /** the store's database: the indexer's own connection goes there */
  readonly url: string
  /** start indexing this long after creation (a search starts it at once); default 2000 ms */
  readonly startAfterMs?: number
  /** index at most this often while the log grows; default 50 ms */
  readonly debounceMs?: number
  /** a round of indexing failed (the database gone): it is tried again at the next commit or search */
  readonly onError?: (err: Error) => void
}

export interface PostgresSearch extends Search {
  /** the last seq the index has read, as this server's indexer last saw it */
  readonly position: number
  /** starts indexing (if it is not running) and resolves once the index has reached `seq` */
  caughtUp(seq: number, timeoutMs?: number): Promise<boolean>
}

const STARTING_MS = 15_000
/** Seqs a serving indexer reads per transaction (a rebuild reads postgres-index.ts's PG_WINDOW). */
const SERVING_WINDOW = 2048

export function createPostgresSearch(options: PostgresSearchOptions): PostgresSearch {
  const { log } = options
  const debounceMs = options.debounceMs ?? 50
  // small windows: the indexer folds on the server's own thread, and a server that starts on a large log
  // with no index yet builds it while it serves (a window's parse and fold, a few ms, between its requests)
  const indexer = createPostgresIndexer('public', SERVING_WINDOW)
  let started = false
  let closed = false
  /** -1 until the indexer has said where the index stands */
  let position = -1
  let client: pg.Client | undefined
  let running: Promise<void> | undefined
  let again = false
  let timer: NodeJS.Timeout | undefined
  const waiters = new PositionWaiters()
  const connect = async (): Promise<pg.Client> => {
    if (client) return client
    const fresh = new pg.Client({ connectionString: options.url, types: PG_TYPES })
    fresh.on('error', () => {}) // said by the round that used it
    await fresh.connect()
    try {
      await ensurePostgresIndex(fresh)
    } catch (err) {
      await fresh.end().catch(() => {})
      throw err
    }
    client = fresh
    return fresh
  }
  const round = async () => {
    try {
      const db = await connect()
      const reached = await indexer.catchUp(db)
      if (reached === undefined)
        again = true // another server's indexer holds the index: try again shortly
      else position = reached
      waiters.moved(position)
    } catch (err) {
      const lost = client
      client = undefined
      await lost?.end().catch(() => {})
      options.onError?.(err as Error)
    }
  }
  const kick = () => {
    if (!started || closed) return
    if (running || timer) {
      again = true
      return
    }
    timer = setTimeout(() => {
      timer = undefined
      again = false
      running = round().finally(() => {
        running = undefined
        if (again) kick()
      })
    }, debounceMs)
  }
  const start = () => {
    if (started || closed) return
    started = true
    kick()
  }
  const unsubscribe = log.onCommit(kick)
  const startTimer = setTimeout(start, options.startAfterMs ?? 2000)
  startTimer.unref()

  const caughtUp = (seq: number, timeoutMs = 2000): Promise<boolean> => {
    start()
    if (position >= 0 && position >= seq) return Promise.resolve(true)
    kick()
    return waiters.wait(seq, timeoutMs)
  }

  return {
    get position() {
      return Math.max(position, 0)
    },
    caughtUp,
    async search(query: SearchQuery, opts: SearchOptions = {}): Promise<SearchPage> {
      if (closed) throw new ChronicleError('SEARCH_UNAVAILABLE', 'the search index is closed')
      const head = await log.head()
      if (position < 0) await caughtUp(0, STARTING_MS)
      await caughtUp(head, opts.waitMs ?? 2000)
      if (position < 0)
        throw new ChronicleError('SEARCH_UNAVAILABLE', 'the search index is still being created: try again shortly')
      const indexedThrough = position
      const page = await queryPostgresIndex(await log.reader(COMMITTED), query, opts)
      return { hits: page.hits, ...(page.cursor !== undefined && { cursor: page.cursor }), indexedThrough, head }
    },
    async close() {
      if (closed) return
      closed = true
      clearTimeout(startTimer)
      clearTimeout(timer)
      unsubscribe()
      waiters.close()
      await running
      await client?.end().catch(() => {})
      client = undefined
    },
  }
}
