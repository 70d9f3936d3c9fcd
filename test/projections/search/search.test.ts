import { parseQuery } from '../../../src/projections/search/query.js'
import { queryIndex } from '../../../src/projections/search/sqlite-query.js'
import { searchFixture } from './helpers.js'
import { describeSearching } from './search-specs.js'

/** The queries of search-specs.ts against SQLite's index (FTS5 in a file of its own). */
describeSearching(async () => {
  const f = searchFixture()
  return {
    get clock() {
      return f.clock
    },
    set clock(at: number) {
      f.clock = at
    },
    append: async (sessionId, events, meta) => f.append(sessionId, events, meta),
    index: async () => {
      f.index()
    },
    search: async (query, options) => queryIndex(f.indexDb(), parseQuery(query, f.clock), options).hits,
    page: async (query, options) => queryIndex(f.indexDb(), parseQuery(query, f.clock), options),
    close: async () => f.close(),
  }
})
