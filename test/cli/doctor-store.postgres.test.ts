import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { doctor } from '../../src/cli/doctor.js'
import { usePostgres } from '../support/use-postgres.js'

/**
 * `chronicle doctor` with CHRONICLE_DATABASE_URL naming a real PostgreSQL
 * server: it connects, reads the version, and says what a server on it lacks.
 */
const postgres = usePostgres()

describe('chronicle doctor and a PostgreSQL store', () => {
  it('connects and names the server’s version with the password hidden, and what is off on PostgreSQL', async () => {
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
      /^ok {2}store: PostgreSQL 1[5-9][.\d]*( \([^)]*\))? at postgres:\/\/\S+ \(search and backups are off on PostgreSQL\)$/,
    )
    const password = new URL(url).password
    if (password) expect(lines.join('\n')).not.toContain(password)
    expect(code).toBe(0) // nothing fails: a server not running yet is only a warning
  })
})
