import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { Server, type Socket } from 'node:net'
import { type Connector, connectPinned } from './connect.js'
import { forwardRequest } from './forward-request.js'
import { type HostPattern, hostListed } from './host-list.js'
import { NetRefusal } from './refusal.js'
import { relayTo } from './relay.js'
import { type NetPolicy, type PinnedTarget, pinTarget } from './resolve.js'
import { parseTarget } from './target.js'

/**
 * The HTTP(S) proxy one confined command reaches the network through
 * (docs/SECURITY.md "The network by host"): a server in Chronicle's process
 * that accepts on a listener made inside the command's network namespace
 * and handed over when the command starts (sandbox.ts, proxy-launcher.ts),
 * so the command's connections are the proxy's own sockets, no process
 * between. It speaks CONNECT (a TLS tunnel, the proxy never sees inside it)
 * and plain HTTP forwarding (absolute-form request lines, one request per
 * connection: forward-request.ts); what comes back is relayed from one
 * buffer per connection (relay.ts), for throughput. Each connection is let
 * through only when the host is on the user's list, or — with `unlisted:
 * ask` — when the call's permission request for it (`network`, pattern =
 * host) is allowed; then the name is resolved once and the address checked
 * and pinned exactly as webfetch's are (resolve.ts: no loopback, private,
 * link-local or metadata address unless the name is in `allowHosts`, never
 * the server's own port), so a listed name that resolves to 127.0.0.1 gets
 * nothing. A refusal answers 403 with the stable code in the body. What each
 * host got is tallied for the call's `tool.network` events.
 */

export interface ProxyPolicy {
  /** the user's `sandbox.network` list */
  readonly hosts: readonly HostPattern[]
  /** a host not on the list: refused at once, or asked for */
  readonly unlisted: 'refuse' | 'ask'
  /** the address checks after resolving: webfetch's (allowHosts exempts names; resolve is the tests' hook) */
  readonly net: NetPolicy
  readonly connector?: Connector
}

/** What one call's connections to one host and port got (its `tool.network` event, src/events/catalogue.ts). */
export interface NetworkUse {
  readonly host: string
  readonly port: number
  readonly allowed: boolean
  connections: number
  bytesIn: number
  bytesOut: number
  /** the refusal's stable code (refusal.ts), or CONNECT_FAILED */
  reason?: string
}

/** What the proxy needs of the call it serves. */
export interface ProxyCaller {
  /** resolves when the call may reach `host` (rules or a person said yes); rejects otherwise, or when `signal` aborts */
  ask(host: string, port: number, signal: AbortSignal): Promise<void>
}

export interface CallProxy {
  /**
   * accepts the command's connections on `listener`, the launcher's (the handle its IPC message carried): a
   * net.Server on 127.0.0.1, taken once; anything else, or anything after close, is closed
   */
  adopt(listener: unknown): void
  /** stops listening, ends every connection still open and returns what each host got, in first-seen order */
  close(): Promise<NetworkUse[]>
}

export function openCallProxy(policy: ProxyPolicy, caller: ProxyCaller): CallProxy {
  const tally = new Map<string, { use: NetworkUse; open: number }>()
  const sockets = new Set<Socket>()
  const pending = new Set<Promise<void>>()
  // one request per host at a time: ten parallel connections to one registry ask once
  const asking = new Map<string, Promise<void>>()
  // a request still open when the command ends is closed with it
  const ended = new AbortController()
  // connections still being decided (asking, resolving): their outcome is recorded before close returns
  const deciding = new Set<Promise<unknown>>()
  const decided = <T>(work: Promise<T>) => {
    deciding.add(work)
    const done = () => deciding.delete(work)
    work.then(done, done)
    return work
  }

  const count = (host: string, port: number, allowed: boolean, reason?: string) => {
    const key = `${host}\0${port}\0${allowed}`
    let entry = tally.get(key)
    if (!entry) {
      entry = { use: { host, port, allowed, connections: 0, bytesIn: 0, bytesOut: 0 }, open: 0 }
      tally.set(key, entry)
    }
    entry.use.connections++
    if (reason !== undefined) entry.use.reason = reason
    return entry.use
  }

  /** Tracks an upstream socket: its bytes go to `use` once it has closed. */
  const track = (upstream: Socket, use: NetworkUse) => {
    sockets.add(upstream)
    const closed = new Promise<void>((resolve) =>
      upstream.once('close', () => {
        use.bytesIn += upstream.bytesRead
        use.bytesOut += upstream.bytesWritten
        sockets.delete(upstream)
        pending.delete(closed)
        resolve()
      }),
    )
    pending.add(closed)
  }

  const askOnce = (host: string, port: number) => {
    const known = asking.get(host)
    if (known) return known
    const asked = caller.ask(host, port, ended.signal).finally(() => asking.delete(host))
    asking.set(host, asked)
    return asked
  }

  /** Whether the call may reach the target, then where exactly: the pinned, checked address. */
  const admit = async (raw: string): Promise<PinnedTarget> => {
    const target = parseTarget(raw)
    if (!hostListed(target.hostname, target.port, policy.hosts)) {
      if (policy.unlisted === 'refuse')
        throw new NetRefusal(
          'HOST_NOT_LISTED',
          `${target.hostname}:${target.port} is not on the sandbox's network list (the user's config: sandbox.network)`,
        )
      try {
        await askOnce(target.hostname, target.port)
      } catch (err) {
        throw new NetRefusal('HOST_DENIED', `${target.hostname}: ${(err as Error).message}`)
      }
    }
    return pinTarget(target, policy.net)
  }

  const server = createServer()
  // a command that opens connections without end holds this many at most; the rest are closed at once
  server.maxConnections = MAX_CONNECTIONS
  // the listener came from inside the sandbox: a failure on it ends the proxy's listening, never the server
  server.on('error', () => server.close())
  let listening: 'waiting' | 'adopted' | 'closed' = 'waiting'
  server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
    socket.on('error', () => socket.destroy())
  })

  // CONNECT host:port — a tunnel, for TLS
  server.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
    const authority = req.url ?? ''
    void decided(admit(`http://${authority}/`)).then(
      (pinned) => {
        const use = count(pinned.hostname, pinned.port, true)
        const relay = relayTo(client)
        const upstream = connectPinned(pinned, policy.connector, relay.onread)
        track(upstream, use)
        upstream.once('connect', () => {
          client.write('HTTP/1.1 200 Connection Established\r\n\r\n')
          if (head.length > 0) upstream.write(head)
          relay.from(upstream)
          client.pipe(upstream)
        })
        upstream.on('error', (err) => {
          if (!client.writableEnded && upstream.bytesRead === 0) refuse(client, 502, `CONNECT_FAILED: ${err.message}`)
          else client.destroy()
        })
        client.on('close', () => upstream.destroy())
      },
      (err) => {
        const { host, port } = authorityOf(authority)
        count(host, port, false, codeOf(err))
        refuse(client, codeOf(err) === 'URL_INVALID' ? 400 : 403, (err as Error).message)
      },
    )
  })

  // plain HTTP: GET http://host/path HTTP/1.1 — one request per connection (forward-request.ts)
  const answering = new WeakSet<Socket>()
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (answering.has(req.socket)) return req.socket.destroy()
    answering.add(req.socket)
    const raw = req.url ?? ''
    if (!/^http:\/\//i.test(raw)) {
      res.writeHead(400, { 'content-type': 'text/plain', connection: 'close' })
      res.end('URL_INVALID: this is a proxy: send absolute http:// URLs, or CONNECT for https\n')
      return
    }
    void decided(admit(raw)).then(
      (pinned) => {
        const use = count(pinned.hostname, pinned.port, true)
        forwardRequest(req, res, pinned, (onread) => {
          const upstream = connectPinned(pinned, policy.connector, onread)
          track(upstream, use)
          return upstream
        })
      },
      (err) => {
        let target: { host: string; port: number }
        try {
          const t = parseTarget(raw)
          target = { host: t.hostname, port: t.port }
        } catch {
          target = { host: '', port: 0 }
        }
        count(target.host, target.port, false, codeOf(err))
        res.writeHead(codeOf(err) === 'URL_INVALID' ? 400 : 403, { 'content-type': 'text/plain', connection: 'close' })
        res.end(`${(err as Error).message}\n`)
      },
    )
  })

  return {
    adopt(listener) {
      if (!(listener instanceof Server)) return
      if (listening !== 'waiting' || !onLoopback(listener)) {
        listener.close()
        return
      }
      listening = 'adopted'
      // the http server takes the handle over (server.listen(handle)): its connections, limits and timeouts
      server.listen(listener)
    },
    async close() {
      listening = 'closed'
      ended.abort()
      server.close()
      // an ask that ignores the abort does not hold the call: a second at most
      const grace = new Promise((resolve) => setTimeout(resolve, 1000).unref())
      await Promise.race([Promise.allSettled([...deciding]), grace])
      for (const socket of sockets) socket.destroy()
      await Promise.all(pending)
      return [...tally.values()].map((e) => e.use)
    },
  }
}

const MAX_CONNECTIONS = 256

/** The launcher's listener is bound to 127.0.0.1 of the command's namespace; nothing else is a proxy port. */
function onLoopback(listener: Server): boolean {
  const address = listener.address()
  return typeof address === 'object' && address !== null && address.address === '127.0.0.1'
}

function refuse(client: Socket, status: 400 | 403 | 502, message: string): void {
  const body = `${message}\n`
  const reason = status === 400 ? 'Bad Request' : status === 403 ? 'Forbidden' : 'Bad Gateway'
  client.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  )
}

function codeOf(err: unknown): string {
  return err instanceof NetRefusal ? err.code : 'CONNECT_FAILED'
}

/** `host:port` or `[v6]:port` of a CONNECT, as well as it can be read (for the record of a refusal). */
function authorityOf(authority: string): { host: string; port: number } {
  try {
    const t = parseTarget(`http://${authority}/`)
    return { host: t.hostname, port: t.port }
  } catch {
    return { host: authority.slice(0, 255), port: 0 }
  }
}
