import { join, resolve } from 'node:path'
import { ChronicleHttp } from '../client/http.js'
import { ChronicleSocket, type SocketOptions } from '../client/socket.js'
import { defaultDataDir } from '../config.js'
import { readClientToken } from '../http/token.js'

/**
 * How CLI commands reach a running server, through the SDK (src/client/):
 * CHRONICLE_URL (default http://127.0.0.1:4780) and the token from
 * CHRONICLE_TOKEN or the data directory's token file.
 */

export interface ServerInfo {
  readonly url: string
  readonly token: string | undefined
}

export function serverInfo(env: NodeJS.ProcessEnv = process.env): ServerInfo {
  const url = (env.CHRONICLE_URL ?? 'http://127.0.0.1:4780').replace(/\/$/, '')
  return { url, token: readClientToken(dataDirOf(env), env) }
}

export const httpClient = (env: NodeJS.ProcessEnv = process.env) => new ChronicleHttp(serverInfo(env))

export const connect = (options: Partial<SocketOptions> = {}, env: NodeJS.ProcessEnv = process.env) =>
  ChronicleSocket.connect({ ...serverInfo(env), ...options })

/** The data directory the server uses by default: CHRONICLE_DATA_DIR, else the per-user XDG one. */
export const dataDirOf = (env: NodeJS.ProcessEnv = process.env) =>
  env.CHRONICLE_DATA_DIR ? resolve(env.CHRONICLE_DATA_DIR) : defaultDataDir(env)
export const dbPathOf = (dataDir: string) => join(dataDir, 'chronicle.db')
