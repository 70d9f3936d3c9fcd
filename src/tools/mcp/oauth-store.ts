import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { OAuthDiscoveryState } from '@modelcontextprotocol/sdk/client/auth.js'
import type { OAuthClientInformationMixed, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js'

/**
 * What Chronicle keeps of one server's sign-in. Secrets (tokens, client
 * secret, PKCE verifier) live only here: never in the event log, never logged.
 */
export interface McpOAuthRecord {
  /** the server URL these credentials were issued for; another URL starts afresh */
  readonly url: string
  readonly clientInformation?: OAuthClientInformationMixed
  readonly tokens?: OAuthTokens
  readonly discoveryState?: OAuthDiscoveryState
  /** a sign-in in progress: the URL the user opens, the state it carries, the PKCE verifier */
  readonly pending?: { readonly authorizationUrl: string; readonly state: string; readonly codeVerifier?: string }
}

export interface McpOAuthStore {
  get(server: string, url: string): McpOAuthRecord
  update(server: string, url: string, change: (record: McpOAuthRecord) => McpOAuthRecord): McpOAuthRecord
  /** forgets everything about the server (logout) */
  remove(server: string): boolean
  list(): readonly string[]
}

interface StoreFile {
  readonly version: 1
  readonly servers: Readonly<Record<string, McpOAuthRecord>>
}

export const MCP_OAUTH_FILE = 'mcp-oauth.json'

/**
 * One JSON file in the data dir, mode 0600, replaced atomically on every
 * change. Read afresh each time, so `chronicle mcp login` in another process
 * and the running server see each other's writes.
 */
export function createMcpOAuthStore(dataDir: string): McpOAuthStore {
  const path = join(dataDir, MCP_OAUTH_FILE)
  const read = (): StoreFile => {
    let text: string
    try {
      text = readFileSync(path, 'utf8')
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { version: 1, servers: {} }
      throw err
    }
    const parsed = JSON.parse(text) as Partial<StoreFile>
    return { version: 1, servers: parsed.servers ?? {} }
  }
  const write = (file: StoreFile) => {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
    const tmp = `${path}.${process.pid}.tmp`
    writeFileSync(tmp, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 })
    chmodSync(tmp, 0o600) // the mode above is masked by the umask; the file must never be readable by others
    renameSync(tmp, path)
  }
  const current = (file: StoreFile, server: string, url: string): McpOAuthRecord => {
    const record = file.servers[server]
    return record && record.url === url ? record : { url }
  }
  return {
    get: (server, url) => current(read(), server, url),
    update(server, url, change) {
      const file = read()
      const next = change(current(file, server, url))
      write({ version: 1, servers: { ...file.servers, [server]: next } })
      return next
    },
    remove(server) {
      const file = read()
      if (!(server in file.servers)) return false
      const { [server]: _, ...rest } = file.servers
      write({ version: 1, servers: rest })
      return true
    },
    list: () => Object.keys(read().servers),
  }
}
