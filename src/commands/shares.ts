import type { ChronicleEvent, ShareRole } from '../events/catalogue.js'
import { ChronicleError } from '../events/errors.js'
import type { Session } from '../projections/fold/model.js'

/**
 * Share links' commands (docs/SECURITY.md "Shares"), decided on the
 * `sys_tokens` stream's state as read and the shared session's read model:
 * pure, so the same state gives the same events. The link's secret is minted
 * by the caller (randomness is not a decision); what is decided is whether
 * the share may exist and what the log records of it.
 *
 * A share's name is what every event its visitors cause is attributed to
 * (`meta.by.name`), so it is unique among active shares and tokens, and never
 * the owner's.
 */

/** What a decision reads of a share. */
export interface ShareState {
  readonly name: string
  readonly session: string
  readonly revokedAt?: string
}

export interface ShareSpec {
  readonly session: string
  readonly role: ShareRole
  readonly name: string
  /** ISO time */
  readonly expiresAt: string
}

export interface MintedShare {
  readonly shareId: string
  /** the link secret's sha256, hex */
  readonly hash: string
}

export interface ShareContext {
  readonly now: number
  /** the shared session as read; undefined: there is none */
  readonly session: Session | undefined
  /** names in use: active tokens' and the owner's */
  readonly takenNames: ReadonlySet<string>
}

export function decideShareCreate(
  shares: ReadonlyMap<string, ShareState>,
  spec: ShareSpec,
  minted: MintedShare,
  context: ShareContext,
): ChronicleEvent[] {
  if (!context.session) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${spec.session}`)
  if (context.session.archived)
    throw new ChronicleError('SESSION_ARCHIVED', `session ${spec.session} is archived: it cannot be shared`)
  if (Date.parse(spec.expiresAt) <= context.now)
    throw new ChronicleError('BAD_REQUEST', `the expiry ${spec.expiresAt} is in the past`)
  const taken =
    context.takenNames.has(spec.name) || [...shares.values()].some((s) => s.name === spec.name && !s.revokedAt)
  if (taken) throw new ChronicleError('SHARE_NAME_TAKEN', `a share or token named ${spec.name} exists`)
  return [
    {
      type: 'share.created',
      data: {
        shareId: minted.shareId,
        session: spec.session,
        name: spec.name,
        role: spec.role,
        expiresAt: new Date(spec.expiresAt).toISOString(),
        hash: minted.hash,
      },
    },
  ]
}

export function decideShareRevoke(shares: ReadonlyMap<string, ShareState>, shareId: string): ChronicleEvent[] {
  const share = shares.get(shareId)
  if (!share) throw new ChronicleError('SHARE_NOT_FOUND', `no share ${shareId}`)
  if (share.revokedAt) throw new ChronicleError('SHARE_REVOKED', `share ${shareId} was revoked at ${share.revokedAt}`)
  return [{ type: 'share.revoked', data: { shareId } }]
}
