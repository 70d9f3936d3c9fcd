import { PostgresEventLog, type PostgresLogOptions } from '../../events/postgres/log.js'
import type { ProjectorOptions } from '../rows/projector.js'
import { createPgProjection } from './projection.js'
import { dropStaleSnapshots, RecentView, shareRecentViews } from './time-travel.js'

/** An event log on PostgreSQL whose appends keep the Session / Message / Part read models, as openStore does on SQLite. */
export async function openPostgresStore(
  url: string,
  options: Omit<PostgresLogOptions, 'project'> & ProjectorOptions = {},
): Promise<PostgresEventLog> {
  const recent = new RecentView()
  const log = await PostgresEventLog.open(url, { project: createPgProjection({ recent, ...options }), ...options })
  shareRecentViews(log, recent)
  await dropStaleSnapshots(log)
  return log
}
