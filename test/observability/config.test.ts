import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'

/** The user's config for metrics and traces (docs/OBSERVABILITY.md "Configuration"). */

const dir = mkdtempSync(join(tmpdir(), 'chronicle-obs-config-'))
const withFile = (content: unknown, env: Record<string, string> = {}) => {
  const file = join(dir, `c${Math.random().toString(36).slice(2)}.json`)
  writeFileSync(file, JSON.stringify(content))
  return loadConfig({ env: { CHRONICLE_DATA_DIR: join(dir, 'data'), ...env }, configPath: file })
}

describe('metrics and traces config', () => {
  it('by default: metrics on at /metrics for an admin token, no scrape address, no traces', () => {
    const config = withFile({})
    expect(config.metrics).toEqual({ enabled: true, listen: undefined })
    expect(config.traces).toEqual({ endpoint: undefined, content: false })
  })

  it('a scrape address: a port is on 127.0.0.1; host:port as given, IPv6 in brackets', () => {
    expect(withFile({ metrics: { listen: 9464 } }).metrics.listen).toEqual({ host: '127.0.0.1', port: 9464 })
    expect(withFile({ metrics: { listen: '0.0.0.0:9464' } }).metrics.listen).toEqual({ host: '0.0.0.0', port: 9464 })
    expect(withFile({ metrics: { listen: '[::1]:9464' } }).metrics.listen).toEqual({ host: '::1', port: 9464 })
    expect(withFile({ metrics: false }).metrics).toEqual({ enabled: false, listen: undefined })
  })

  it('a bad scrape address is refused with the config error', () => {
    expect(() => withFile({ metrics: { listen: 'localhost' } })).toThrow(/expected "host:port"/)
    expect(() => withFile({ metrics: { listen: '127.0.0.1:99999' } })).toThrow(/at most 65535/)
    expect(() => withFile({ metrics: { scrape: true } })).toThrow(/scrape/)
  })

  it('traces: the config file names the endpoint, else OTEL_EXPORTER_OTLP_ENDPOINT', () => {
    expect(withFile({}, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }).traces.endpoint).toBe(
      'http://127.0.0.1:4318',
    )
    expect(
      withFile({ traces: { endpoint: 'http://collector:4318' } }, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x:1' }).traces
        .endpoint,
    ).toBe('http://collector:4318')
    expect(() => withFile({ traces: { endpoint: 'not a url' } })).toThrow(/traces/)
  })

  it("traces carry text only when the config file or the GenAI convention's variable asks", () => {
    const ask = { OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true' }
    expect(withFile({}).traces.content).toBe(false)
    expect(withFile({}, ask).traces.content).toBe(true)
    expect(withFile({}, { OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'yes please' }).traces.content).toBe(
      false,
    )
    expect(withFile({ traces: { content: true } }).traces.content).toBe(true)
    expect(withFile({ traces: { content: false } }, ask).traces.content).toBe(false)
    expect(() => withFile({ traces: { content: 'all' } })).toThrow(/traces/)
  })
})
