import { useEffect, useRef, useState } from 'preact/hooks'
import type { ChronicleSocket, ResultOf, TokenInfo } from '../../client/index.js'
import { ErrorNote, formatTime, useAction } from '../ui.js'
import { isWebUrl } from './mcp-sign-ins.js'

/**
 * The admin page (`#/admin`, docs/WEB.md "Managing"): named tokens — create
 * one with a role, optional sessions and expiry (its secret shown once),
 * list them, revoke one (`token.create`, `.list`, `.revoke`) — and the MCP
 * servers' state as the log holds it (`mcp.servers`), with the sign-in link
 * of one waiting for a browser sign-in. Only an admin reaches these methods;
 * anyone else sees the server's FORBIDDEN.
 */
export function AdminPage({ socket }: { socket: ChronicleSocket }) {
  const heading = useRef<HTMLHeadingElement>(null)
  useEffect(() => heading.current?.focus(), [])
  return (
    <div class="admin-page">
      <p class="crumbs">
        <a href="#/">Sessions</a>
      </p>
      <h1 ref={heading} tabIndex={-1}>
        Admin
      </h1>
      <Tokens socket={socket} />
      <McpServers socket={socket} />
    </div>
  )
}

function Tokens({ socket }: { socket: ChronicleSocket }) {
  const [tokens, setTokens] = useState<readonly TokenInfo[] | undefined>(undefined)
  const [secret, setSecret] = useState<{ name: string; token: string } | undefined>(undefined)
  const [name, setName] = useState('')
  const [role, setRole] = useState<'audit' | 'operate' | 'admin'>('operate')
  const [sessions, setSessions] = useState('')
  const [expires, setExpires] = useState('')
  const list = useAction(async () => setTokens((await socket.call('token.list', {})).tokens))
  useEffect(() => void list.start(), [socket])
  const create = useAction(async () => {
    const ids = sessions
      .split(/[\s,]+/)
      .map((s) => s.trim())
      .filter(Boolean)
    const created = await socket.call('token.create', {
      name: name.trim(),
      role,
      ...(ids.length > 0 && { sessions: ids }),
      ...(expires.trim() && { expires: expires.trim() }),
    })
    setSecret({ name: created.name, token: created.token })
    setName('')
    setSessions('')
    setExpires('')
    await list.start()
  })
  const revoke = useAction(async (tokenId: string) => {
    await socket.call('token.revoke', { tokenId })
    await list.start()
  })
  return (
    <section aria-labelledby="tokens-title">
      <h2 id="tokens-title">Tokens</h2>
      <form
        class="token-form"
        onSubmit={(e) => {
          e.preventDefault()
          void create.start()
        }}
      >
        <label>
          Name
          <input value={name} required maxLength={100} onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        <label>
          Role
          <select value={role} onChange={(e) => setRole(e.currentTarget.value as typeof role)}>
            <option value="audit">audit (read only)</option>
            <option value="operate">operate (run sessions)</option>
            <option value="admin">admin (everything)</option>
          </select>
        </label>
        <label>
          Sessions (optional, comma separated)
          <input value={sessions} onInput={(e) => setSessions(e.currentTarget.value)} />
        </label>
        <label>
          Expires (optional: 30d, 12h or a date)
          <input value={expires} maxLength={40} onInput={(e) => setExpires(e.currentTarget.value)} />
        </label>
        <button type="submit" class="primary" disabled={create.busy || name.trim() === ''}>
          Create token
        </button>
      </form>
      <ErrorNote error={create.error} />
      {secret && (
        <div class="secret" role="alert">
          <p>
            The token <strong>{secret.name}</strong>, shown this once — keep it now:
          </p>
          <label>
            Secret of {secret.name}
            <input class="secret-value" readOnly value={secret.token} onFocus={(e) => e.currentTarget.select()} />
          </label>
          <button type="button" onClick={() => setSecret(undefined)}>
            I have kept it
          </button>
        </div>
      )}
      <ErrorNote error={list.error ?? revoke.error} />
      {tokens && tokens.length === 0 && <p class="empty">No tokens besides the owner’s.</p>}
      {tokens && tokens.length > 0 && (
        <div class="md-table">
          <table class="tokens">
            <caption class="visually-hidden">Tokens</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Role</th>
                <th scope="col">Sessions</th>
                <th scope="col">State</th>
                <th scope="col">Created</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {tokens.map((t) => {
                const state = stateOf(t)
                return (
                  <tr key={t.tokenId}>
                    <td>
                      {t.name} <code class="who">{t.tokenId}</code>
                    </td>
                    <td>{t.role}</td>
                    <td>{t.sessions ? t.sessions.join(', ') : 'all'}</td>
                    <td>{state}</td>
                    <td>
                      {formatTime(t.createdAt)}
                      {t.createdBy && ` by ${t.createdBy}`}
                    </td>
                    <td>
                      {state.startsWith('active') && (
                        <button
                          type="button"
                          class="danger"
                          aria-label={`Revoke ${t.name}`}
                          disabled={revoke.busy}
                          onClick={() => void revoke.start(t.tokenId)}
                        >
                          Revoke
                        </button>
                      )}
                    </td>
                  </tr>
                )
              })}
            </tbody>
          </table>
        </div>
      )}
    </section>
  )
}

function stateOf(t: TokenInfo): string {
  if (t.revokedAt) return `revoked ${formatTime(t.revokedAt)}`
  if (t.expiresAt && Date.parse(t.expiresAt) <= Date.now()) return `expired ${formatTime(t.expiresAt)}`
  return t.expiresAt ? `active until ${formatTime(t.expiresAt)}` : 'active'
}

type Servers = ResultOf<'mcp.servers'>['servers']

function McpServers({ socket }: { socket: ChronicleSocket }) {
  const [servers, setServers] = useState<Servers | undefined>(undefined)
  const read = useAction(async () => setServers((await socket.call('mcp.servers', {})).servers))
  useEffect(() => {
    void read.start()
    const onFocus = () => void read.start()
    window.addEventListener('focus', onFocus)
    return () => window.removeEventListener('focus', onFocus)
  }, [socket])
  // A server still connecting settles on its own (ready, failed, auth required): follow it until it does.
  const connecting = servers?.some((s) => s.state === 'connecting') ?? false
  useEffect(() => {
    if (!connecting || read.busy) return
    const again = setTimeout(() => void read.start(), 1000)
    return () => clearTimeout(again)
  }, [connecting, read.busy, servers])
  return (
    <section aria-labelledby="mcp-title">
      <h2 id="mcp-title">Tool servers (MCP)</h2>
      <ErrorNote error={read.error} />
      {servers && servers.length === 0 && <p class="empty">No MCP servers are configured.</p>}
      {servers && servers.length > 0 && (
        <ul class="mcp-servers">
          {servers.map((s) => (
            <li key={s.name}>
              <strong>{s.name}</strong> <span class={`badge badge-${s.state}`}>{s.state.replace('_', ' ')}</span>
              {s.state === 'ready' && ` · ${s.toolCount ?? s.tools.length} tools`}
              <span class="who"> since seq {s.since}</span>
              {s.authorizationUrl && isWebUrl(s.authorizationUrl) && (
                <>
                  {' '}
                  <a href={s.authorizationUrl} target="_blank" rel="noopener noreferrer">
                    Sign in to {s.name}
                  </a>
                </>
              )}
            </li>
          ))}
        </ul>
      )}
      <button type="button" disabled={read.busy} onClick={() => void read.start()}>
        Refresh
      </button>
    </section>
  )
}
