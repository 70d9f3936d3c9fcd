import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import parsePrometheusTextFormat from 'parse-prometheus-text-format'
import { afterEach, describe, expect, it } from 'vitest'
import { Client } from '../http/helpers.js'
import { type ScriptedServer, serverWithScript, scriptedRun } from './scripted-run.js'

/**
 * `GET /metrics` on a real server after a scripted run (docs/OBSERVABILITY.md):
 * the values a run moves, parsed by a Prometheus text parser; no label
 * carries an id; who may scrape.
 */

const DOCS = fileURLToPath(new URL('../../docs/', import.meta.url))

let server: ScriptedServer | undefined
let client: Client | undefined
afterEach(async () => {
  client?.close()
  client = undefined
  await server?.close()
  server = undefined
})

type Families = ReturnType<typeof parsePrometheusTextFormat>

async function scrape(url: string, token?: string): Promise<{ status: number; type: string | null; text: string }> {
  const res = await fetch(`${url}/metrics`, token ? { headers: { authorization: `Bearer ${token}` } } : {})
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() }
}

/** The value of a counter or gauge sample with exactly these labels (undefined: no such sample). */
function value(families: Families, name: string, labels: Record<string, string> = {}): number | undefined {
  const family = families.find((f) => f.name === name)
  const sample = family?.metrics.find((m) => sameLabels(m.labels ?? {}, labels))
  return sample?.value === undefined ? undefined : Number(sample.value)
}

/**
 * A histogram's count and sum, read from the text's `_count` and `_sum` lines (the parser folds a labelled
 * histogram's series into one, so it cannot tell them apart): `text` must have parsed already.
 */
function histogram(text: string, name: string, labels: Record<string, string> = {}) {
  const read = (suffix: string) => {
    const line = text
      .split('\n')
      .map((l) => /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(l))
      .find((m) => m?.[1] === `${name}${suffix}` && sameLabels(labelsOf(m[2] ?? ''), labels))
    return Number(line?.[3])
  }
  return { count: read('_count'), sum: read('_sum') }
}

function labelsOf(text: string): Record<string, string> {
  return Object.fromEntries([...text.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]))
}

const sameLabels = (a: Record<string, string>, b: Record<string, string>) =>
  Object.keys(a).length === Object.keys(b).length && Object.entries(b).every(([k, v]) => a[k] === v)

describe('GET /metrics after a scripted run', () => {
  it('counts the run, its model calls, tokens, cost, tool call and permission wait; no label carries an id', async () => {
    server = await serverWithScript()
    client = await Client.connect(server.wsUrl, server.token)
    const s = server
    let waiting: Families = []
    const { session, events } = await scriptedRun(s, client, async () => {
      waiting = parsePrometheusTextFormat((await scrape(s.url, s.token)).text)
    })
    // while the permission waited
    expect(value(waiting, 'chronicle_permission_requests_waiting')).toBe(1)
    expect(value(waiting, 'chronicle_runs_active', { state: 'waiting' })).toBe(1)
    expect(value(waiting, 'chronicle_runs_active', { state: 'running' })).toBe(0)
    expect(value(waiting, 'chronicle_sessions', { status: 'waiting', archived: 'false' })).toBe(1)

    const { status, type, text } = await scrape(s.url, s.token)
    expect(status).toBe(200)
    expect(type).toMatch(/^text\/plain; version=0\.0\.4/)
    const families = parsePrometheusTextFormat(text)
    const provider = 'scripted'
    const model = s.file
    expect(value(families, 'chronicle_inputs_accepted_total', { delivery: 'steer' })).toBe(1)
    expect(value(families, 'chronicle_runs_started_total')).toBe(1)
    expect(value(families, 'chronicle_runs_finished_total', { outcome: 'idle' })).toBe(1)
    expect(histogram(text, 'chronicle_run_seconds', { outcome: 'idle' }).count).toBe(1)
    expect(value(families, 'chronicle_runs_active', { state: 'waiting' })).toBe(0)
    expect(value(families, 'chronicle_runs_active', { state: 'running' })).toBe(0)
    expect(value(families, 'chronicle_sessions', { status: 'idle', archived: 'false' })).toBe(1)
    expect(value(families, 'chronicle_model_calls_total', { provider, model, finish_reason: 'tool-calls' })).toBe(1)
    expect(value(families, 'chronicle_model_calls_total', { provider, model, finish_reason: 'stop' })).toBe(1)
    expect(histogram(text, 'chronicle_model_call_seconds', { provider, model }).count).toBe(2)
    expect(histogram(text, 'chronicle_model_time_to_first_token_seconds', { provider, model }).count).toBe(2)
    expect(value(families, 'chronicle_model_tokens_total', { provider, model, type: 'input' })).toBe(30)
    expect(value(families, 'chronicle_model_tokens_total', { provider, model, type: 'output' })).toBe(12)
    expect(value(families, 'chronicle_model_cost_usd_total', { provider, model })).toBeCloseTo(0.054, 10)
    expect(value(families, 'chronicle_tool_calls_total', { tool: 'bash', outcome: 'completed' })).toBe(1)
    expect(histogram(text, 'chronicle_tool_seconds', { tool: 'bash', outcome: 'completed' }).count).toBe(1)
    expect(value(families, 'chronicle_permission_requests_total', { permission: 'bash' })).toBe(1)
    expect(value(families, 'chronicle_permission_requests_waiting')).toBe(0)
    expect(histogram(text, 'chronicle_permission_wait_seconds', { reply: 'once' }).count).toBe(1)
    // the store: every event committed was counted, in commits whose sizes and times were observed
    const head = value(families, 'chronicle_store_head_seq') ?? 0
    expect(value(families, 'chronicle_store_events_total')).toBe(head)
    const commits = value(families, 'chronicle_store_commits_total') ?? 0
    expect(commits).toBeGreaterThan(0)
    expect(histogram(text, 'chronicle_store_commit_events')).toEqual({ count: commits, sum: head })
    expect(histogram(text, 'chronicle_store_commit_seconds').count).toBe(commits)
    // the sockets: this client, its one subscription, caught up
    expect(value(families, 'chronicle_websocket_connections')).toBe(1)
    expect(value(families, 'chronicle_subscriptions')).toBe(1)
    expect(value(families, 'chronicle_subscriber_lag_events')).toBe(0)
    expect(value(families, 'chronicle_slow_consumers_dropped_total')).toBe(0)
    // the process: event-loop delay and heap (prom-client's defaults)
    expect(families.map((f) => f.name)).toEqual(
      expect.arrayContaining(['nodejs_eventloop_lag_p99_seconds', 'nodejs_heap_size_used_bytes']),
    )
    // no label value carries an id of the log
    const ids = new Set<string>([session])
    for (const e of events)
      for (const [k, v] of Object.entries(e.data)) if (/Id$/.test(k) && typeof v === 'string') ids.add(v)
    expect(ids.size).toBeGreaterThan(5)
    const labelValues = families.flatMap((f) => f.metrics.flatMap((m) => Object.values(m.labels ?? {})))
    expect(labelValues.filter((v) => [...ids].some((id) => v.includes(id)))).toEqual([])
  })
})

describe('the dashboard and the alert rules', () => {
  it('query only metrics a real server serves after a run (docs/grafana-dashboard.json, docs/OBSERVABILITY.md)', async () => {
    const dashboard = JSON.parse(readFileSync(join(DOCS, 'grafana-dashboard.json'), 'utf8')) as {
      panels: { title: string; targets?: { expr: string }[] }[]
    }
    const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr))
    expect(dashboard.panels.filter((p) => (p.targets ?? []).length > 0).length).toBeGreaterThanOrEqual(10)
    const doc = readFileSync(join(DOCS, 'OBSERVABILITY.md'), 'utf8')
    const alerts = /## Alert rules[\s\S]*?```yaml\n([\s\S]*?)```/.exec(doc)?.[1] ?? ''
    expect(alerts).toContain('alert: ChronicleRunStuck')
    const queried = new Set(
      [...[...exprs, alerts].join('\n').matchAll(/\b(?:chronicle|nodejs|process)_[a-z0-9_]+/g)].map((m) =>
        m[0].replace(/_(bucket|count|sum)$/, ''),
      ),
    )
    expect(queried.size).toBeGreaterThan(15)

    server = await serverWithScript()
    client = await Client.connect(server.wsUrl, server.token)
    await scriptedRun(server, client)
    const served = new Set(parsePrometheusTextFormat((await scrape(server.url, server.token)).text).map((f) => f.name))
    expect([...queried].filter((name) => !served.has(name))).toEqual([])
  })
})

describe('who may scrape', () => {
  it('the main address: no token 401, an operate or audit token 403, an admin limited to sessions 403, admin 200', async () => {
    server = await serverWithScript()
    client = await Client.connect(server.wsUrl, server.token)
    const created = await client.call('session.create', { directory: server.dir })
    const session = (created.result as { session: { id: string } }).session.id
    let n = 0
    const token = async (role: string, sessions?: string[]) =>
      (
        (await client!.call('token.create', { name: `t${++n}`, role, ...(sessions && { sessions }) })).result as {
          token: string
        }
      ).token
    expect((await scrape(server.url)).status).toBe(401)
    expect((await scrape(server.url, 'not-a-token')).status).toBe(401)
    const operate = await scrape(server.url, await token('operate'))
    expect(operate.status).toBe(403)
    expect(JSON.parse(operate.text)).toMatchObject({ code: 'FORBIDDEN' })
    expect((await scrape(server.url, await token('audit'))).status).toBe(403)
    expect((await scrape(server.url, await token('admin', [session]))).status).toBe(403)
    expect((await scrape(server.url, await token('admin'))).status).toBe(200)
    expect((await scrape(server.url, server.token)).status).toBe(200)
  })

  it("the config's scrape address serves /metrics without a token, and nothing else", async () => {
    server = await serverWithScript({ metrics: { enabled: true, listen: { host: '127.0.0.1', port: 0 } } })
    const url = server.chronicle.metricsUrl()
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    const { status, text } = await scrape(url!)
    expect(status).toBe(200)
    expect(parsePrometheusTextFormat(text).map((f) => f.name)).toContain('chronicle_store_commits_total')
    for (const path of ['/', '/sessions', '/ws', '/metrics/../sessions', '/health'])
      expect((await fetch(`${url}${path}`)).status, path).toBe(404)
    expect((await fetch(`${url}/metrics`, { method: 'POST' })).status).toBe(404)
    // the main address still asks for a token
    expect((await scrape(server.url)).status).toBe(401)
  })

  it('metrics off: no /metrics route and no scrape address', async () => {
    server = await serverWithScript({ metrics: { enabled: false, listen: undefined } })
    expect((await scrape(server.url, server.token)).status).toBe(404)
    expect(server.chronicle.metricsUrl()).toBeUndefined()
  })
})
