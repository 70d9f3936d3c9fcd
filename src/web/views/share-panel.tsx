import { useEffect, useState } from 'preact/hooks'
import { ApiError, type ChronicleSocket, type ShareInfo } from '../../client/index.js'
import { ErrorNote, formatTime, useAction } from '../ui.js'

/**
 * The session's shares (docs/API.md "Shares"): a form that makes a link
 * (`share.create`), shown once to copy, and the session's shares, each
 * revocable (`share.revoke`, which closes every page opened with it). Shown
 * once the server answered the list; never to whoever may not manage shares
 * (an audit token, a share's visitor), whom it answers FORBIDDEN.
 */
export function SharePanel({ socket, sessionId }: { socket: ChronicleSocket; sessionId: string }) {
  const [shares, setShares] = useState<ShareInfo[] | undefined>(undefined)
  const [forbidden, setForbidden] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const [link, setLink] = useState<string | undefined>(undefined)
  const [role, setRole] = useState<'audit' | 'operate'>('audit')
  const [expires, setExpires] = useState('7d')
  const [name, setName] = useState('')
  const [version, setVersion] = useState(0)
  useEffect(() => {
    let live = true
    socket.call('share.list', { session: sessionId }).then(
      (r) => live && setShares(r.shares),
      (e: unknown) => {
        if (!live) return
        if (e instanceof ApiError && e.code === 'FORBIDDEN') setForbidden(true)
        else setError(e)
      },
    )
    return () => {
      live = false
    }
  }, [socket, sessionId, version])
  const create = useAction(async () => {
    const made = await socket.call('share.create', {
      session: sessionId,
      role,
      expires,
      ...(name.trim() !== '' && { name: name.trim() }),
    })
    setLink(`${location.origin}${made.path}`)
    setName('')
    setVersion((v) => v + 1)
  })
  const revoke = useAction(async (shareId: string) => {
    await socket.call('share.revoke', { shareId })
    setVersion((v) => v + 1)
  })
  // shown once the first list answered (or failed otherwise): a visitor's page never shows it, even for a moment
  if (forbidden || (shares === undefined && error === undefined)) return null
  const now = Date.now()
  return (
    <section class="shares" aria-labelledby="shares-title">
      <h2 id="shares-title">Share</h2>
      <form
        class="share-form"
        onSubmit={(e) => {
          e.preventDefault()
          void create.start()
        }}
      >
        <label>
          Role{' '}
          <select value={role} onChange={(e) => setRole((e.target as HTMLSelectElement).value as 'audit' | 'operate')}>
            <option value="audit">audit (read only)</option>
            <option value="operate">operate (may act)</option>
          </select>
        </label>
        <label>
          Expires in{' '}
          <input value={expires} size={5} onInput={(e) => setExpires((e.target as HTMLInputElement).value)} />
        </label>
        <label>
          Name{' '}
          <input value={name} placeholder="for bob" onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        </label>
        <button type="submit" disabled={create.busy}>
          Create link
        </button>
      </form>
      <ErrorNote error={create.error ?? revoke.error ?? error} />
      {link && (
        <p class="share-link">
          Shown once:{' '}
          <input
            class="share-link-input"
            readOnly
            value={link}
            aria-label="Share link"
            onFocus={(e) => e.currentTarget.select()}
          />
        </p>
      )}
      {shares && shares.length > 0 && (
        <ul class="share-list">
          {shares.map((s) => {
            const state = s.revokedAt
              ? 'revoked'
              : Date.parse(s.expiresAt) <= now
                ? 'expired'
                : `until ${formatTime(s.expiresAt)}`
            return (
              <li key={s.shareId}>
                {s.name}{' '}
                <span class="who">
                  ({s.role}, {state})
                </span>
                {!s.revokedAt && Date.parse(s.expiresAt) > now && (
                  <button
                    type="button"
                    class="danger small"
                    disabled={revoke.busy}
                    aria-label={`Revoke ${s.name}`}
                    onClick={() => void revoke.start(s.shareId)}
                  >
                    Revoke
                  </button>
                )}
              </li>
            )
          })}
        </ul>
      )}
    </section>
  )
}
