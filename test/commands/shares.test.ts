import { describe, expect, it } from 'vitest'
import { decideShareCreate, decideShareRevoke, type ShareState } from '../../src/commands/shares.js'
import type { Session } from '../../src/projections/fold/model.js'

/** The share deciders (docs/SECURITY.md "Shares"): given the shares and the session as read, the events decided. */

const NOW = Date.parse('2026-12-04T12:00:00Z')
const session = { id: 'ses_a', archived: false } as Session
const minted = { shareId: 'shr_1', hash: 'a'.repeat(64) }
const spec = { session: 'ses_a', role: 'audit' as const, name: 'for bob', expiresAt: '2026-12-11T12:00:00Z' }
const none = new Map<string, ShareState>()
const context = { now: NOW, session, takenNames: new Set(['owner']) }

describe('share.create', () => {
  it('records the share: its session, name, role, expiry and the hash of its secret', () => {
    expect(decideShareCreate(none, spec, minted, context)).toEqual([
      {
        type: 'share.created',
        data: {
          shareId: 'shr_1',
          session: 'ses_a',
          name: 'for bob',
          role: 'audit',
          expiresAt: '2026-12-11T12:00:00.000Z',
          hash: 'a'.repeat(64),
        },
      },
    ])
  })

  it.each([
    ['a missing session', spec, { session: undefined }, 'SESSION_NOT_FOUND'],
    ['an archived session', spec, { session: { ...session, archived: true } }, 'SESSION_ARCHIVED'],
    ['an expiry now', { ...spec, expiresAt: new Date(NOW).toISOString() }, {}, 'BAD_REQUEST'],
    ['a token’s name', { ...spec, name: 'ci' }, { takenNames: new Set(['ci']) }, 'SHARE_NAME_TAKEN'],
    ['the owner’s name', { ...spec, name: 'owner' }, {}, 'SHARE_NAME_TAKEN'],
  ] as const)('refuses %s', (_what, given, over, code) => {
    expect(() => decideShareCreate(none, given, minted, { ...context, ...over })).toThrow(
      expect.objectContaining({ code }),
    )
  })

  it('an active share’s name is taken; a revoked one’s is free again', () => {
    const active = new Map([['shr_0', { name: 'for bob', session: 'ses_b' }]])
    expect(() => decideShareCreate(active, spec, minted, context)).toThrow(
      expect.objectContaining({ code: 'SHARE_NAME_TAKEN' }),
    )
    const revoked = new Map([['shr_0', { name: 'for bob', session: 'ses_b', revokedAt: '2026-12-01T00:00:00Z' }]])
    expect(decideShareCreate(revoked, spec, minted, context)).toHaveLength(1)
  })
})

describe('share.revoke', () => {
  const shares = new Map<string, ShareState>([
    ['shr_1', { name: 'for bob', session: 'ses_a' }],
    ['shr_2', { name: 'old', session: 'ses_a', revokedAt: '2026-12-01T00:00:00Z' }],
  ])

  it('revokes an active share', () => {
    expect(decideShareRevoke(shares, 'shr_1')).toEqual([{ type: 'share.revoked', data: { shareId: 'shr_1' } }])
  })

  it.each([
    ['shr_9', 'SHARE_NOT_FOUND'],
    ['shr_2', 'SHARE_REVOKED'],
  ])('refuses %s: %s', (id, code) => {
    expect(() => decideShareRevoke(shares, id)).toThrow(expect.objectContaining({ code }))
  })
})
