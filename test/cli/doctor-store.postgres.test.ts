import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { doctor } from '../../src/cli/doctor.js'
import { usePostgres } from '../support/use-postgres.js'

/**
 * `chronicle doctor` with CHRONICLE_DATABASE_URL naming a real PostgreSQL
 * server: it connects and reads the version — and fails the check all the
 * same, because the server runs on SQLite for now and would refuse to start.
 */
const postgres = usePostgres()

describe('chronicle doctor and a PostgreSQL store', () => {
  it('connects, names the server’s version with the password hidden, and says the server will not serve on it', async () => {
    const url = await postgres().database()
    const root = mkdtempSync(join(tmpdir(), 'chronicle-doctor-pg-'))
    const lines: string[] = []
    const code = await doctor({ positionals: [], flags: new Map() }, (l) => lines.push(l), {
      PATH: process.env.PATH ?? '',
      HOME: join(root, 'home'),
      CHRONICLE_DATA_DIR: join(root, 'data'),
      CHRONICLE_URL: 'http://127.0.0.1:9',
      CHRONICLE_DATABASE_URL: url,
    })
    const store = lines.find((l) => l.includes('  store: '))
    expect(store).toMatch(
      /^fail {2}store: PostgreSQL 1[5-9][.\d]*( \([^)]*\))? at postgres:\/\/\S+ is reachable, but the server runs on SQLite for now/,
    )
    const password = new URL(url).password
    if (password) expect(lines.join('\n')).not.toContain(password)
    expect(code).toBe(1)
  })
})
