import { prepared } from '../rows/prepared.js'
import type { ReadModelSource } from './read-model.js'

/**
 * The distinct directories of sessions that can run — neither archived nor imported (an imported
 * session is inert; its directory was another machine's) — sorted. For MCP roots: src/runtime/mcp/roots.ts.
 */
export function liveSessionDirectories(store: ReadModelSource): string[] {
  return prepared(
    store.reader(),
    "SELECT DISTINCT data ->> '$.directory' AS directory FROM sessions WHERE archived = 0 AND data ->> '$.imported' IS NULL ORDER BY directory",
    true,
  ).all() as string[]
}
