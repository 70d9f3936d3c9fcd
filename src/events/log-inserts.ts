import type Database from 'better-sqlite3'

/**
 * A commit's event_log rows, inserted up to ROWS_PER_STATEMENT to a statement
 * in the order they were added. Running a statement costs more than binding
 * a row to it: a commit of 100 streamed deltas spends about half a
 * microsecond less per event so (docs/ARCHITECTURE.md "Performance notes").
 * Each row is still inserted on its own by SQLite, its triggers run for it
 * and a constraint it breaks fails the statement, and so the transaction.
 * What was added is in the log only after `flush`: the store flushes before
 * anything in the transaction reads the log (the projection reads the
 * deltas streaming parts are made of).
 */

/** the columns of a row, in the order `add` takes them */
const COLUMNS = 'seq, stream, version, type, schema_version, data, meta, at, part, hash'
const PER_ROW = 10
/** a row's values: the hash comes in hex, which SQLite decodes for less than a Buffer costs to make */
const ROW = '(?, ?, ?, ?, ?, ?, ?, ?, ?, unhex(?))'
const ROWS_PER_STATEMENT = 32

export class LogInserts {
  private readonly values: unknown[] = []
  /** a statement per number of rows, made when first needed */
  private readonly statements: Database.Statement[] = []

  constructor(private readonly db: Database.Database) {}

  /** Adds one row; rows are inserted when ROWS_PER_STATEMENT are waiting, or at `flush`. */
  add(
    seq: number,
    stream: number,
    version: number,
    type: number,
    schemaVersion: number,
    data: string | Buffer,
    meta: number,
    at: number,
    part: number | null,
    hashHex: string,
  ): void {
    this.values.push(seq, stream, version, type, schemaVersion, data, meta, at, part, hashHex)
    if (this.values.length === ROWS_PER_STATEMENT * PER_ROW) this.flush()
  }

  /** Inserts every row added and not yet inserted. */
  flush(): void {
    const rows = this.values.length / PER_ROW
    if (rows === 0) return
    try {
      this.statement(rows).run(this.values)
    } finally {
      this.values.length = 0
    }
  }

  /** Forgets rows added and not inserted (their transaction failed before `flush`). */
  discard(): void {
    this.values.length = 0
  }

  private statement(rows: number): Database.Statement {
    let statement = this.statements[rows]
    if (!statement) {
      statement = this.db.prepare(
        `INSERT INTO event_log (${COLUMNS}) VALUES ${Array.from({ length: rows }, () => ROW).join(', ')}`,
      )
      this.statements[rows] = statement
    }
    return statement
  }
}
