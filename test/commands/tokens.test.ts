import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { decideTokenCreate, decideTokenRevoke } from '../../src/commands/tokens.js'
import { isChronicleError } from '../../src/events/errors.js'
import { createIdSource } from '../../src/events/ids.js'
import type { EventStore } from '../../src/events/store.js'
import { Principals, TOKENS_STREAM } from '../../src/http/principals.js'
import { openStore } from '../../src/projections/open.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/**
 * Token commands (src/commands/tokens.ts) are decided on the `sys_tokens`
 * stream as read and appended with its version: two servers on one database
 * cannot both create a token of one name, nor revoke one twice.
 */

const meta = { actor: 'user' as const }
const minted = { tokenId: 'tok_1', salt: 'c2FsdA==', hash: 'aGFzaA==' }
const context = { now: Date.parse('2026-12-03T10:00:00Z'), ownerName: 'owner' }
const cleanups: (() => void)[] = []
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c()
})

describe('token decisions', () => {
  it('create records the spec and the minted hash, never a secret; a name in use or the owner’s is taken', () => {
    expect(decideTokenCreate(new Map(), { name: 'ci', role: 'audit' }, minted, context)).toEqual([
      {
        type: 'token.created',
        data: { tokenId: 'tok_1', name: 'ci', role: 'audit', salt: 'c2FsdA==', hash: 'aGFzaA==' },
      },
    ])
    const taken = (tokens: Map<string, { name: string; revokedAt?: string }>, name: string) => {
      try {
        decideTokenCreate(tokens, { name, role: 'audit' }, minted, context)
        return 'created'
      } catch (err) {
        return isChronicleError(err) ? err.code : String(err)
      }
    }
    expect(taken(new Map([['tok_0', { name: 'ci' }]]), 'ci')).toBe('TOKEN_NAME_TAKEN')
    expect(taken(new Map([['tok_0', { name: 'ci', revokedAt: 'x' }]]), 'ci')).toBe('created')
    expect(taken(new Map(), 'owner')).toBe('TOKEN_NAME_TAKEN')
    expect(() =>
      decideTokenCreate(new Map(), { name: 'x', role: 'audit', expiresAt: '2026-12-01T00:00:00Z' }, minted, context),
    ).toThrow(/in the past/)
  })

  it('revoke needs an active token, and never the owner’s', () => {
    const tokens = new Map([
      ['tok_a', { name: 'a' }],
      ['tok_b', { name: 'b', revokedAt: '2026-12-02T00:00:00Z' }],
    ])
    expect(decideTokenRevoke(tokens, 'tok_a', { ownerId: 'owner' })).toEqual([
      { type: 'token.revoked', data: { tokenId: 'tok_a' } },
    ])
    for (const [id, code] of [
      ['tok_b', 'TOKEN_REVOKED'],
      ['tok_x', 'TOKEN_NOT_FOUND'],
      ['owner', 'FORBIDDEN'],
    ] as const) {
      const err = (() => {
        try {
          decideTokenRevoke(tokens, id, { ownerId: 'owner' })
        } catch (e) {
          return e
        }
      })()
      expect(isChronicleError(err, code)).toBe(true)
    }
  })
})

describe('tokens on two servers sharing one database', () => {
  async function twoServers(): Promise<[Principals, Principals, EventStore]> {
    const dir = mkdtempSync(join(tmpdir(), 'chronicle-tokens-'))
    const path = join(dir, 'chronicle.db')
    const a = openStore(path)
    const b = openStore(path) // a second server: it hears nothing of a's commits
    const pa = await Principals.open(sqlitePorts(a), createIdSource(), 'owner-secret-a')
    const pb = await Principals.open(sqlitePorts(b), createIdSource(), 'owner-secret-b')
    cleanups.push(() => {
      pa.close()
      pb.close()
      a.close()
      b.close()
      rmSync(dir, { recursive: true, force: true })
    })
    return [pa, pb, a]
  }

  it('a name created on one is taken on the other, which reads the stream again instead of creating it twice', async () => {
    const [a, b, store] = await twoServers()
    await a.create({ name: 'ci', role: 'audit' }, meta)
    await expect(b.create({ name: 'ci', role: 'operate' }, meta)).rejects.toThrow(/a token named ci exists/)
    expect(store.readSession(TOKENS_STREAM).map((e) => e.type)).toEqual(['token.created'])
    expect(b.list().map((t) => t.name)).toEqual(['ci']) // b has read it
  })

  it('a token revoked on one is revoked once: the other answers TOKEN_REVOKED', async () => {
    const [a, b, store] = await twoServers()
    const { info } = await a.create({ name: 'ci', role: 'audit' }, meta)
    await b.create({ name: 'other', role: 'audit' }, meta) // b catches up on a's token here
    await a.revoke(info.tokenId, meta)
    await expect(b.revoke(info.tokenId, meta)).rejects.toThrow(/was revoked/)
    expect(store.readSession(TOKENS_STREAM).map((e) => e.type)).toEqual([
      'token.created',
      'token.created',
      'token.revoked',
    ])
  })
})
