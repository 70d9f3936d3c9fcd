import { readFileSync, statSync } from 'node:fs'
import { z } from 'zod'
import { accessPath } from '../paths.js'
import { defineTool, ToolFailure } from '../tool.js'
import { truncateOutput } from '../truncate.js'
import { DEFAULT_IGNORES, globToRegExp, walk } from '../walk.js'

const LIMIT = 100
const MAX_LINE = 2000
const MAX_FILE_BYTES = 5 * 1024 * 1024

const parameters = z.object({
  pattern: z.string().min(1).describe('A JavaScript regular expression to search file contents for, e.g. "function\\s+\\w+"'),
  path: z.string().min(1).optional().describe('The directory (or file) to search (default: the session directory)'),
  include: z.string().min(1).optional().describe('Only search files whose path matches this glob, e.g. "*.ts" or "src/**/*.{ts,tsx}"'),
})

/** grep: lines matching a regex, grouped by file, at most 100 matches. */
export function createGrepTool(deps: { dataDir?: string; forbidden?: readonly string[] } = {}) {
  return defineTool({
    id: 'grep',
    permission: 'grep',
    description: `Searches file contents with a regular expression. Returns matching lines as "path:line: text", at most ${LIMIT} matches. Use include to filter files by glob. Binary files and dependency directories are skipped.`,
    parameters,
    async execute(args, ctx) {
      let re: RegExp
      try {
        re = new RegExp(args.pattern)
      } catch (err) {
        throw new ToolFailure('invalid', `Invalid regular expression ${JSON.stringify(args.pattern)}: ${(err as Error).message}`)
      }
      const root = await accessPath(ctx, args.path ?? '.', { forbidden: deps.forbidden ?? (deps.dataDir ? [deps.dataDir] : []) })
      const stat = statSync(root.real, { throwIfNoEntry: false })
      if (!stat) throw new ToolFailure('failed', `Path not found: ${root.display}`)
      await ctx.ask({ permission: 'grep', patterns: [args.pattern], metadata: { path: root.real } })
      const include = args.include ? globToRegExp(args.include) : undefined
      const files = stat.isDirectory()
        ? [...walk(root.real, { ignore: (_rel, name, isDir) => isDir && DEFAULT_IGNORES.includes(name) })]
            .filter((e) => e.dirent.isFile() && (!include || include.test(e.relative)))
            .map((e) => e.path)
        : [root.real]
      const matches: string[] = []
      let total = 0
      for (const file of files) {
        if (ctx.abort.aborted) throw new ToolFailure('aborted', 'grep was cancelled')
        const size = statSync(file, { throwIfNoEntry: false })?.size ?? 0
        if (size > MAX_FILE_BYTES) continue
        const buf = readFileSync(file)
        if (buf.subarray(0, 4096).includes(0)) continue // binary
        const lines = buf.toString('utf8').split('\n')
        for (let i = 0; i < lines.length; i++) {
          const line = lines[i] as string
          if (!re.test(line)) continue
          total++
          if (matches.length < LIMIT) matches.push(`${file}:${i + 1}: ${line.length > MAX_LINE ? `${line.slice(0, MAX_LINE)}...` : line}`)
        }
      }
      const more = total > LIMIT ? `\n(${total - LIMIT} more matches not shown; narrow the pattern, path or include.)` : ''
      const text = matches.length ? matches.join('\n') + more : 'No matches found'
      // 100 long lines can still exceed 50 KB: cap like every other output
      const capped = deps.dataDir ? truncateOutput(text, { dataDir: deps.dataDir, sessionId: ctx.sessionId, name: `grep_${ctx.partId}` }) : { output: text, truncated: false }
      return {
        output: capped.output,
        title: args.pattern,
        metadata: { matches: total, truncated: total > LIMIT || capped.truncated },
      }
    },
  })
}
