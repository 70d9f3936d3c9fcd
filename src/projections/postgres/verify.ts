import pg from 'pg'
import type { ChainBreak, ChainReport } from '../../events/chain-check.js'
import { chainedFields, eventHash, logDigest } from '../../events/chain.js'
import type { EventRow } from '../../events/rows.js'
import { ChronicleError } from '../../events/errors.js'
import { PG_TYPES } from '../../events/postgres/log.js'
import { redactUrl } from '../../events/postgres/url.js'
import type { Progress } from '../upkeep/rebuild.js'
import { diffViews, type Difference, type VerifyReport } from '../upkeep/verify.js'
import { foldAt } from './projection.js'
import { pgLoadView, type Queryable } from './read-models.js'

/**
 * `verify` on PostgreSQL, as src/projections/upkeep/verify.ts on SQLite: the hash
 * chain recomputed from the stored texts (versions 1, 2, 3… per stream, seqs
 * without a gap, the head naming the last event), the whole-log digest on the
 * way, then every session's read model against a fold of its log.
 */
export async function verifyPostgres(db: Queryable, options: { progress?: Progress } = {}): Promise<VerifyReport> {
  const chain = await checkPgChain(db)
  const logged = (
    await db.query<{ id: string }>(
      "SELECT session_id AS id FROM events WHERE version = 1 AND session_id NOT LIKE 'sys\\_%' ORDER BY seq",
    )
  ).rows.map((r) => r.id)
  const stored = (await db.query<{ id: string }>('SELECT id FROM sessions')).rows.map((r) => r.id)
  const isLogged = new Set(logged)
  const ids = [...new Set([...logged, ...stored])]
  const differences: Difference[] = []
  for (const [i, sessionId] of ids.entries()) {
    const expected = isLogged.has(sessionId) ? await foldAt(db, sessionId, chain.head.seq) : null
    differences.push(...diffViews(sessionId, await pgLoadView(db, sessionId), expected))
    options.progress?.(i + 1, ids.length)
  }
  return { sessions: ids.length, differences, chain }
}

/** verifyPostgres on its own connection to `url`. */
export async function verifyPostgresAt(url: string, options: { progress?: Progress } = {}): Promise<VerifyReport> {
  const client = new pg.Client({ connectionString: url, types: PG_TYPES })
  client.on('error', () => {})
  try {
    await client.connect()
  } catch (err) {
    throw new ChronicleError(
      'STORE_UNAVAILABLE',
      `cannot connect to PostgreSQL at ${redactUrl(url)}: ${err instanceof Error ? err.message : String(err)}`,
    )
  }
  try {
    return await verifyPostgres(client, options)
  } finally {
    await client.end()
  }
}

interface PgChainRow extends EventRow {
  hash: Buffer
}

const PAGE = 5000

async function checkPgChain(db: Queryable): Promise<ChainReport> {
  const breaks: ChainBreak[] = []
  const streams = new Map<string, { version: number; hash: Buffer }>()
  let digest: Buffer = Buffer.alloc(0)
  let expectedSeq = 0
  let lastHash: Buffer | null = null
  let events = 0
  for (;;) {
    const { rows } = await db.query<PgChainRow>(
      `SELECT seq, session_id, version, type, schema_version, data, meta, at, hash FROM events
       WHERE seq > $1 ORDER BY seq LIMIT ${PAGE}`,
      [expectedSeq],
    )
    for (const row of rows) {
      events++
      const broken = (reason: string) => breaks.push({ seq: row.seq, sessionId: row.session_id, reason })
      if (row.seq !== expectedSeq + 1)
        breaks.push({
          seq: expectedSeq + 1,
          sessionId: '',
          reason: `seqs ${expectedSeq + 1}…${row.seq - 1} are missing`,
        })
      expectedSeq = row.seq
      const last = streams.get(row.session_id)
      if (row.version !== (last?.version ?? 0) + 1)
        broken(`version ${row.version} follows ${last?.version ?? 0} in its session`)
      const fields = chainedFields(row)
      if (!eventHash(last?.hash ?? null, fields).equals(row.hash))
        broken('its hash does not match the event and its chain')
      streams.set(row.session_id, { version: row.version, hash: row.hash })
      digest = logDigest(digest, row.hash)
      lastHash = row.hash
    }
    if (rows.length < PAGE) break
  }
  const { rows } = await db.query<{ seq: number; hash: Buffer | null }>('SELECT seq, hash FROM log_head WHERE id = 1')
  const head = rows[0]
  if (head && head.seq !== expectedSeq)
    breaks.push({
      seq: expectedSeq + 1,
      sessionId: '',
      reason: `the log ends at seq ${expectedSeq}, but its head says ${head.seq}`,
    })
  else if (head?.hash && !head.hash.equals(lastHash ?? Buffer.alloc(0)))
    breaks.push({ seq: expectedSeq, sessionId: '', reason: "the last event's hash is not the one the head recorded" })
  return { events, unchained: 0, breaks, head: { seq: expectedSeq, digest: digest.toString('hex') } }
}
