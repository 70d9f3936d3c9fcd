import { afterEach, describe, expect, it } from 'vitest'
import { budgetFor, compactionConfig, DEFAULT_COMPACTION } from '../../src/runtime/compaction/config.js'
import { estimateRequest } from '../../src/runtime/compaction/tokens.js'
import { compactionHarness, dataOf, SPEC, type CompactionHarness } from './helpers.js'

describe('budgets', () => {
  it('reserve 20k tokens, or 15% of small windows; per model overrides; unknown window: no automatic trigger', () => {
    const config = compactionConfig({
      models: { 'openai:small': { contextWindow: 32_000 }, tiny: { contextWindow: 8_000, reserved: 1_000 } },
    })
    expect(budgetFor(config, 'openai:gpt-x')).toEqual({
      contextWindow: 128_000,
      reserve: 19_200,
      usable: 108_800,
      tail: 15_000,
    })
    expect(
      budgetFor(compactionConfig({ models: { 'openai:big': { contextWindow: 200_000 } } }), 'openai:big'),
    ).toMatchObject({ reserve: 20_000, usable: 180_000 })
    expect(budgetFor(config, 'openai:small')).toEqual({
      contextWindow: 32_000,
      reserve: 4_800,
      usable: 27_200,
      tail: 13_600,
    })
    expect(budgetFor(config, 'compatible:tiny')).toEqual({
      contextWindow: 8_000,
      reserve: 1_000,
      usable: 7_000,
      tail: 3_500,
    }) // matched by id
    expect(budgetFor(compactionConfig({ reserved: 5_000 }), 'x:y')).toMatchObject({ reserve: 5_000 })
    expect(
      budgetFor({ auto: true, tail: 15_000, maxShrinks: 3, models: {}, prune: DEFAULT_COMPACTION.prune }, 'x:y'),
    ).toBeUndefined()
  })
})

describe('token accounting per step', () => {
  let h: CompactionHarness
  afterEach(() => h.close())

  it("records the provider's usage when it reports one, an estimate marked estimated when not", async () => {
    h = compactionHarness(
      [{ text: 'counted', usage: { input: 123, output: 7 } }, { text: 'not counted: twenty-eight ch' }],
      {},
    )
    const id = h.session()
    await h.turn(id, 'one')
    await h.turn(id, 'two')
    const usages = dataOf(h.events(id), 'step.finished').map((d) => d.usage)
    expect(usages[0]).toEqual({ inputTokens: 123, outputTokens: 7 })
    const context = await h.runtime.context(id, h.events(id).filter((e) => e.type === 'step.started')[1]!.seq - 1)
    expect(usages[1]).toEqual({ inputTokens: estimateRequest(context), outputTokens: 7, estimated: true })
    // message.completed carries the same usage, so the session totals include the estimate.
    expect(dataOf(h.events(id), 'message.completed').map((d) => d.usage)).toEqual(usages)
  })

  it('an estimated step does not anchor the next estimate: the whole request is estimated instead', async () => {
    // usable = 1000 - 200 = 800; a reply of ~3400 characters (≈ 850 tokens) pushes the estimate past it.
    const steps = [
      { when: { userContains: '<transcript>' }, text: 'SUMMARY' },
      { text: `long ${'w'.repeat(3400)}` },
      { text: 'after' },
    ]
    h = compactionHarness(steps, { models: { [SPEC]: { contextWindow: 1000, reserved: 200 } }, tail: 50 })
    const id = h.session()
    await h.turn(id, 'one')
    await h.turn(id, 'two')
    expect(dataOf(h.events(id), 'compaction.requested')).toEqual([{ compactionId: expect.any(String), reason: 'auto' }])
  })
})
