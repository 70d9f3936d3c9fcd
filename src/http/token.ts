import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { assertPrivateToken, type DataDirOptions } from '../data-dir.js'

/**
 * The bearer token: given explicitly (CHRONICLE_TOKEN or the user's config
 * file), or generated on first start (256 bits from the OS CSPRNG) and
 * stored with 0600 permissions in the data directory, where local clients
 * find it. A stored token others could read is refused, never adopted.
 */

export const TOKEN_FILE = 'token'

export interface TokenInfo {
  readonly token: string
  /** where it is stored, when it came from the data dir */
  readonly file: string | undefined
  /** true on the start that generated it: the only time it is printed */
  readonly generated: boolean
  /** where it came from, for the start line */
  readonly source: 'environment' | 'config' | 'file'
}

export function resolveToken(
  dataDir: string,
  explicit: { token: string; source: 'environment' | 'config' } | undefined,
  options: DataDirOptions = {},
): TokenInfo {
  if (explicit) return { token: explicit.token, file: undefined, generated: false, source: explicit.source }
  const file = join(dataDir, TOKEN_FILE)
  if (existsSync(file)) {
    assertPrivateToken(file, options)
    const token = readFileSync(file, 'utf8').trim()
    if (token.length >= 16) return { token, file, generated: false, source: 'file' }
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const token = randomBytes(32).toString('base64url')
  writeFileSync(file, `${token}\n`, { mode: 0o600 }) // only reached when any existing file was private already
  return { token, file, generated: true, source: 'file' }
}

/** The token a local client uses: CHRONICLE_TOKEN, else the data dir's token file. */
export function readClientToken(dataDir: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.CHRONICLE_TOKEN) return env.CHRONICLE_TOKEN
  const file = join(dataDir, TOKEN_FILE)
  return existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined
}
