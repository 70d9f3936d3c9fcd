import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { sqlitePorts } from '../../src/projections/store-ports.js'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { afterAll, describe, expect, it } from 'vitest'
import { MIGRATIONS, schemaVersion } from '../../src/events/schema.js'
import { openStore } from '../../src/projections/open.js'
import { stateAt } from '../../src/projections/time-travel/time-travel.js'
import { verify } from '../../src/projections/upkeep/verify.js'
import { audit } from '../../src/runtime/audit/audit.js'

/**
 * Upgrades never lose history (docs/UPGRADES.md): each store under
 * test/fixtures/stores/ was written by the commit that shipped its schema
 * version (scripts/make-store-fixtures.mjs), with what that code answered
 * recorded beside it. Today's code opens each one: its migrations apply, its
 * read models equal a fold of its log, every step audits, its hash chain is
 * intact (the head digest that version computed still comes out), and the
 * state at each recorded seq is what that version answered.
 */
interface Expected {
  readonly rev: string
  readonly schemaVersion: number
  readonly events: number
  readonly sessions: readonly string[]
  readonly chain: { head: { seq: number; digest: string }; unchained: number } | null
  /** what that version's own audit counted, where it had one and a real-runtime session ran (schema 12 on) */
  readonly audit: { steps: number; verified: number } | null
}
interface RecordedState {
  readonly sessionId: string
  readonly seq: number
  readonly state: unknown
}

const FIXTURES = join(import.meta.dirname, '../fixtures/stores')
const root = mkdtempSync(join(tmpdir(), 'chronicle-upgrade-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

/** The fixture's store as a fresh file, to upgrade without touching the committed one. */
function unpacked(dir: string): string {
  const file = join(mkdtempSync(join(root, `${dir}-`)), 'chronicle.db')
  writeFileSync(file, gunzipSync(readFileSync(join(FIXTURES, dir, 'store.db.gz'))))
  return file
}

const fixtures = readdirSync(FIXTURES).sort()

describe('stores written by every shipped schema version', () => {
  it('covers every version from the first to the latest (2 never shipped alone: c56f730 added 2 and 3)', () => {
    const versions = fixtures.map((d) => Number(/^v(\d+)-/.exec(d)?.[1]))
    expect(versions).toEqual(MIGRATIONS.map((m) => m.version).filter((v) => v !== 2))
  })

  describe.each(fixtures)('%s', (dir) => {
    const expected = JSON.parse(readFileSync(join(FIXTURES, dir, 'expected.json'), 'utf8')) as Expected
    const states = JSON.parse(
      gunzipSync(readFileSync(join(FIXTURES, dir, 'states.json.gz'))).toString(),
    ) as RecordedState[]

    it('opens with its migrations applied; verify, the chain and audit find nothing wrong', async () => {
      const store = openStore(unpacked(dir), { snapshotOnCommit: false })
      try {
        expect(schemaVersion(store.reader())).toBe(MIGRATIONS.length)
        const report = verify(
          store,
          expected.chain ? { anchor: { seq: expected.chain.head.seq, digest: expected.chain.head.digest } } : {},
        )
        expect(report.differences).toEqual([])
        expect(report.chain.breaks).toEqual([])
        expect(report.chain.events).toBe(expected.events)
        if (expected.chain) {
          expect(report.chain.head).toEqual(expected.chain.head)
          expect(report.chain.unchained).toBe(expected.chain.unchained)
        } else {
          // logged before the hash chain: none of it is chained, and nothing claims it is
          expect(report.chain.unchained).toBe(expected.events)
        }
        // The scripted sessions' steps recorded no request to rebuild; where the version's real runtime ran a
        // session (schema 12 on), each of its steps is rebuilt from the log and must give its recorded digest.
        const audited = await audit(sqlitePorts(store), 'all')
        expect(audited.mismatches).toEqual([])
        expect(audited.steps).toBeGreaterThan(0)
        if (expected.audit) expect({ steps: audited.steps, verified: audited.verified }).toEqual(expected.audit)
      } finally {
        store.close()
      }
    })

    it('answers the state at each recorded seq as that version did', () => {
      const store = openStore(unpacked(dir), { snapshotOnCommit: false })
      try {
        expect(states.length).toBeGreaterThan(20)
        // Every field that version answered is answered the same; fields added since (a session's
        // compaction.applied, say) may come with it. Arrays keep their length: nothing gained or lost.
        for (const { sessionId, seq, state } of states) {
          expect({ sessionId, seq, state: stateAt(store, sessionId, seq) }).toMatchObject({ sessionId, seq, state })
        }
      } finally {
        store.close()
      }
    })
  })
})
