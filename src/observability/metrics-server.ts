import { createServer, type Server } from 'node:http'
import type { Metrics } from './metrics.js'

/**
 * The scrape address the user's config names (`metrics.listen`,
 * docs/OBSERVABILITY.md): it serves `GET /metrics` and nothing else, without
 * a token — who may reach the address is the operator's to decide (it is
 * 127.0.0.1 unless the config says otherwise). No session, event or
 * command is reachable through it.
 */
export interface MetricsServer {
  /** the address it listens on: `http://host:port` */
  readonly url: string
  close(): Promise<void>
}

export async function listenMetrics(metrics: Metrics, host: string, port: number): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0]
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('only GET /metrics is served here\n')
      return
    }
    metrics.render().then(
      (text) => res.writeHead(200, { 'content-type': metrics.contentType }).end(req.method === 'HEAD' ? '' : text),
      () => res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics failed\n'),
    )
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const address = server.address()
  const bound = typeof address === 'object' && address ? address.port : port
  const shown = host.includes(':') ? `[${host}]` : host
  return {
    url: `http://${shown}:${bound}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
