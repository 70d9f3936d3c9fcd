import pg from 'pg'
import { describe, expect, it } from 'vitest'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import { openPostgresStore } from '../../src/projections/postgres/open.js'
import { postgresReadModels } from '../../src/projections/postgres/read-models.js'
import { postgresTimeTravel } from '../../src/projections/postgres/time-travel.js'
import { SNAPSHOT_FORMAT } from '../../src/projections/time-travel/snapshot-delta.js'
import { usePostgres } from '../support/use-postgres.js'
import { json } from './helpers.js'
import { describeTimeTravelContract } from './time-travel-contract.js'

/** The time-travel contract on a real PostgreSQL server (`npm run test:postgres`): a new database per test. */
const server = usePostgres()

describeTimeTravelContract('PostgreSQL', {
  async open(snapshotEvery) {
    const log = await openPostgresStore(await server().database())
    return {
      log,
      travel: postgresTimeTravel(log, { snapshotEvery }),
      models: postgresReadModels(log),
      close: () => log.close(),
    }
  },
})

const meta = { actor: 'runtime' as const }
const renamed = (n: number): ChronicleEvent => ({ type: 'session.renamed', data: { title: `t${n}` } })

describe('PostgreSQL’s snapshot cache', () => {
  async function longSession(events: number) {
    const url = await server().database()
    const log = await openPostgresStore(url)
    await log.append(
      'ses_long',
      [{ type: 'session.created', data: { directory: '/w', agent: 'build', model: null } }],
      {
        meta,
      },
    )
    await log.append(
      'ses_long',
      Array.from({ length: events - 1 }, (_, i) => renamed(i + 2)),
      { meta },
    )
    const db = new pg.Client({ connectionString: url })
    await db.connect()
    return { log, db, url, close: async () => Promise.all([log.close(), db.end()]) }
  }

  it('records a chain of rows as it folds, and answers from it', async () => {
    const { log, db, close } = await longSession(95)
    try {
      const travel = postgresTimeTravel(log, { snapshotEvery: 10 })
      expect((await travel.stateAt('ses_long')).session.title).toBe('t95')
      const { rows } = await db.query('SELECT version, base_version FROM snapshots ORDER BY version')
      expect(rows).toEqual(Array.from({ length: 9 }, (_, i) => ({ version: (i + 1) * 10, base_version: i * 10 })))
      expect((await travel.stateAt('ses_long', 57)).session.title).toBe('t57')
    } finally {
      await close()
    }
  })

  it('answers right past a damaged row, from the log', async () => {
    const { log, db, close } = await longSession(60)
    try {
      const travel = postgresTimeTravel(log, { snapshotEvery: 10 })
      const truth = json(await travel.stateAt('ses_long', 45))
      await db.query("UPDATE snapshots SET json = '{not json', packed = NULL WHERE version = 20")
      expect(json(await travel.stateAt('ses_long', 45))).toEqual(truth)
    } finally {
      await close()
    }
  })

  it('never reads rows of older projection code: a fold writes its own over them, and an open drops them', async () => {
    const { log, db, url, close } = await longSession(60)
    try {
      const travel = postgresTimeTravel(log, { snapshotEvery: 10 })
      const truth = json(await travel.stateAt('ses_long', 45))
      const formats = async () => (await db.query('SELECT format FROM snapshots ORDER BY version')).rows
      await db.query("UPDATE snapshots SET format = 'older-code'")
      expect(json(await travel.stateAt('ses_long', 45))).toEqual(truth)
      expect(await formats()).toEqual(Array.from({ length: 4 }, () => ({ format: SNAPSHOT_FORMAT })))
      await db.query("UPDATE snapshots SET format = 'older-code'")
      const reopened = await openPostgresStore(url)
      try {
        expect(await formats()).toEqual([])
        expect(json(await postgresTimeTravel(reopened, { snapshotEvery: 10 }).stateAt('ses_long', 45))).toEqual(truth)
      } finally {
        await reopened.close()
      }
    } finally {
      await close()
    }
  })
})
