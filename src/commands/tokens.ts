import type { ChronicleEvent, DataOf, Role } from '../events/catalogue.js'
import { ChronicleError } from '../events/errors.js'

/**
 * Named tokens' commands (docs/SECURITY.md "Principals and tokens"), decided
 * on the `sys_tokens` stream's state as read: pure, so the same state gives
 * the same events. The secret is minted by the caller (randomness and its
 * scrypt hash are not decisions); what is decided is whether the token may
 * exist and what the log records of it. The owner's name is taken.
 */

/** What a decision reads of a token. */
export interface TokenState {
  readonly name: string
  readonly revokedAt?: string
}

export interface TokenSpec {
  readonly name: string
  readonly role: Role
  readonly sessions?: readonly string[]
  readonly expiresAt?: string
}

export interface MintedToken {
  readonly tokenId: string
  /** base64 */
  readonly salt: string
  /** the secret's scrypt hash, base64 */
  readonly hash: string
}

export function decideTokenCreate(
  tokens: ReadonlyMap<string, TokenState>,
  spec: TokenSpec,
  minted: MintedToken,
  /** shareNames: active shares' (a share's name attributes its visitors' events as a token's does) */
  context: { readonly now: number; readonly ownerName: string; readonly shareNames?: ReadonlySet<string> },
): ChronicleEvent[] {
  if (spec.expiresAt !== undefined && Date.parse(spec.expiresAt) <= context.now)
    throw new ChronicleError('BAD_REQUEST', `the expiry ${spec.expiresAt} is in the past`)
  if (spec.name === context.ownerName || [...tokens.values()].some((t) => t.name === spec.name && !t.revokedAt))
    throw new ChronicleError('TOKEN_NAME_TAKEN', `a token named ${spec.name} exists`)
  if (context.shareNames?.has(spec.name))
    throw new ChronicleError('TOKEN_NAME_TAKEN', `a share named ${spec.name} exists`)
  const data: DataOf<'token.created'> = {
    tokenId: minted.tokenId,
    name: spec.name,
    role: spec.role,
    ...(spec.sessions && { sessions: [...spec.sessions] }),
    ...(spec.expiresAt !== undefined && { expiresAt: new Date(spec.expiresAt).toISOString() }),
    salt: minted.salt,
    hash: minted.hash,
  }
  return [{ type: 'token.created', data }]
}

export function decideTokenRevoke(
  tokens: ReadonlyMap<string, TokenState>,
  tokenId: string,
  context: { readonly ownerId: string },
): ChronicleEvent[] {
  if (tokenId === context.ownerId)
    throw new ChronicleError(
      'FORBIDDEN',
      "the owner's token is revoked by replacing it (CHRONICLE_TOKEN or the data dir's token file)",
    )
  const token = tokens.get(tokenId)
  if (!token) throw new ChronicleError('TOKEN_NOT_FOUND', `no token ${tokenId}`)
  if (token.revokedAt) throw new ChronicleError('TOKEN_REVOKED', `token ${tokenId} was revoked at ${token.revokedAt}`)
  return [{ type: 'token.revoked', data: { tokenId } }]
}
