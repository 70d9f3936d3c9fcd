import { describe, expect, it } from 'vitest'
import { formatCount, formatTime, plural } from '../../src/web/ui.js'

/** How the page writes counts and times (src/web/ui.tsx): without Intl, whose first use costs a cold tab. */

describe('a count', () => {
  it('has its thousands separated by commas', () => {
    expect([0, 7, 999, 1000, 12_345, 1_234_567, -4321].map(formatCount)).toEqual([
      '0',
      '7',
      '999',
      '1,000',
      '12,345',
      '1,234,567',
      '-4,321',
    ])
  })

  it('keeps a fraction as it is', () => {
    expect(formatCount(12345.678)).toBe('12,345.678')
  })

  it('names its unit, singular for one', () => {
    expect([plural(1, 'message'), plural(1500, 'message'), plural(0, 'match', 'matches')]).toEqual([
      '1 message',
      '1,500 messages',
      '0 matches',
    ])
  })
})

describe('a time', () => {
  it('is the date and the time of day in the browser’s time zone', () => {
    const at = new Date(2026, 11, 7, 9, 5, 3) // local time
    expect(formatTime(at.toISOString())).toBe('2026-12-07 09:05:03')
  })

  it('is empty without one, and an unreadable one is shown as it came', () => {
    expect([formatTime(undefined), formatTime(''), formatTime('yesterday')]).toEqual(['', '', 'yesterday'])
  })
})
