import { join, resolve } from 'node:path'
import WebSocket from 'ws'
import { defaultDataDir } from '../config.js'
import { readClientToken } from '../http/token.js'

/**
 * How CLI commands reach a running server: CHRONICLE_URL (default
 * http://127.0.0.1:4780) and the token from CHRONICLE_TOKEN or the data
 * directory's token file.
 */

export interface ServerInfo {
  readonly url: string
  readonly token: string | undefined
}

export function serverInfo(env: NodeJS.ProcessEnv = process.env): ServerInfo {
  const url = (env.CHRONICLE_URL ?? 'http://127.0.0.1:4780').replace(/\/$/, '')
  return { url, token: readClientToken(dataDirOf(env), env) }
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message)
  }
}

export class HttpClient {
  constructor(readonly server: ServerInfo) {}

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    let res: Response
    try {
      res = await fetch(this.server.url + path, {
        method,
        headers: {
          ...(this.server.token && { authorization: `Bearer ${this.server.token}` }),
          ...(body !== undefined && { 'content-type': 'application/json' }),
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      })
    } catch {
      throw new ApiError(
        0,
        'UNREACHABLE',
        `no Chronicle server at ${this.server.url} (start one with \`chronicle serve\`, or set CHRONICLE_URL)`,
      )
    }
    const json = (await res.json().catch(() => ({}))) as Record<string, unknown>
    if (!res.ok) {
      const code = String(json.code ?? res.status)
      const hint =
        code === 'UNAUTHORIZED' ? ' (set CHRONICLE_TOKEN or CHRONICLE_DATA_DIR to the server’s data directory)' : ''
      throw new ApiError(res.status, code, `${code}: ${String(json.detail ?? res.statusText)}${hint}`)
    }
    return json as T
  }
}

/** A protocol client over WebSocket: `call` resolves with the reply to its id; other frames go to `onFrame`. */
export class WsClient {
  private n = 0
  private readonly pending = new Map<string, { resolve: (v: unknown) => void; reject: (e: Error) => void }>()
  onFrame: (frame: Record<string, unknown>) => void = () => {}
  onClose: (code: number) => void = () => {}

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (raw) => {
      const frame = JSON.parse(String(raw)) as Record<string, unknown>
      const id = frame.id
      if (typeof id === 'string' && this.pending.has(id)) {
        const p = this.pending.get(id)
        this.pending.delete(id)
        const error = frame.error as { code: string; message: string } | undefined
        if (error) p?.reject(new ApiError(0, error.code, `${error.code}: ${error.message}`))
        else p?.resolve(frame.result)
        return
      }
      this.onFrame(frame)
    })
    ws.on('close', (code) => {
      for (const p of this.pending.values()) p.reject(new ApiError(0, 'CLOSED', `connection closed (${code})`))
      this.pending.clear()
      this.onClose(code)
    })
  }

  static connect(server: ServerInfo): Promise<WsClient> {
    const ws = new WebSocket(`${server.url.replace(/^http/, 'ws')}/ws`, {
      headers: server.token ? { authorization: `Bearer ${server.token}` } : {},
    })
    return new Promise((resolvePromise, reject) => {
      ws.once('open', () => resolvePromise(new WsClient(ws)))
      ws.once('unexpected-response', (req, res) => {
        req.destroy()
        reject(
          new ApiError(
            res.statusCode ?? 0,
            res.statusCode === 401 ? 'UNAUTHORIZED' : 'REFUSED',
            `the server refused the connection (${res.statusCode})`,
          ),
        )
      })
      ws.once('error', () => reject(new ApiError(0, 'UNREACHABLE', `no Chronicle server at ${server.url}`)))
    })
  }

  call<T = unknown>(method: string, params?: unknown): Promise<T> {
    const id = `c${++this.n}`
    return new Promise((resolvePromise, reject) => {
      this.pending.set(id, { resolve: resolvePromise as (v: unknown) => void, reject })
      this.ws.send(JSON.stringify({ id, method, ...(params !== undefined && { params }) }))
    })
  }

  close(): void {
    this.ws.close()
  }
}

/** The data directory the server uses by default: CHRONICLE_DATA_DIR, else the per-user XDG one. */
export const dataDirOf = (env: NodeJS.ProcessEnv = process.env) =>
  env.CHRONICLE_DATA_DIR ? resolve(env.CHRONICLE_DATA_DIR) : defaultDataDir(env)
export const dbPathOf = (dataDir: string) => join(dataDir, 'chronicle.db')
