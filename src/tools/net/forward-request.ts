import type { IncomingMessage, ServerResponse } from 'node:http'
import { request as httpRequest } from 'node:http'
import type { OnReadOpts, Socket } from 'node:net'
import type { PinnedTarget } from './resolve.js'
import { relayTo } from './relay.js'

/**
 * A plain-HTTP request through the sandbox's proxy (absolute form, `GET
 * http://host/path`; docs/SECURITY.md "The network by host"), sent to the
 * pinned address with the hop-by-hop headers dropped and `connection:
 * close`: one request per connection. A request without a body — nearly
 * every download — is written out here and its answer relayed to the
 * client as the server sent it, byte for byte (relay.ts), like a CONNECT
 * tunnel's: parsing and writing out again a large answer costs most of the
 * throughput. The client's connection is then the answer's: a request the
 * client sends after it on that connection ends it (call-proxy.ts), never
 * reaching anyone. A request with a body goes through node's client, which
 * frames the body again.
 */

/** Opens the connection to the pinned target, tracked for the call's record; `onread` as connectPinned takes it. */
export type Upstream = (onread?: OnReadOpts) => Socket

export function forwardRequest(
  req: IncomingMessage,
  res: ServerResponse,
  pinned: PinnedTarget,
  upstreamFor: Upstream,
): void {
  const path = `${pinned.url.pathname}${pinned.url.search}`
  if (hasBody(req)) return forwardWithBody(req, res, path, upstreamFor)
  const client = req.socket
  const relay = relayTo(client)
  const upstream = upstreamFor(relay.onread)
  upstream.write(requestHead(req, path), 'latin1')
  upstream.once('connect', () => relay.from(upstream))
  upstream.on('error', (err) => failed(res, client, upstream, err))
  client.on('close', () => upstream.destroy())
  req.resume()
}

function forwardWithBody(req: IncomingMessage, res: ServerResponse, path: string, upstreamFor: Upstream): void {
  const upstream = upstreamFor()
  const headers = Object.assign({}, req.headers, { connection: 'close' })
  for (const name of HOP_BY_HOP) if (name !== 'connection') delete headers[name]
  const out = httpRequest({ createConnection: () => upstream, method: req.method, path, headers, setHost: false })
  out.on('response', (answer) => {
    const back = Object.assign({}, answer.headers)
    for (const name of HOP_BY_HOP) delete back[name]
    res.writeHead(answer.statusCode ?? 502, Object.assign(back, { connection: 'close' }))
    answer.pipe(res)
  })
  out.on('error', (err) => failed(res, res.socket, upstream, err))
  res.on('close', () => upstream.destroy())
  req.pipe(out)
}

/** The server could not be reached: a 502 while nothing of an answer has gone to the client, else the end. */
function failed(res: ServerResponse, client: Socket | null, upstream: Socket, err: Error): void {
  if (!res.headersSent && upstream.bytesRead === 0) {
    res.writeHead(502, { 'content-type': 'text/plain', connection: 'close' })
    res.end(`CONNECT_FAILED: ${err.message}\n`)
  } else client?.destroy()
}

/** A body is framed by a length or a transfer coding; without either a request has none (RFC 9112 §6.3). */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length']
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')
}

/** The request line and the client's headers as it sent them (node's parser has refused CR, LF and NUL in them). */
function requestHead(req: IncomingMessage, path: string): string {
  const lines = [`${req.method} ${path} HTTP/1.1`]
  const raw = req.rawHeaders
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string
    if (!HOP_BY_HOP.includes(name.toLowerCase())) lines.push(`${name}: ${raw[i + 1]}`)
  }
  lines.push('connection: close', '', '')
  return lines.join('\r\n')
}

const HOP_BY_HOP = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'upgrade',
]
