import './styles.css'
import { Connection } from './connection.js'
import { Start } from './start.js'

/**
 * The page's entry (scripts/build-web.mjs bundles from here; docs/WEB.md):
 * small, so that it runs at once and starts the login check, the socket and
 * the session's state (start.ts) while the views — app.tsx and all it
 * imports, a chunk index.html preloads beside this file — are compiled.
 */
const start = new Start(new Connection())
import('./app.js').then(
  ({ mount }) => mount(start),
  (err: unknown) => {
    const root = document.getElementById('app')
    if (root) root.textContent = `Chronicle's page could not load: ${err instanceof Error ? err.message : String(err)}`
  },
)
