import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { getMessages, getParts, getSession } from '../../src/projections/queries/read-model.js'
import { costOf } from '../../src/runtime/model/pricing.js'
import { createModelResolver } from '../../src/runtime/model/providers.js'
import type { ScriptedModel } from '../../src/runtime/model/scripted-model.js'
import { type Harness, harness, text } from './helpers.js'

/**
 * A model's configuration beyond its name (config `models.<spec>`): its
 * sampling settings reach every call and are recorded on step.started; its
 * prices give each step a cost and the session a total.
 */

let h: Harness | undefined
afterEach(async () => {
  await h?.close()
  h = undefined
})

function scriptedSpec(): string {
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-profile-'))
  const file = join(dir, 'script.json')
  writeFileSync(
    file,
    JSON.stringify({
      steps: [
        {
          when: { afterToolResult: false },
          toolCalls: [{ id: 'c1', name: 'lookup', input: { query: 'q' } }],
          usage: { input: 1200, output: 300 },
        },
        { when: { afterToolResult: true }, text: 'done', usage: { input: 1500, output: 100 } },
      ],
    }),
  )
  return `scripted:${file}`
}

describe('configured model settings and prices', () => {
  it('applies max output, temperature and top-p to every call and records them with each step', async () => {
    const spec = scriptedSpec()
    const models = createModelResolver({ models: { [spec]: { maxOutput: 2048, temperature: 0.2, topP: 0.9 } } })
    h = harness({ models })
    const id = h.session({ model: spec })
    await h.runtime.submit(id, { parts: text('go') })
    await h.runtime.idle(id)
    const calls = (models.resolve(spec)?.model as ScriptedModel | undefined)?.calls ?? []
    expect(calls.map((c) => c.settings)).toEqual([
      { maxOutputTokens: 2048, temperature: 0.2, topP: 0.9 },
      { maxOutputTokens: 2048, temperature: 0.2, topP: 0.9 },
    ])
    const started = h.events(id).filter((e) => e.type === 'step.started')
    expect(started.map((e) => (e.data as { settings?: unknown }).settings)).toEqual([
      { maxOutputTokens: 2048, temperature: 0.2, topP: 0.9 },
      { maxOutputTokens: 2048, temperature: 0.2, topP: 0.9 },
    ])
  })

  it('gives each step its cost from the prices, and the session the total', async () => {
    const spec = scriptedSpec()
    const models = createModelResolver({ models: { [spec]: { inputPrice: 3, outputPrice: 15 } } })
    h = harness({ models })
    const id = h.session({ model: spec })
    await h.runtime.submit(id, { parts: text('go') })
    await h.runtime.idle(id)
    // 1,200 in and 300 out at $3 / $15 per million; then 1,500 in and 100 out
    const steps = getParts(h.store, id).flatMap((p) => (p.type === 'step-finish' ? [p.cost] : []))
    expect(steps).toEqual([0.0081, 0.006])
    expect(getMessages(h.store, id).flatMap((m) => (m.cost === undefined ? [] : [m.cost]))).toEqual([0.0081, 0.006])
    expect(getSession(h.store, id)?.totals.cost).toBeCloseTo(0.0141, 9)
  })

  it('a model without prices records no cost; none configured, the provider decides the settings', async () => {
    const spec = scriptedSpec()
    const models = createModelResolver({})
    h = harness({ models })
    const id = h.session({ model: spec })
    await h.runtime.submit(id, { parts: text('go') })
    await h.runtime.idle(id)
    const finished = h.events(id).filter((e) => e.type === 'step.finished')
    expect(finished.every((e) => !('cost' in (e.data as object)))).toBe(true)
    expect(h.events(id).some((e) => e.type === 'step.started' && 'settings' in (e.data as object))).toBe(false)
    expect(getSession(h.store, id)?.totals.cost).toBe(0)
  })
})

describe('costOf', () => {
  it('prices cached input at its own price (default: the input price), never more cached than input', () => {
    const price = { input: 2, output: 8, cachedInput: 0.5 }
    expect(costOf({ inputTokens: 1_000_000, cachedInputTokens: 400_000, outputTokens: 10_000 }, price)).toBe(1.48)
    expect(costOf({ inputTokens: 1_000_000, cachedInputTokens: 400_000 }, { input: 2, output: 8 })).toBe(2)
    expect(costOf({ inputTokens: 10, cachedInputTokens: 50 }, price)).toBe(0.000005)
    expect(costOf({}, price)).toBe(0)
  })
})
