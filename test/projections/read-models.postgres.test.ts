import fc from 'fast-check'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import type { EventMeta, StoredEvent } from '../../src/events/envelope.js'
import { PG_TYPES } from '../../src/events/postgres/log.js'
import type { EventStore } from '../../src/events/store.js'
import { openStore } from '../../src/projections/open.js'
import { openPostgresStore } from '../../src/projections/postgres/open.js'
import { foldAt } from '../../src/projections/postgres/projection.js'
import { pgLoadView } from '../../src/projections/postgres/read-models.js'
import { loadView } from '../../src/projections/queries/read-model.js'
import { usePostgres } from '../support/use-postgres.js'
import { play, stepsArb } from './histories.js'
import { conversation, fork, revert, plainView } from './scenarios.js'

/**
 * The read models on PostgreSQL are SQLite's: random valid histories (forks at
 * random events, reverts, patches, streaming) are played on SQLite, then
 * appended to PostgreSQL commit by commit, each commit's appends in one of
 * its transactions, with their times. Each session then reads the same on
 * both engines, and equals a fold of its log.
 */
const postgres = usePostgres()

interface Append {
  readonly sessionId: string
  readonly events: ChronicleEvent[]
  readonly meta: EventMeta
  readonly at: number
}

/** A commit's events as the appends that made them: runs of one session's events with one meta and time. */
function appendsOf(commit: readonly StoredEvent[]): Append[] {
  const out: Append[] = []
  for (const e of commit) {
    const last = out.at(-1)
    const at = Date.parse(e.at)
    const event = { type: e.type, data: e.data } as ChronicleEvent
    if (
      last &&
      last.sessionId === e.sessionId &&
      last.at === at &&
      JSON.stringify(last.meta) === JSON.stringify(e.meta)
    )
      last.events.push(event)
    else out.push({ sessionId: e.sessionId, events: [event], meta: e.meta, at })
  }
  return out
}

/**
 * Builds a history on SQLite, appends its commits to a new PostgreSQL database as they were made, and
 * checks that each session reads the same on both and equals a fold of its log there.
 */
async function mirrored(build: (sqlite: EventStore) => Iterable<string> | Promise<Iterable<string>>): Promise<void> {
  const sqlite = openStore(':memory:')
  const commits: StoredEvent[][] = []
  sqlite.onCommit((events) => commits.push([...events]))
  const url = await postgres().database()
  const log = await openPostgresStore(url)
  const db = new pg.Client({ connectionString: url, types: PG_TYPES })
  await db.connect()
  try {
    const sessions = await build(sqlite)
    for (const commit of commits) {
      await Promise.all(appendsOf(commit).map((a) => log.enqueue(a.sessionId, a.events, { meta: a.meta, at: a.at })))
    }
    expect(await log.head()).toBe(sqlite.head())
    for (const id of sessions) {
      const stored = plainView(await pgLoadView(db, id))
      expect(stored).toEqual(plainView(loadView(sqlite, id)))
      expect(stored).toEqual(plainView(await foldAt(db, id, sqlite.head())))
    }
  } finally {
    await db.end()
    await log.close()
    sqlite.close()
  }
}

describe('the read models on PostgreSQL', () => {
  it('equal SQLite’s for the same random history, commit by commit, and a fold of each session’s log', async () => {
    await fc.assert(
      fc.asyncProperty(stepsArb(60), async (steps) => {
        await mirrored(async (sqlite) => (await play(sqlite, steps)).sessions)
      }),
      { numRuns: 25, endOnFailure: true },
    )
  }, 300_000)

  it('a fork made after its parent reverted, at an event before the revert, reads the messages unreverted', async () => {
    await mirrored((sqlite) => {
      const { ends, messages } = conversation(sqlite, 'ses_p', 6)
      revert(sqlite, 'ses_p', messages.slice(-4))
      fork(sqlite, 'ses_f', 'ses_p', ends[5] as number)
      fork(sqlite, 'ses_e', 'ses_p', ends[1] as number)
      fork(sqlite, 'ses_g', 'ses_f', ends[3] as number)
      return ['ses_p', 'ses_f', 'ses_e', 'ses_g']
    })
  })

  it('a parent’s revert reaches a fork of a fork that reads past its own parent’s later rewrite', async () => {
    await mirrored((sqlite) => {
      const { ends, messages } = conversation(sqlite, 'ses_p', 3)
      fork(sqlite, 'ses_f', 'ses_p', ends[2] as number)
      fork(sqlite, 'ses_g', 'ses_f', sqlite.head())
      revert(sqlite, 'ses_f', messages.slice(-2))
      revert(sqlite, 'ses_p', messages.slice(-2))
      return ['ses_p', 'ses_f', 'ses_g']
    })
  })

  it('a later commit reads entities the projection’s cache let go of from the rows, not from an old batch’s', async () => {
    await mirrored((sqlite) => {
      const { messages } = conversation(sqlite, 'ses_long', 200) // more entities than a cached view holds
      revert(sqlite, 'ses_long', messages.slice(0, 12))
      return ['ses_long']
    })
  })
})
