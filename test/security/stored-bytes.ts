import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import type { StoredBytes } from './roles-contract.js'

/** Every file of the server's data directory (SQLite's database and its WAL among them on SQLite). */
export const dataDirFiles: StoredBytes = async (server) => {
  const files: string[] = []
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name)
      if (statSync(path).isDirectory()) walk(path)
      else files.push(path)
    }
  }
  walk(join(server.dir, 'data'))
  return files.map((name) => ({ name, bytes: readFileSync(name) }))
}

/** The data directory's files and a dump of the server's PostgreSQL database (pg_dump, every table's rows). */
export const dataDirAndDump: StoredBytes = async (server) => {
  const url = server.chronicle.config.store.url
  if (!url) throw new Error('the server does not run on PostgreSQL')
  const dump = execFileSync('pg_dump', ['--data-only', '--dbname', url], { maxBuffer: 256 * 2 ** 20 })
  if (!dump.includes('sys_tokens')) throw new Error('the dump holds no token stream')
  return [...(await dataDirFiles(server)), { name: 'pg_dump', bytes: dump }]
}
