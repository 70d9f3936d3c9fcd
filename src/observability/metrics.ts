import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client'
import type { StorePorts } from '../projections/store-ports.js'
import { CommitMetrics } from './commit-metrics.js'

/**
 * The server's Prometheus metrics (docs/OBSERVABILITY.md), in one registry
 * of its own: what the commits tell (commit-metrics.ts), the sessions by
 * status (read at scrape), the sockets the app reports, and the process's
 * own (event-loop delay, heap, CPU) from prom-client's defaults. Nothing
 * here carries a session id in a label.
 */

/** What the app's sockets look like at a scrape: connections, and each subscription's lag in events. */
export interface SocketsView {
  readonly connections: number
  readonly lags: readonly number[]
}

export interface Metrics {
  readonly contentType: string
  /** the text a scrape gets */
  render(): Promise<string>
  /** the app says how to read its sockets at a scrape */
  sockets(read: () => SocketsView): void
  /** a socket closed because it did not drain (docs/API.md "Closing codes") */
  slowConsumerDropped(): void
  close(): void
}

export function createMetrics(ports: Pick<StorePorts, 'log' | 'readModels'>): Metrics {
  const { log, readModels } = ports
  const registry = new Registry()
  const registers = [registry]
  collectDefaultMetrics({ register: registry })
  const commits = new CommitMetrics(registry, () => log.commitMs)
  // this server's own commits: on a cluster, each node counts what it wrote (docs/CLUSTER.md)
  const stopListening = log.onCommit((events, elsewhere) => {
    if (!elsewhere) commits.observe(events)
  })
  new Gauge({
    name: 'chronicle_sessions',
    help: 'Sessions in the store, by status (idle, busy, waiting, retrying) and archived',
    labelNames: ['status', 'archived'],
    registers,
    async collect() {
      const counts = await readModels.statusCounts()
      this.reset()
      for (const row of counts) this.set({ status: row.status, archived: String(row.archived) }, row.count)
    },
  })
  let readSockets = (): SocketsView => ({ connections: 0, lags: [] })
  new Gauge({
    name: 'chronicle_websocket_connections',
    help: 'WebSocket connections open',
    registers,
    collect() {
      this.set(readSockets().connections)
    },
  })
  new Gauge({
    name: 'chronicle_subscriptions',
    help: 'Event subscriptions open over WebSocket',
    registers,
    collect() {
      this.set(readSockets().lags.length)
    },
  })
  new Gauge({
    name: 'chronicle_subscriber_lag_events',
    help: "The furthest-behind subscription's lag: events committed for it and not yet sent",
    registers,
    collect() {
      this.set(Math.max(0, ...readSockets().lags))
    },
  })
  const dropped = new Counter({
    name: 'chronicle_slow_consumers_dropped_total',
    help: 'WebSocket connections closed because they did not drain',
    registers,
  })
  new Gauge({
    name: 'chronicle_store_head_seq',
    help: 'The seq of the last committed event',
    registers,
    async collect() {
      this.set(await log.head())
    },
  })
  return {
    contentType: registry.contentType,
    render: () => {
      commits.read()
      return registry.metrics()
    },
    sockets(read) {
      readSockets = read
    },
    slowConsumerDropped: () => dropped.inc(),
    close() {
      stopListening()
      commits.read()
      registry.clear()
    },
  }
}
