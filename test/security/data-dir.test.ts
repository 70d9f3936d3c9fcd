import { mkdtempSync, realpathSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { assertPrivateToken, secureDataDir } from '../../src/data-dir.js'

/**
 * Finding 2 (docs/SECURITY.md), the data directory's own checks: what
 * another user controls, and what a symlink could point anywhere, is refused
 * (test/security/workspace-config.test.ts starts real servers for the rest).
 */

const temp = (prefix: string) => realpathSync(mkdtempSync(join(tmpdir(), prefix)))

describe("the data directory is this user's alone", () => {
  it('refuses a data directory (or a file in it) that another user owns, or a symlinked token', () => {
    const dir = temp('chronicle-data-')
    const me = statSync(dir).uid
    expect(() => secureDataDir(dir, { uid: me + 1 })).toThrow(
      new RegExp(`${dir} belongs to user ${me}, not to this server's user ${me + 1}`),
    )
    expect(secureDataDir(dir, { uid: me })).toBe(join(dir, 'chronicle.db'))
    writeFileSync(join(dir, 'elsewhere'), 'a-token-somewhere-else-0123\n', { mode: 0o600 })
    symlinkSync(join(dir, 'elsewhere'), join(dir, 'token'))
    expect(() => assertPrivateToken(join(dir, 'token'))).toThrow(/is not a regular file/)
    symlinkSync('/etc/hostname', join(dir, 'chronicle.json'))
    expect(() => secureDataDir(dir)).toThrow(/chronicle\.json is not a regular file/)
  })
})
