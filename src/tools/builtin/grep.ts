import { statSync } from 'node:fs'
import { z } from 'zod'
import type { CredentialPaths } from '../credentials/credential-paths.js'
import { accessPath } from '../paths.js'
import { compileGlob } from '../search/glob-match.js'
import { GREP_DEADLINE_MS, searchInWorker } from '../search/grep-search.js'
import { readDecisions } from '../search/read-decisions.js'
import { createSearchScope } from '../search/search-scope.js'
import { createTick } from '../search/time-slice.js'
import { defineTool, ToolFailure } from '../tool.js'
import { outputDir, truncateOutput } from '../truncate.js'
import { walk } from '../walk.js'

const LIMIT = 100
const MAX_LINE = 2000
const MAX_FILE_BYTES = 5 * 1024 * 1024
/** More files than this needing the user's approval to read: the search is too broad to ask about. */
const MAX_ASKED_FILES = 100

const parameters = z.object({
  pattern: z
    .string()
    .min(1)
    .describe('A JavaScript regular expression to search file contents for, e.g. "function\\s+\\w+"'),
  path: z.string().min(1).optional().describe('The directory (or file) to search (default: the session directory)'),
  include: z
    .string()
    .min(1)
    .optional()
    .describe('Only search files whose path matches this glob, e.g. "*.ts" or "src/**/*.{ts,tsx}"'),
})

export interface GrepToolDeps {
  readonly dataDir?: string
  /** roots no tool may touch (default: the data directory) */
  readonly forbidden?: readonly string[]
  /** the user's hidden credentials: a path inside one asks `credentials` (default: none) */
  readonly credentials?: CredentialPaths
  /** how long the search may run before it is stopped (default GREP_DEADLINE_MS) */
  readonly deadlineMs?: number
}

/**
 * grep: lines matching a regex, grouped by file, at most 100 matches. Files are
 * searched under the same `read` rules as the read tool: a denied file is left
 * out without a word, and files whose read asks (`.env`) are asked about, all
 * in one request, before any of them is opened — so the pattern cannot probe
 * a file the user has not let the model see.
 */
export function createGrepTool(deps: GrepToolDeps = {}) {
  const forbidden = deps.forbidden ?? (deps.dataDir ? [deps.dataDir] : [])
  return defineTool({
    id: 'grep',
    permission: 'grep',
    description: `Searches file contents with a regular expression. Returns matching lines as "path:line: text", at most ${LIMIT} matches. Use include to filter files by glob. Binary files and dependency directories are skipped.`,
    parameters,
    async execute(args, ctx) {
      try {
        new RegExp(args.pattern)
      } catch (err) {
        throw new ToolFailure(
          'invalid',
          `Invalid regular expression ${JSON.stringify(args.pattern)}: ${(err as Error).message}`,
        )
      }
      // a session's own saved outputs may be searched, as the truncation note tells the model
      const trusted = deps.dataDir ? [outputDir(deps.dataDir, ctx.sessionId)] : []
      const root = await accessPath(ctx, args.path ?? '.', { forbidden, trusted, credentials: deps.credentials })
      const stat = statSync(root.real, { throwIfNoEntry: false })
      if (!stat) throw new ToolFailure('failed', `Path not found: ${root.display}`)
      await ctx.ask({ permission: 'grep', patterns: [args.pattern], metadata: { path: root.real } })
      const include = args.include ? compileGlob(args.include) : undefined
      const tick = createTick()
      const scope = createSearchScope(ctx, root, forbidden, deps.credentials)
      const candidates: { path: string; display: string }[] = []
      if (stat.isDirectory()) {
        for await (const e of walk(root.real, { skip: scope.skip, tick })) {
          if (ctx.abort.aborted) throw new ToolFailure('aborted', 'grep was cancelled')
          if (e.dirent.isFile() && (!include || include(e.relative)))
            candidates.push({ path: e.path, display: scope.display(e) })
        }
      } else candidates.push({ path: root.real, display: root.display })

      const decisions = await readDecisions(
        ctx,
        candidates.map((c) => c.display),
        tick,
      )
      const asked = candidates.filter((_, i) => decisions[i] === 'ask').map((c) => c.display)
      if (asked.length > MAX_ASKED_FILES) {
        throw new ToolFailure(
          'failed',
          `grep would search ${asked.length} files that need the user's permission to read (${asked.slice(0, 5).join(', ')}, …). Narrow the path or include.`,
        )
      }
      if (asked.length > 0) {
        await ctx.ask({
          permission: 'read',
          patterns: asked,
          metadata: { tool: 'grep', pattern: args.pattern, path: root.real },
        })
      }
      const files = candidates.filter((_, i) => decisions[i] !== 'deny').map((c) => c.path)
      const found = await searchInWorker(
        { source: args.pattern, files, limit: LIMIT, maxLineChars: MAX_LINE, maxFileBytes: MAX_FILE_BYTES },
        { deadlineMs: deps.deadlineMs ?? GREP_DEADLINE_MS, signal: ctx.abort },
      )
      const { matches, total } = found
      const more =
        total > LIMIT ? `\n(${total - LIMIT} more matches not shown; narrow the pattern, path or include.)` : ''
      const text = matches.length ? matches.join('\n') + more : 'No matches found'
      // 100 long lines can still exceed 50 KB: cap like every other output
      const capped = deps.dataDir
        ? truncateOutput(text, { dataDir: deps.dataDir, sessionId: ctx.sessionId, name: `grep_${ctx.partId}` })
        : { output: text, truncated: false }
      return {
        output: capped.output,
        title: args.pattern,
        metadata: { matches: total, truncated: total > LIMIT || capped.truncated },
      }
    },
  })
}
