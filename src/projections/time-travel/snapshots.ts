import type Database from 'better-sqlite3'
import type { SessionView } from '../fold/model.js'
import { perConnection } from '../rows/prepared.js'
import { type ChainRow, mergeChain, SNAPSHOT_FORMAT, type SnapshotRow } from './snapshot-delta.js'

export { SNAPSHOT_FORMAT } from './snapshot-delta.js'

/**
 * SQLite's snapshot cache: the rows of snapshot-delta.ts in the `snapshots`
 * table, a deflated row a BLOB (the storage class tells the two apart).
 */
export class SnapshotCache {
  private readonly stmt

  constructor(readonly db: Database.Database) {
    // A cache written by other projection code is wrong for this code: drop it
    // (and never read it, should this delete be rolled back with a transaction).
    db.prepare('DELETE FROM snapshots WHERE format <> ?').run(SNAPSHOT_FORMAT)
    this.stmt = {
      chain: db.prepare(
        `SELECT version, seq, base_version AS baseVersion, data FROM snapshots
         WHERE session_id = ? AND version <= ? AND format = '${SNAPSHOT_FORMAT}' ORDER BY version`,
      ),
      tail: db.prepare('SELECT MAX(version) FROM snapshots WHERE session_id = ?').pluck(),
      insert: db.prepare(
        `INSERT OR IGNORE INTO snapshots (session_id, version, seq, base_version, format, data) VALUES (?, ?, ?, ?, '${SNAPSHOT_FORMAT}', ?)`,
      ),
    }
  }

  /** Merges the unbroken chain of rows up to `version` into `view` (snapshot-delta.ts mergeChain). */
  mergeInto(view: SessionView, sessionId: string, version: number): ChainRow | undefined {
    return mergeChain(view, this.stmt.chain.iterate(sessionId, version) as Iterable<SnapshotRow>)
  }

  /** The highest version with a row (0 when none): new rows are only ever added after it. */
  tail(sessionId: string): number {
    return (this.stmt.tail.get(sessionId) as number | null) ?? 0
  }

  write(sessionId: string, row: SnapshotRow): void {
    this.stmt.insert.run(sessionId, row.version, row.seq, row.baseVersion, row.data)
  }
}

/** The snapshot cache of a database connection (one per connection). */
export const snapshotCache = perConnection((db) => new SnapshotCache(db))
