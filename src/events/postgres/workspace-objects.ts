import type pg from 'pg'
import type { WorkspaceObject, WorkspaceObjects } from '../workspace-objects.js'
import { newPool } from './log.js'

/** The objects on `url`, on connections of their own (a fetch of a large tree does not hold the log's readers). */
export function openPostgresWorkspaceObjects(url: string): WorkspaceObjects & { close(): Promise<void> } {
  const db = newPool(url, 2)
  return Object.assign(postgresWorkspaceObjects(db), { close: () => db.end().catch(() => {}) })
}

/** The workspace snapshots' objects in PostgreSQL (src/events/workspace-objects.ts; schema migration 6). */
export function postgresWorkspaceObjects(db: Pick<pg.Pool, 'query'>): WorkspaceObjects {
  return {
    async put(objects) {
      if (objects.length === 0) return
      await db.query(
        `INSERT INTO workspace_objects (id, body) SELECT * FROM unnest($1::text[], $2::bytea[])
         ON CONFLICT (id) DO NOTHING`,
        [objects.map((o) => o.id), objects.map((o) => o.body)],
      )
    },
    async get(ids) {
      if (ids.length === 0) return []
      const { rows } = await db.query<WorkspaceObject>(
        'SELECT id, body FROM workspace_objects WHERE id = ANY($1::text[])',
        [ids],
      )
      return rows
    },
    async missing(ids) {
      if (ids.length === 0) return []
      const { rows } = await db.query<{ id: string }>(
        `SELECT id FROM unnest($1::text[]) AS wanted (id)
         WHERE NOT EXISTS (SELECT 1 FROM workspace_objects o WHERE o.id = wanted.id)`,
        [ids],
      )
      return rows.map((r) => r.id)
    },
  }
}
