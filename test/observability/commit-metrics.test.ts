import parsePrometheusTextFormat from 'parse-prometheus-text-format'
import { Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import type { StoredEvent } from '../../src/events/envelope.js'
import { BoundedLabels, OTHER } from '../../src/observability/bounded-labels.js'
import { CommitMetrics, NOT_CALLED } from '../../src/observability/commit-metrics.js'

/**
 * Label values stay bounded whatever names reach them (docs/OBSERVABILITY.md "Labels"): an MCP server may offer
 * any number of tools, a client may name any model, a model may call tools that do not exist.
 */

let seq = 0
const event = (sessionId: string, type: string, data: Record<string, unknown>): StoredEvent =>
  ({
    seq: ++seq,
    sessionId,
    version: seq,
    schemaVersion: 1,
    meta: { actor: 'runtime' },
    at: new Date(0).toISOString(),
    type,
    data,
  }) as StoredEvent

describe('BoundedLabels', () => {
  it('passes the first values, cut to 100 characters, and names every later one (other)', () => {
    const labels = new BoundedLabels(2)
    expect([labels.of('a'), labels.of('b'), labels.of('c'), labels.of('a'), labels.of('x'.repeat(300))]).toEqual([
      'a',
      'b',
      OTHER,
      'a',
      OTHER,
    ])
    expect(new BoundedLabels(1).of('y'.repeat(300))).toBe('y'.repeat(100))
  })
})

describe('CommitMetrics under hostile names', () => {
  it('1000 tool names from a server and 500 model names from clients make at most 202 tool series (200, (other), (not called)) and 51 model series', async () => {
    const registry = new Registry()
    const metrics = new CommitMetrics(registry, () => 0.1)
    for (let i = 0; i < 500; i++) {
      const s = `ses_${i}`
      metrics.observe([
        event(s, 'run.started', { runId: `run_${i}`, reason: 'input' }),
        event(s, 'message.created', {
          messageId: `msg_${i}`,
          role: 'assistant',
          agent: 'build',
          model: `openai:m${i}`,
        }),
        event(s, 'step.started', { messageId: `msg_${i}`, partId: `prt_${i}`, step: 1, contextDigest: 'd' }),
        event(s, 'step.finished', {
          messageId: `msg_${i}`,
          partId: `prt_s${i}`,
          finishReason: `reason-${i}`,
          usage: { inputTokens: 1 },
        }),
      ])
      for (const j of [0, 1]) {
        const tool = `mcp_tool_${i * 2 + j}`
        metrics.observe([
          event(s, 'tool.called', { messageId: `msg_${i}`, partId: `prt_t${i}_${j}`, callId: 'c', tool }),
          event(s, 'tool.completed', { partId: `prt_t${i}_${j}`, output: '' }),
        ])
      }
      // a call of a tool that does not exist fails before it is called: its name is never a label
      metrics.observe([
        event(s, 'tool.input.started', { messageId: `msg_${i}`, partId: `prt_x${i}`, callId: 'x', tool: `ghost_${i}` }),
        event(s, 'tool.failed', { partId: `prt_x${i}`, error: { kind: 'invalid', message: 'Unknown tool' } }),
        event(s, 'run.finished', { runId: `run_${i}`, outcome: 'idle' }),
      ])
    }
    metrics.read() // what a scrape does first (src/observability/metrics.ts)
    const families = parsePrometheusTextFormat(await registry.metrics())
    const values = (name: string, label: string) =>
      new Set(families.find((f) => f.name === name)?.metrics.map((m) => m.labels?.[label]))
    const tools = values('chronicle_tool_calls_total', 'tool')
    expect(tools.size).toBe(202) // 200 names, (other), (not called)
    expect(tools.has(OTHER) && tools.has(NOT_CALLED)).toBe(true)
    expect([...tools].some((t) => t?.startsWith('ghost_'))).toBe(false)
    expect(values('chronicle_model_calls_total', 'model').size).toBe(51)
    expect(values('chronicle_model_calls_total', 'finish_reason').size).toBe(21)
    const other = families
      .find((f) => f.name === 'chronicle_tool_calls_total')
      ?.metrics.find((m) => m.labels?.tool === OTHER && m.labels?.outcome === 'completed')
    expect(Number(other?.value)).toBe(800)
  })
})
