import { useEffect, useState } from 'preact/hooks'
import type { ChronicleSocket } from '../../client/index.js'

/**
 * MCP servers waiting for a browser sign-in (docs/TOOLS.md "Signing in to
 * remote MCP servers"), each with its authorization URL: the browser comes
 * back to Chronicle's own callback, and the server reconnects. Only an admin
 * is given the URLs (`mcp.servers`); for anyone else this shows nothing.
 * Read again when the page gets the focus back (after the sign-in tab).
 */
export function McpSignIns({ socket }: { socket: ChronicleSocket }) {
  const [waiting, setWaiting] = useState<{ name: string; url: string }[]>([])
  useEffect(() => {
    let alive = true
    const read = async () => {
      try {
        const { servers } = await socket.call('mcp.servers', {})
        const open = servers.flatMap((s) =>
          s.authorizationUrl && isWebUrl(s.authorizationUrl) ? [{ name: s.name, url: s.authorizationUrl }] : [],
        )
        if (alive) setWaiting(open)
      } catch {
        // a token limited to some sessions may not read the servers' state: nothing to show
      }
    }
    void read()
    const onFocus = () => void read()
    window.addEventListener('focus', onFocus)
    return () => {
      alive = false
      window.removeEventListener('focus', onFocus)
    }
  }, [socket])
  if (waiting.length === 0) return null
  return (
    <section class="permissions" aria-labelledby="mcp-sign-ins-title">
      <h2 id="mcp-sign-ins-title">Tool servers waiting for a sign-in</h2>
      <ul>
        {waiting.map((w) => (
          <li key={w.name}>
            <a href={w.url} target="_blank" rel="noopener noreferrer">
              Sign in to {w.name}
            </a>
          </li>
        ))}
      </ul>
    </section>
  )
}

/** The URL came from the server's authorization metadata (hostile input): only a web address becomes a link. */
export function isWebUrl(url: string): boolean {
  try {
    const { protocol } = new URL(url)
    return protocol === 'https:' || protocol === 'http:'
  } catch {
    return false
  }
}
