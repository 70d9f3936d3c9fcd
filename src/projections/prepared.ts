import type Database from 'better-sqlite3'

/**
 * A connection's prepared statement for `sql`, made once: the read-model
 * queries run on every request and every run step, and preparing costs
 * more than a keyed read. `pluck` statements are kept apart (the mode sticks
 * to the statement). Only for `get`/`all`: an `iterate` would hold its
 * statement busy for the next caller.
 */
export function prepared(db: Database.Database, sql: string, pluck = false): Database.Statement {
  let statements = cache.get(db)
  if (!statements) {
    statements = new Map()
    cache.set(db, statements)
  }
  const key = pluck ? `pluck:${sql}` : sql
  let statement = statements.get(key)
  if (!statement) {
    statement = db.prepare(sql)
    if (pluck) statement.pluck()
    statements.set(key, statement)
  }
  return statement
}

const cache = new WeakMap<Database.Database, Map<string, Database.Statement>>()
