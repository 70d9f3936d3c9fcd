import pg from 'pg'
import { describe, expect, it } from 'vitest'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import { PostgresEventLog } from '../../src/events/postgres/log.js'
import { PG_MIGRATIONS } from '../../src/events/postgres/schema.js'
import { usePostgres } from '../support/use-postgres.js'

/**
 * The PostgreSQL log's schema: append-only as SQLite's (nothing updates,
 * deletes or truncates an event or a blob, whoever connects), and migrated
 * once, recorded, however many servers open the database at once.
 */
const postgres = usePostgres()
const meta = { actor: 'user' as const }
const created: ChronicleEvent = { type: 'session.created', data: { directory: '/w', agent: 'build', model: null } }

describe('the PostgreSQL log’s schema', () => {
  it('refuses to update, delete or truncate an event, or to change a blob, from any connection', async () => {
    const url = await postgres().database()
    const log = await PostgresEventLog.open(url)
    await log.append('ses_a', [created], { meta })
    const hash = await log.blobs.put('a system prompt')
    await log.close()
    const db = new pg.Client({ connectionString: url })
    await db.connect()
    try {
      for (const sql of [
        "UPDATE events SET data = '{}' WHERE seq = 1",
        'DELETE FROM events WHERE seq = 1',
        'TRUNCATE events',
        `UPDATE blobs SET content = 'edited' WHERE hash = '${hash}'`,
        `DELETE FROM blobs WHERE hash = '${hash}'`,
      ]) {
        await expect(db.query(sql), sql).rejects.toThrow(/immutable/)
      }
      expect((await db.query('SELECT count(*)::int AS n FROM events')).rows[0]).toEqual({ n: 1 })
    } finally {
      await db.end()
    }
  })

  it('migrates once, recorded, when several servers open a new database at the same moment', async () => {
    const url = await postgres().database()
    const logs = await Promise.all(Array.from({ length: 4 }, () => PostgresEventLog.open(url, { connections: 1 })))
    for (const log of logs) await log.close()
    const db = new pg.Client({ connectionString: url })
    await db.connect()
    try {
      const { rows } = await db.query('SELECT version, name FROM chronicle_migrations ORDER BY version')
      expect(rows).toEqual(PG_MIGRATIONS.map((m) => ({ version: m.version, name: m.name })))
    } finally {
      await db.end()
    }
  })
})
