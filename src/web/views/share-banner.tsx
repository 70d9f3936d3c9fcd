import type { Principal } from '../connection.js'
import { sessionHash } from '../route.js'
import { formatTime } from '../ui.js'

/**
 * What a share link's visitor sees above every view (docs/API.md "Shares"):
 * that the session was shared, by whom, with what role and until when.
 */
export function ShareBanner({ who }: { who: Principal }) {
  if (!who.share) return null
  const { by, expiresAt } = who.share
  return (
    <div class="share-banner" role="note">
      Shared with you{by ? ` by ${by}` : ''} as <strong>{who.name}</strong>:{' '}
      {who.role === 'operate' ? 'you may read and act on this session' : 'read only'}, until {formatTime(expiresAt)}.{' '}
      <a href={sessionHash(who.share.session)}>Open the shared session</a>
    </div>
  )
}
