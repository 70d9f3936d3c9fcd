import { statSync } from 'node:fs'
import { z } from 'zod'
import type { CredentialPaths } from '../credentials/credential-paths.js'
import { accessPath } from '../paths.js'
import { compileGlob } from '../search/glob-match.js'
import { createSearchScope } from '../search/search-scope.js'
import { defineTool, ToolFailure } from '../tool.js'
import { walk } from '../walk.js'

const LIMIT = 1000

const parameters = z.object({
  path: z.string().min(1).optional().describe('The directory to list (default: the session directory)'),
  ignore: z.array(z.string().min(1)).optional().describe('Globs of paths to leave out, e.g. ["*.log", "tmp/**"]'),
})

/**
 * list: the directory tree, indented, directories first-class, at most 1000
 * entries. Only names are shown, so nothing is asked; entries whose read the
 * rules deny are left out and forbidden roots are never entered.
 */
export function createListTool(deps: { forbidden?: readonly string[]; credentials?: CredentialPaths } = {}) {
  const forbidden = deps.forbidden ?? []
  return defineTool({
    id: 'list',
    permission: 'list',
    description: `Lists a directory tree (indented; directories end with "/"), at most ${LIMIT} entries. Dependency and VCS directories such as node_modules and .git are left out; pass ignore globs to leave out more.`,
    parameters,
    async execute(args, ctx) {
      const root = await accessPath(ctx, args.path ?? '.', { forbidden, credentials: deps.credentials })
      if (!statSync(root.real, { throwIfNoEntry: false })?.isDirectory())
        throw new ToolFailure('failed', `Not a directory: ${root.display}`)
      await ctx.ask({ permission: 'list', patterns: [root.display], metadata: { path: root.real } })
      const ignores = (args.ignore ?? []).map(compileGlob)
      const scope = createSearchScope(ctx, root, forbidden, deps.credentials)
      const lines: string[] = [`${root.real}/`]
      let count = 0
      let truncated = false
      for await (const e of walk(root.real, {
        limit: LIMIT + 1,
        skip: (e) =>
          scope.skip(e) ||
          ignores.some((matches) => matches(e.relative)) ||
          (!e.dirent.isDirectory() && ctx.check({ permission: 'read', patterns: [scope.display(e)] }) === 'deny'),
      })) {
        if (ctx.abort.aborted) throw new ToolFailure('aborted', 'list was cancelled')
        if (++count > LIMIT) {
          truncated = true
          break
        }
        const depth = e.relative.split('/').length
        lines.push(`${'  '.repeat(depth)}${e.dirent.name}${e.dirent.isDirectory() ? '/' : ''}`)
      }
      if (truncated) lines.push(`(more than ${LIMIT} entries; list a subdirectory or add ignore globs)`)
      return { output: lines.join('\n'), title: root.display, metadata: { count: Math.min(count, LIMIT), truncated } }
    },
  })
}
