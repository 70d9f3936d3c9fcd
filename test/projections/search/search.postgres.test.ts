import pg from 'pg'
import { PG_TYPES } from '../../../src/events/postgres/log.js'
import { openPostgresStore } from '../../../src/projections/postgres/open.js'
import { createPostgresIndexer, ensurePostgresIndex } from '../../../src/projections/search/postgres-index.js'
import { queryPostgresIndex } from '../../../src/projections/search/postgres-query.js'
import { parseQuery } from '../../../src/projections/search/query.js'
import { usePostgres } from '../../support/use-postgres.js'
import { runtime, T0 } from './helpers.js'
import { describeSearching, type EngineFixture } from './search-specs.js'

/** The queries of search-specs.ts against PostgreSQL's index (tsvector and GIN in the store's database). */
const server = usePostgres()

export async function postgresSearchFixture(): Promise<EngineFixture & { db: pg.Client }> {
  const url = await server().database()
  const fixture = { clock: T0 }
  const log = await openPostgresStore(url, { now: () => fixture.clock })
  const db = new pg.Client({ connectionString: url, types: PG_TYPES })
  await db.connect()
  await ensurePostgresIndex(db)
  const indexer = createPostgresIndexer()
  return Object.assign(fixture, {
    db,
    async append(sessionId: string, events: Parameters<typeof log.append>[1], meta = runtime) {
      const stored = await log.append(sessionId, events, { meta })
      return (stored.at(-1) as { seq: number }).seq
    },
    async index() {
      await indexer.catchUp(db)
    },
    async search(query: string, options?: Parameters<typeof queryPostgresIndex>[2]) {
      return (await queryPostgresIndex(db, parseQuery(query, fixture.clock), options)).hits
    },
    page: (query: string, options?: Parameters<typeof queryPostgresIndex>[2]) =>
      queryPostgresIndex(db, parseQuery(query, fixture.clock), options),
    async close() {
      await db.end()
      await log.close()
    },
  })
}

describeSearching(postgresSearchFixture)
