import { PostgresEventLog, type PostgresLogOptions } from '../../events/postgres/log.js'
import type { ProjectorOptions } from '../rows/projector.js'
import { createPgProjection } from './projection.js'

/** An event log on PostgreSQL whose appends keep the Session / Message / Part read models, as openStore does on SQLite. */
export function openPostgresStore(
  url: string,
  options: Omit<PostgresLogOptions, 'project'> & ProjectorOptions = {},
): Promise<PostgresEventLog> {
  return PostgresEventLog.open(url, { project: createPgProjection(options), ...options })
}
