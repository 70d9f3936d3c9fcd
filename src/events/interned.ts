import type Database from 'better-sqlite3'

/**
 * A lookup table that turns a repeated string (a session id, an event type,
 * a meta) into the small integer the event_log row stores (migration 5).
 *
 * Ids are remembered only once the transaction that found or made them has
 * committed: a rolled-back insert must not leave an id behind that no row
 * backs. Within the transaction they are held aside (`pending`). Memory is
 * bounded: the oldest remembered values are forgotten first and read again.
 */
export class Interned {
  private readonly ids = new Map<string, number>()
  private readonly pending = new Map<string, number>()
  private readonly find: Database.Statement
  private readonly add: Database.Statement

  /**
   * `keyed`: the table's indexed `key` column holds this function of the value, and values are looked up by it
   * (then compared whole) instead of by `column` itself.
   */
  constructor(
    db: Database.Database,
    table: string,
    column: string,
    private readonly capacity: number,
    private readonly keyed?: (value: string) => number,
  ) {
    this.find = (
      keyed === undefined
        ? db.prepare(`SELECT id FROM ${table} WHERE ${column} = ?`)
        : db.prepare(`SELECT id FROM ${table} WHERE key = ? AND ${column} = ?`)
    ).pluck()
    this.add = db.prepare(
      keyed === undefined
        ? `INSERT INTO ${table} (${column}) VALUES (?)`
        : `INSERT INTO ${table} (key, ${column}) VALUES (?, ?)`,
    )
  }

  /** The value's id, added to the table if new; call inside the write transaction. */
  id(value: string): number {
    const known = this.ids.get(value) ?? this.pending.get(value)
    if (known !== undefined) return known
    const args = this.keyed === undefined ? [value] : [this.keyed(value), value]
    const found = this.find.get(...args) as number | undefined
    const id = found ?? Number(this.add.run(...args).lastInsertRowid)
    this.pending.set(value, id)
    return id
  }

  /** The transaction committed: its ids are safe to remember. */
  commit(): void {
    for (const [value, id] of this.pending) {
      this.ids.set(value, id)
      if (this.ids.size > this.capacity) this.ids.delete(this.ids.keys().next().value as string)
    }
    this.pending.clear()
  }

  /** The transaction rolled back (or belongs to a caller who may still roll it back): forget its ids. */
  rollback(): void {
    this.pending.clear()
  }
}
