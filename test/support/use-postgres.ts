import { afterAll, beforeAll } from 'vitest'
import { type PostgresServer, startPostgres } from './postgres.js'

/** A throwaway PostgreSQL server for the test file that calls this: started before its tests, stopped after. */
export function usePostgres(): () => PostgresServer {
  let server: PostgresServer | undefined
  beforeAll(async () => {
    server = await startPostgres()
  }, 60_000)
  afterAll(async () => {
    await server?.stop()
  })
  return () => {
    if (!server) throw new Error('the PostgreSQL server is not started yet (use it inside a test)')
    return server
  }
}
