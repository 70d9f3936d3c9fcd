import { statSync } from 'node:fs'
import { z } from 'zod'
import type { CredentialPaths } from '../credentials/credential-paths.js'
import { accessPath } from '../paths.js'
import { compileGlob } from '../search/glob-match.js'
import { readDecisions } from '../search/read-decisions.js'
import { createSearchScope } from '../search/search-scope.js'
import { createTick } from '../search/time-slice.js'
import { defineTool, ToolFailure } from '../tool.js'
import { DEFAULT_IGNORES, walk } from '../walk.js'

const LIMIT = 100

const parameters = z.object({
  pattern: z.string().min(1).describe('The glob to match file paths against, e.g. "**/*.ts" or "src/**/index.{js,ts}"'),
  path: z.string().min(1).optional().describe('The directory to search in (default: the session directory)'),
})

/**
 * glob: files whose path matches a glob, newest first, at most 100. Only names
 * are shown, so nothing is asked; files whose read the rules deny are left out
 * and forbidden roots are never entered (search/search-scope.ts).
 */
export function createGlobTool(deps: { forbidden?: readonly string[]; credentials?: CredentialPaths } = {}) {
  const forbidden = deps.forbidden ?? []
  return defineTool({
    id: 'glob',
    permission: 'glob',
    description: `Finds files by glob pattern (e.g. "**/*.ts"). Returns absolute paths, most recently modified first, at most ${LIMIT}. Skips ${DEFAULT_IGNORES.slice(0, 3).join(', ')} and similar directories.`,
    parameters,
    async execute(args, ctx) {
      const root = await accessPath(ctx, args.path ?? '.', { forbidden, credentials: deps.credentials })
      if (!statSync(root.real, { throwIfNoEntry: false })?.isDirectory())
        throw new ToolFailure('failed', `Not a directory: ${root.display}`)
      await ctx.ask({ permission: 'glob', patterns: [args.pattern], metadata: { path: root.real } })
      const matches = compileGlob(args.pattern)
      const tick = createTick()
      const scope = createSearchScope(ctx, root, forbidden, deps.credentials)
      const matched: { path: string; display: string }[] = []
      for await (const e of walk(root.real, { skip: scope.skip, tick })) {
        if (ctx.abort.aborted) throw new ToolFailure('aborted', 'glob was cancelled')
        if (e.dirent.isFile() && matches(e.relative)) matched.push({ path: e.path, display: scope.display(e) })
      }
      const decisions = await readDecisions(
        ctx,
        matched.map((m) => m.display),
        tick,
      )
      const found: { path: string; mtime: number }[] = []
      for (const [i, m] of matched.entries()) {
        if (decisions[i] === 'deny') continue
        found.push({ path: m.path, mtime: statSync(m.path, { throwIfNoEntry: false })?.mtimeMs ?? 0 })
        await tick()
      }
      found.sort((a, b) => b.mtime - a.mtime)
      const shown = found.slice(0, LIMIT)
      const more =
        found.length > LIMIT
          ? `\n(${found.length - LIMIT} more results not shown; use a narrower pattern or path.)`
          : ''
      return {
        output: shown.length ? shown.map((f) => f.path).join('\n') + more : 'No files found',
        title: args.pattern,
        metadata: { count: found.length, truncated: found.length > LIMIT },
      }
    },
  })
}
