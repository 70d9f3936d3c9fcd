import { type StartServer, startServer } from '../http/helpers.js'
import type { PostgresServer } from './postgres.js'

/** `startServer` on PostgreSQL: each server on a new, empty database of `postgres` (CHRONICLE_DATABASE_URL). */
export function onPostgres(postgres: () => PostgresServer): StartServer {
  return async (env = {}, opts = {}) =>
    startServer({ ...env, CHRONICLE_DATABASE_URL: await postgres().database() }, opts)
}
