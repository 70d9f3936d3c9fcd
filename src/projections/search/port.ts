import type { DocKind } from './documents.js'
import type { SearchQuery } from './query.js'

/**
 * Full-text search over every session as a port (docs/SEARCH.md), beside
 * the read models: the index is a projection of the log built off the
 * append path, so each answer says how far into the log it has read
 * (`indexedThrough`) next to the log's head. SQLite's is a file of its own
 * written by a worker thread (src/projections/search/sqlite-search.ts).
 */
export interface Search {
  search(query: SearchQuery, options?: SearchOptions): Promise<SearchPage>
  /** stops indexing; what was indexed stays */
  close(): Promise<void>
}

export interface SearchOptions {
  /** only these sessions, their forks and their sub-agents' sessions (a limited token's) */
  readonly scope?: readonly string[]
  /** archived sessions too */
  readonly archived?: boolean
  readonly limit?: number
  readonly cursor?: string
  /** newest first (by when the document was first indexed), or by relevance */
  readonly order?: 'newest' | 'relevance'
  /** how long to wait for the index to reach the log's head as of the request (default 2000 ms) */
  readonly waitMs?: number
}

export interface SearchHit {
  readonly session: string
  readonly title: string
  /** the event that completed what matched (for a part: the event that ended it) and its type */
  readonly seq: number
  readonly event: string
  /** the event where the match first appeared whole (a streamed part's delta, a tool's call or its result) */
  readonly firstSeq: number
  readonly type: DocKind
  /** the part, input, request or `title` the document is */
  readonly key: string
  readonly by: string
  readonly at: string
  readonly tool?: string
  /** a window of the text around the first match */
  readonly snippet: string
  /** [start, end) of each match within the snippet */
  readonly highlights: readonly (readonly [number, number])[]
}

export interface SearchPage {
  readonly hits: readonly SearchHit[]
  /** there when more remain: pass it back for the next page */
  readonly cursor?: string
  /** the last seq of the log the index has read */
  readonly indexedThrough: number
  /** the log's head when the search was asked */
  readonly head: number
}

export const DEFAULT_LIMIT = 20
export const MAX_LIMIT = 200
