import { describe, expect, it } from 'vitest'
import { BoundedCache } from '../../src/events/bounded-cache.js'

/** What the projection relies on when it takes a session's cached view for a batch (src/projections/rows/projector.ts). */
describe('BoundedCache.take', () => {
  const bounds = { entries: 10, bytes: 1000, idleMs: 100 }

  it('returns the value and removes it, so the taker owns it until it puts it back', () => {
    let now = 0
    const cache = new BoundedCache<string, string>(bounds, () => now)
    cache.set('a', 'view a', 10)
    now = 50
    expect(cache.take('a')).toBe('view a')
    expect({ has: cache.has('a'), size: cache.size, bytes: cache.bytes }).toEqual({ has: false, size: 0, bytes: 0 })
    expect(cache.take('a')).toBeUndefined()
  })

  it('gives nothing for an entry idle for idleMs, and drops it', () => {
    let now = 0
    const cache = new BoundedCache<string, string>(bounds, () => now)
    cache.set('a', 'view a', 10)
    now = 100
    expect(cache.take('a')).toBeUndefined()
    expect({ size: cache.size, bytes: cache.bytes }).toEqual({ size: 0, bytes: 0 })
  })
})
