import { startPostgres } from '../test/support/postgres.js'

/**
 * The PostgreSQL a `--store postgres` bench runs on: the database
 * CHRONICLE_DATABASE_URL names, or a throwaway server started the way the
 * tests start theirs (test/support/postgres.ts), a new database each
 * `database()`. `cpuMs` is what the server's processes used (undefined for a
 * server the bench did not start): a bench on PostgreSQL reports its CPU
 * beside its own, since the work is split between the two.
 */
export interface BenchPostgres {
  database(): Promise<string>
  cpuMs(): number | undefined
  stop(): Promise<void>
}

export async function benchPostgres(): Promise<BenchPostgres> {
  const given = process.env.CHRONICLE_DATABASE_URL
  if (given) return { database: async () => given, cpuMs: () => undefined, stop: async () => {} }
  const server = await startPostgres()
  return { database: () => server.database(), cpuMs: () => server.cpuMs(), stop: () => server.stop() }
}

/** `--store <engine>`: sqlite (the default) or postgres. */
export function storeOption(args: readonly string[]): 'sqlite' | 'postgres' {
  const i = args.indexOf('--store')
  if (i < 0) return 'sqlite'
  const store = args[i + 1]
  if (store !== 'postgres' && store !== 'sqlite') throw new Error(`--store: postgres or sqlite, not ${store}`)
  return store
}
