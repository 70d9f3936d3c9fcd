import { inflateRawSync } from 'node:zlib'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type Database from 'better-sqlite3'
import type { EventStore } from '../../src/events/store.js'
import { foldSession } from '../../src/projections/fold/fold.js'
import { type OpenOptions, openStore } from '../../src/projections/open.js'
import { loadView } from '../../src/projections/queries/read-model.js'
import { rebuild } from '../../src/projections/upkeep/rebuild.js'
import { rowChain } from '../../src/projections/rows/shared-rows.js'
import { verify } from '../../src/projections/upkeep/verify.js'
import { play, stepsArb } from './histories.js'
import { plainView } from './scenarios.js'

/**
 * The projection invariant, for random valid histories: what the live
 * projection stored equals a fresh fold of the log; rebuild reproduces the
 * live tables; verify finds nothing — and does find a tampered row.
 */

/**
 * The read models as stored: message rows as they are, and each session and
 * its parts as read (a streaming part's row and a session's row are as of
 * their last change; the rest is read from the log, so rows may differ
 * between writers while what is read may not).
 */
function tables(db: Database.Database) {
  const ids = db.prepare('SELECT id FROM sessions ORDER BY id').pluck().all() as string[]
  return {
    messages: db.prepare('SELECT * FROM messages ORDER BY session_id, id').all(),
    views: ids.map((id) => plainView(loadView({ reader: () => db }, id))),
  }
}

async function withPlayed<T>(
  steps: Parameters<typeof play>[1],
  check: (store: EventStore, sessions: string[]) => T,
  options: OpenOptions = {},
): Promise<T> {
  const store = openStore(':memory:', options)
  try {
    const { sessions } = await play(store, steps)
    return check(store, sessions)
  } finally {
    store.close()
  }
}

describe('projections over random valid histories', () => {
  it('stored read models equal foldSession, rebuild equals the live tables, verify finds nothing', async () => {
    await fc.assert(
      // A small or no view cache makes the projection read what it needs back from the tables and the log mid-stream.
      fc.asyncProperty(stepsArb(), fc.constantFrom(256, 1, 0), async (steps, cacheSessions) => {
        await withPlayed(
          steps,
          (store, sessions) => {
            for (const id of sessions) expect(plainView(loadView(store, id))).toEqual(plainView(foldSession(store, id)))
            expect(verify(store).differences).toEqual([])
            const live = tables(store.asCommitted.reader())
            const report = rebuild(store)
            expect(report.sessions).toBe(sessions.length)
            expect(report.events).toBe(store.head())
            expect(tables(store.asCommitted.reader())).toEqual(live)
          },
          { cache: { entries: cacheSessions } },
        )
      }),
      { numRuns: 90, endOnFailure: true },
    )
  })

  it('verify reports a tampered read-model row', async () => {
    await fc.assert(
      fc.asyncProperty(
        stepsArb(60),
        fc.nat(),
        fc.constantFrom('session', 'message', 'part'),
        async (steps, k, what) => {
          await withPlayed(steps, (store, sessions) => {
            const db = store.asCommitted.reader()
            const pick = <T>(rows: T[]): T | undefined => rows[k % Math.max(rows.length, 1)]
            let expected: { sessionId: string; entity: string; id: string } | undefined
            if (what === 'message' || what === 'part') {
              const row = pick(
                db.prepare(`SELECT session_id, id, data FROM ${what}s ORDER BY session_id, id`).all() as {
                  session_id: string
                  id: string
                  data: string | Buffer
                }[],
              )
              if (row) {
                // Rows may be stored deflated and without the keys their columns hold: tamper with a field the row itself carries.
                const json = typeof row.data === 'string' ? row.data : inflateRawSync(row.data).toString('utf8')
                const tampered = { ...JSON.parse(json), tampered: true }
                db.prepare(`UPDATE ${what}s SET data = ? WHERE session_id = ? AND id = ?`).run(
                  JSON.stringify(tampered),
                  row.session_id,
                  row.id,
                )
                expected = { sessionId: row.session_id, entity: what, id: row.id }
              }
            }
            if (!expected) {
              const id = pick(sessions) as string
              db.prepare(
                `UPDATE sessions SET data = json_set(data, '$.title', 'tampered ' || (data ->> '$.title')) WHERE id = ?`,
              ).run(id)
              expected = { sessionId: id, entity: 'session', id }
            }
            const found = verify(store).differences.map(({ sessionId, entity, id }) => ({ sessionId, entity, id }))
            // a fork reads its parent's rows as of the fork point (shared-rows.ts): a tampered row it reads is its too
            const readers = new Set(
              expected.entity === 'session'
                ? [expected.sessionId]
                : sessions.filter((s) => rowChain(db, s).some((level) => level.sessionId === expected?.sessionId)),
            )
            expect(found).toContainEqual(expected)
            for (const d of found) {
              expect({ entity: d.entity, id: d.id }).toEqual({ entity: expected.entity, id: expected.id })
              expect(readers.has(d.sessionId)).toBe(true)
            }
            rebuild(store)
            expect(verify(store).differences).toEqual([])
          })
        },
      ),
      { numRuns: 40 },
    )
  })
})

describe('verify', () => {
  it('ignores the order of keys in a stored row but not a changed value', () => {
    const store = openStore(':memory:')
    store.append('ses_a', [{ type: 'session.created', data: { directory: '/r', agent: 'build', model: null } }], {
      meta: { actor: 'user' },
    })
    const row = store.asCommitted.reader().prepare('SELECT data FROM sessions').pluck().get() as string
    const reordered = Object.fromEntries(Object.entries(JSON.parse(row) as Record<string, unknown>).reverse())
    store.asCommitted.reader().prepare('UPDATE sessions SET data = ?').run(JSON.stringify(reordered))
    expect(verify(store).differences).toEqual([])
    store.asCommitted
      .reader()
      .prepare('UPDATE sessions SET data = ?')
      .run(JSON.stringify({ ...reordered, status: 'busy' }))
    expect(verify(store).differences).toEqual([
      {
        sessionId: 'ses_a',
        entity: 'session',
        id: 'ses_a',
        stored: expect.objectContaining({ status: 'busy' }),
        expected: expect.objectContaining({ status: 'idle' }),
      },
    ])
    store.asCommitted.reader().prepare('DELETE FROM sessions').run()
    expect(verify(store).differences.map((d) => [d.entity, d.stored, typeof d.expected])).toEqual([
      ['session', undefined, 'object'],
    ])
    store.close()
  })
})
