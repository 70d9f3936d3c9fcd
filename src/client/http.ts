import { ApiError } from './errors.js'
import type { HttpMethod as ProtocolMethod, ParamsOf, ResultOf } from './protocol.js'

/**
 * The protocol over HTTP (docs/API.md "HTTP routes"): `call(method, params)`
 * names the same methods as the WebSocket, and the route table below puts
 * each param where its route takes it (path, query or body).
 */

export interface ServerOptions {
  /** e.g. http://127.0.0.1:4780 */
  readonly url: string
  /** a bearer token: the owner's, or a named one (docs/SECURITY.md) */
  readonly token?: string
}

type Verb = 'GET' | 'POST' | 'PATCH' | 'DELETE'
type Params = Record<string, unknown>
type Route = readonly [verb: Verb, path: string, placement: 'query' | 'body']

/** Each method's route; `:name` segments take the param of that name (`:session`, …). */
const ROUTES: { [M in ProtocolMethod]: Route } = {
  'session.create': ['POST', '/sessions', 'body'],
  'session.list': ['GET', '/sessions', 'query'],
  'session.get': ['GET', '/sessions/:session', 'query'],
  'session.archive': ['DELETE', '/sessions/:session', 'query'],
  'session.update': ['PATCH', '/sessions/:session', 'body'],
  'input.submit': ['POST', '/sessions/:session/inputs', 'body'],
  'run.cancel': ['POST', '/sessions/:session/cancel', 'body'],
  'permission.reply': ['POST', '/sessions/:session/permissions/:requestId', 'body'],
  'permission.rules': ['GET', '/sessions/:session/rules', 'query'],
  'permission.revoke': ['DELETE', '/sessions/:session/rules/:ruleId', 'query'],
  'elicitation.answer': ['POST', '/sessions/:session/elicitations/:elicitationId', 'body'],
  'session.fork': ['POST', '/sessions/:session/fork', 'body'],
  'session.state': ['GET', '/sessions/:session/state', 'query'],
  'session.context': ['GET', '/sessions/:session/context', 'query'],
  'session.history': ['GET', '/sessions/:session/events', 'query'],
  'session.compact': ['POST', '/sessions/:session/compact', 'body'],
  'session.export': ['GET', '/sessions/:session/export', 'query'],
  'session.files': ['GET', '/sessions/:session/files', 'query'],
  'session.diff': ['GET', '/sessions/:session/diff', 'query'],
  'session.revert': ['POST', '/sessions/:session/revert', 'body'],
  'session.unrevert': ['POST', '/sessions/:session/unrevert', 'body'],
  'token.create': ['POST', '/tokens', 'body'],
  'token.list': ['GET', '/tokens', 'query'],
  'token.revoke': ['DELETE', '/tokens/:tokenId', 'query'],
  'share.create': ['POST', '/sessions/:session/shares', 'body'],
  'share.list': ['GET', '/shares', 'query'],
  'share.revoke': ['DELETE', '/shares/:shareId', 'query'],
  whoami: ['GET', '/whoami', 'query'],
  search: ['GET', '/search', 'query'],
  'mcp.servers': ['GET', '/mcp/servers', 'query'],
  'store.backup': ['POST', '/admin/backup', 'body'],
}

export interface RequestOptions {
  readonly query?: Record<string, string | number | boolean | undefined>
  readonly body?: unknown
  readonly headers?: Record<string, string>
  readonly signal?: AbortSignal
}

export class ChronicleHttp {
  readonly url: string
  private readonly token: string | undefined

  constructor(options: ServerOptions) {
    this.url = options.url.replace(/\/+$/, '')
    this.token = options.token
  }

  /** One protocol method over its HTTP route. */
  call<M extends ProtocolMethod>(method: M, params: ParamsOf<M>, options: RequestOptions = {}) {
    const [verb, template, placement] = ROUTES[method]
    const rest: Params = { ...(params as Params) }
    const path = template.replace(/:(\w+)/g, (_, name: string) => {
      const value = rest[name]
      if (typeof value !== 'string' || value === '') throw new ApiError(0, 'BAD_REQUEST', `${method} needs ${name}`)
      delete rest[name]
      return encodeURIComponent(value)
    })
    const inQuery = placement === 'query' ? (rest as RequestOptions['query']) : undefined
    const inBody = placement === 'body' && Object.keys(rest).length > 0 ? rest : undefined
    const answer = this.request<unknown>(verb, path, {
      ...options,
      query: { ...inQuery, ...options.query },
      ...(inBody && { body: inBody }),
    })
    // the export route answers the file itself (a download); over the protocol it is `{jsonl}`
    if (method !== 'session.export') return answer as Promise<ResultOf<M>>
    const atif = (params as { format?: string }).format === 'atif'
    return answer.then((file) => (atif ? { atif: file } : { jsonl: file })) as Promise<ResultOf<M>>
  }

  /** `input.submit` that answers when the run ends, with its final assistant message (`?wait=true`). */
  submitAndWait(params: ParamsOf<'input.submit'>, options: RequestOptions = {}) {
    return this.call('input.submit', params, { ...options, query: { wait: true } }) as Promise<
      ResultOf<'input.submit'> & { message?: unknown; parts?: unknown[] }
    >
  }

  health(): Promise<{ status: 'ok' | 'degraded'; version: string; reason?: string }> {
    return this.request('GET', '/health')
  }

  async request<T>(verb: Verb, path: string, options: RequestOptions = {}): Promise<T> {
    const query = new URLSearchParams()
    for (const [k, v] of Object.entries(options.query ?? {})) if (v !== undefined) query.set(k, String(v))
    const url = `${this.url}${path}${query.size > 0 ? `?${query}` : ''}`
    let res: Response
    try {
      res = await fetch(url, {
        method: verb,
        headers: {
          ...(this.token && { authorization: `Bearer ${this.token}` }),
          ...(options.body !== undefined && { 'content-type': 'application/json' }),
          ...options.headers,
        },
        ...(options.body !== undefined && { body: JSON.stringify(options.body) }),
        ...(options.signal && { signal: options.signal }),
      })
    } catch (err) {
      if (options.signal?.aborted) throw err
      throw new ApiError(0, 'UNREACHABLE', `no Chronicle server at ${this.url}`)
    }
    const text = await res.text()
    // JSON (application/json, application/problem+json) is parsed; a file (the export's x-ndjson) is its text
    const type = res.headers.get('content-type') ?? 'application/json'
    if (res.ok && !/^application\/(?:[\w.-]+\+)?json\b/.test(type)) return text as T
    let json: Record<string, unknown> = {}
    try {
      json = text === '' ? {} : (JSON.parse(text) as Record<string, unknown>)
    } catch {}
    if (!res.ok) {
      const code = String(json.code ?? res.status)
      throw new ApiError(res.status, code, `${code}: ${String(json.detail ?? res.statusText)}`, json.details)
    }
    return json as T
  }
}
