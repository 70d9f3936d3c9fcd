import type Database from 'better-sqlite3'

/**
 * A connection's prepared statement for `sql`, made once: the read-model
 * queries run on every request and every run step, and preparing costs
 * more than a keyed read. `pluck` statements are kept apart (the mode sticks
 * to the statement). Only for `get`/`all`: an `iterate` would hold its
 * statement busy for the next caller.
 */
export function prepared(db: Database.Database, sql: string, pluck = false): Database.Statement {
  const statements = cache(db)
  const key = pluck ? `pluck:${sql}` : sql
  let statement = statements.get(key)
  if (!statement) {
    statement = db.prepare(sql)
    if (pluck) statement.pluck()
    statements.set(key, statement)
  }
  return statement
}

const cache = perConnection((): Map<string, Database.Statement> => new Map())

/**
 * `make(db)` once per connection, kept as long as the connection lives: for
 * prepared statements and caches that belong to one connection.
 */
export function perConnection<T>(make: (db: Database.Database) => T): (db: Database.Database) => T {
  const made = new WeakMap<Database.Database, T>()
  return (db) => {
    let value = made.get(db)
    if (value === undefined) {
      value = make(db)
      made.set(db, value)
    }
    return value
  }
}
