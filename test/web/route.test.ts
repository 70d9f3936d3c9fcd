import { describe, expect, it } from 'vitest'
import { parseRoute, routeHash } from '../../src/web/route.js'

/** The page's routes, in the URL's fragment (src/web/route.ts). */
describe('routes', () => {
  it('reads each view from the fragment', () => {
    expect(parseRoute('')).toEqual({ view: 'list' })
    expect(parseRoute('#/')).toEqual({ view: 'list' })
    expect(parseRoute('#/admin')).toEqual({ view: 'admin' })
    expect(parseRoute('#/s/ses_1a2B-c_')).toEqual({ view: 'session', id: 'ses_1a2B-c_' })
    expect(parseRoute('#/s/ses_1@42')).toEqual({ view: 'at', id: 'ses_1', seq: 42 })
    expect(parseRoute('#/s/ses_1@')).toEqual({ view: 'at', id: 'ses_1', seq: null })
    expect(parseRoute('#/s/ses_1@x')).toEqual({ view: 'unknown', hash: '#/s/ses_1@x' })
    expect(parseRoute('#/nope')).toEqual({ view: 'unknown', hash: '#/nope' })
    expect(parseRoute('#/search/%22rm%20-rf%22%20tool%3Abash')).toEqual({ view: 'search', q: '"rm -rf" tool:bash' })
    expect(parseRoute('#/search')).toEqual({ view: 'search', q: '' })
    expect(parseRoute('#/search/%E0%A4%A')).toEqual({ view: 'unknown', hash: '#/search/%E0%A4%A' })
  })

  it('writes what it reads', () => {
    for (const hash of ['#/', '#/admin', '#/s/ses_1', '#/s/ses_1@42', '#/s/ses_1@', '#/search/flaky%20test'])
      expect(routeHash(parseRoute(hash))).toBe(hash)
  })
})
