import { afterEach, describe, expect, it } from 'vitest'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import { isChronicleError } from '../../src/events/errors.js'
import pg from 'pg'
import { PG_TYPES, type PostgresEventLog } from '../../src/events/postgres/log.js'
import { openPostgresStore } from '../../src/projections/postgres/open.js'
import { pgLoadView } from '../../src/projections/postgres/read-models.js'
import { verifyPostgresAt } from '../../src/projections/postgres/verify.js'
import { usePostgres } from '../support/use-postgres.js'

/**
 * The projection runs in the append's transaction and caches the views it built, so the next append of the
 * session starts from them. A transaction can still fail after it projected — its COMMIT, or a statement sent
 * with it (a second acceptance of an inputId) — and what it cached are versions that never were. Two logs on
 * one database (two nodes, or a server and `chronicle` beside it): once the other has appended those versions,
 * a cache kept across the failure would pass for them and write the session's rows from a wrong state.
 */
const postgres = usePostgres()

const meta = { actor: 'user' as const }
const created: ChronicleEvent = { type: 'session.created', data: { directory: '/w', agent: 'build', model: null } }
const accepted = (inputId: string): ChronicleEvent => ({
  type: 'input.accepted',
  data: { inputId, parts: [{ type: 'text', text: 'hi' }], delivery: 'steer', noReply: false, digest: 'd' },
})

describe('the PostgreSQL projection when its transaction does not commit', () => {
  const logs: PostgresEventLog[] = []
  afterEach(async () => {
    for (const log of logs.splice(0)) await log.close()
  })

  it("forgets the views it cached: the session's rows stay a fold of its log after another log appends", async () => {
    const url = await postgres().database()
    const a = await openPostgresStore(url)
    const b = await openPostgresStore(url)
    logs.push(a, b)
    // a caches the session at version 2, the log's head
    await a.append('ses_1', [created, accepted('in_1')], { meta })
    // a second acceptance of in_1 (two nodes taking one input at once) fails at its COMMIT, after a projected
    // version 3 from its cache
    const twice = await a.append('ses_1', [accepted('in_1')], { meta }).catch((e: unknown) => e)
    expect(isChronicleError(twice)).toBe(true)
    // b makes version 3 what it is: the session archived
    await b.append('ses_1', [{ type: 'session.archived', data: {} }], { meta, expectedVersion: 2 })
    // a appends version 4 on top of it
    await a.append('ses_1', [{ type: 'session.renamed', data: { title: 'four' } }], { meta, expectedVersion: 3 })

    const report = await verifyPostgresAt(url)
    expect(report.differences).toEqual([])
    const db = new pg.Pool({ connectionString: url, max: 1, types: PG_TYPES })
    const { session } = await pgLoadView(db, 'ses_1').finally(() => db.end())
    expect([session?.title, session?.archived, session?.version]).toEqual(['four', true, 4])
  })
})
