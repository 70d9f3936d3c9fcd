import { describe, expect, it } from 'vitest'
import type { StoredEvent } from '../../src/events/envelope.js'
import { type HeardCommit, HeardCommits } from '../../src/observability/heard-commits.js'

/** Metrics and spans read the commits in batches, a little after they land (docs/OBSERVABILITY.md "Cost"). */

const commit = (n: number): HeardCommit => ({ events: [] as StoredEvent[], at: n, commitMs: n / 10 })

describe('heard commits', () => {
  it('are read together once the delay has passed, in the order heard', async () => {
    const read: number[] = []
    const heard = new HeardCommits((c) => read.push(c.at), 30)
    for (const n of [1, 2, 3]) heard.note(commit(n))
    expect(read).toEqual([])
    await new Promise((resolve) => setTimeout(resolve, 80))
    expect(read).toEqual([1, 2, 3])
    heard.note(commit(4))
    await new Promise((resolve) => setTimeout(resolve, 80))
    expect(read).toEqual([1, 2, 3, 4])
  })

  it('are read at once when someone needs them (a scrape), and not again', async () => {
    const read: HeardCommit[] = []
    const heard = new HeardCommits((c) => read.push(c), 30)
    heard.note(commit(1))
    heard.flush()
    expect(read.map((c) => [c.at, c.commitMs])).toEqual([[1, 0.1]])
    await new Promise((resolve) => setTimeout(resolve, 80))
    expect(read).toHaveLength(1)
  })
})
