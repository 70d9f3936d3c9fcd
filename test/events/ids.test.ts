import { describe, expect, it } from 'vitest'
import { createIdSource, sequentialIds } from '../../src/events/ids.js'

describe('entity ids', () => {
  it('are prefixed and sort by creation, even when the clock stalls or steps back', () => {
    const clock = [1_000, 1_000, 1_000, 999, 5_000]
    const ids = createIdSource(() => clock.shift() ?? 5_000)
    const made = ['ses', 'msg', 'prt', 'call', 'run'].map((p) => ids.next(p as never))
    expect(made.map((id) => id.split('_')[0])).toEqual(['ses', 'msg', 'prt', 'call', 'run'])
    const stamps = made.map((id) => id.split('_')[1]?.slice(0, 12))
    expect([...stamps].sort()).toEqual(stamps)
    expect(new Set(stamps).size).toBe(5)
    for (const id of made) expect(id).toMatch(/^[a-z]+_[0-9a-f]{12}[0-9a-zA-Z]{10}$/)
  })

  it('stay unique across thousands made in one millisecond', () => {
    const ids = createIdSource(() => 42)
    const made = Array.from({ length: 5000 }, () => ids.next('prt'))
    expect(new Set(made).size).toBe(5000)
    expect([...made].sort()).toEqual(made)
  })

  it('are deterministic for tests', () => {
    const ids = sequentialIds()
    expect([ids.next('ses'), ids.next('msg'), ids.next('prt')]).toEqual(['ses_000001', 'msg_000002', 'prt_000003'])
  })
})
