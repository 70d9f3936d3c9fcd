import { isSystemStream } from '../../events/append-rules.js'
import { PostgresEventLog } from '../../events/postgres/log.js'
import { type EventRow, toEvent } from '../../events/rows.js'
import type { Progress, RebuildReport } from '../upkeep/rebuild.js'
import { Pipe } from '../../events/postgres/pipe.js'
import { createPgProjection } from './projection.js'

/** Events projected at once, as the copy does. */
const CHUNK = 2000

/**
 * `rebuild` on PostgreSQL (the server stopped): the read models dropped and
 * projected again from the log, by the projector every append uses, in seq
 * order and one transaction holding the log's head (readers never see a
 * half rebuild; no append commits meanwhile). What SQLite's rebuild is
 * (src/projections/upkeep/rebuild.ts).
 */
export async function rebuildPostgres(url: string, options: { progress?: Progress } = {}): Promise<RebuildReport> {
  const started = performance.now()
  const log = await PostgresEventLog.open(url)
  try {
    return await log.exclusive(async (client) => {
      await client.query(
        'DELETE FROM parts; DELETE FROM messages; DELETE FROM sessions; DELETE FROM inherits; DELETE FROM rewrites',
      )
      const total = await log.head()
      const project = createPgProjection()
      let after = 0
      let events = 0
      let sessions = 0
      for (;;) {
        const { rows } = await client.query<EventRow>(
          'SELECT seq, session_id, version, type, schema_version, data, meta, at FROM events WHERE seq > $1 ORDER BY seq LIMIT $2',
          [after, CHUNK],
        )
        const last = rows.at(-1)
        if (!last) break
        after = last.seq
        const chunk = rows.map(toEvent).filter((e) => !isSystemStream(e.sessionId))
        for (const e of chunk) if (e.version === 1) sessions++
        const pipe = new Pipe(client)
        await project(pipe, chunk)
        await pipe.settle()
        events += chunk.length
        options.progress?.(after, total)
      }
      return { sessions, events, ms: performance.now() - started }
    })
  } finally {
    await log.close()
  }
}
