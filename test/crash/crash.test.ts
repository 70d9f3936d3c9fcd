import { describe, expect, it } from 'vitest'
import { runCrash, summaryLine } from './harness.js'

/**
 * The kill -9 harness, short: 20 SIGKILLs of the real server process at seeded
 * points (after an acknowledgement, mid-stream, mid-tool, during a permission
 * wait, at a random instant), then the invariants of docs/RECOVERY.md. The long run is
 * `npm run test:crash -- --iterations 500 --seed S` (docs/RECOVERY.md).
 */
describe('crash recovery under kill -9', () => {
  it('loses no acknowledged input, duplicates none, leaves no gap, no dangling tool call, and verifies', async () => {
    const result = await runCrash({ iterations: 20, seed: 20261130 })
    expect(result.violations).toEqual([])
    expect(summaryLine(result)).toBe(
      'crash: iterations=20 kills=20 lostInputs=0 duplicateInputs=0 gaps=0 danglingTools=0 verifyFailures=0 workspaceMismatches=0 auditMismatches=0',
    )
    // The run exercised what it claims to: acknowledged inputs, resumed runs, interrupted calls, model requests after them.
    expect(result.acked).toBeGreaterThan(0)
    expect(result.resumedRuns).toBeGreaterThan(0)
    expect(result.resumeRequests).toBeGreaterThan(0)
    expect(result.requests).toBeGreaterThan(result.resumeRequests)
    expect(result.auditedSteps).toBeGreaterThan(0) // audit rebuilt model requests, resumed runs' included
    // reverts and forks with files were among what was cut off
    expect(result.workspaceTasks).toBeGreaterThan(0)
  }, 170_000)
})
