import { existsSync } from 'node:fs'
import { z } from 'zod'
import type { CredentialPaths } from '../credentials/credential-paths.js'
import { askAndApply, coded, type FileChange, readForChange, resolveForChange } from '../file-changes.js'
import type { FileTimes } from '../file-times.js'
import { defineTool } from '../tool.js'

const parameters = z.object({
  filePath: z.string().min(1).describe('The file to modify: absolute, or relative to the session directory'),
  edits: z
    .array(
      z.object({
        oldString: z.string().describe('The exact text to replace (an empty first oldString creates a new file)'),
        newString: z.string().describe('The text to put in its place (must differ from oldString)'),
        replaceAll: z.boolean().optional().describe('Replace every occurrence (default false: exactly one)'),
      }),
    )
    .min(1)
    .describe('Edits applied in order, each to the result of the ones before'),
})

/** multiedit: several exact edits to one file, all or nothing (docs/TOOLS.md "apply_patch and multiedit"). */
export function createMultiEditTool(deps: {
  fileTimes: FileTimes
  forbidden?: readonly string[]
  credentials?: CredentialPaths
}) {
  return defineTool({
    id: 'multiedit',
    permission: 'edit',
    writes: true,
    description:
      'Makes several exact-text replacements in one file, in order, each applied to the result of the ones before, all or nothing: if any edit fails, the file is left unchanged and the error names the edit. Same rules as edit: each oldString must occur once unless replaceAll; read the file in this session first. An empty oldString in the first edit creates a new file.',
    parameters,
    async execute(args, ctx) {
      const path = await resolveForChange(ctx, args.filePath, deps, false)
      const creating = args.edits[0]?.oldString === '' && !existsSync(path.real)
      const before = creating ? undefined : await readForChange(ctx, path, deps)
      let text = before?.toString('utf8') ?? ''
      args.edits.forEach((edit, n) => {
        const which = `${path.display} edit ${n + 1}`
        if (edit.oldString === edit.newString) {
          throw coded('invalid', 'EDIT_NO_CHANGE', `${which}: oldString and newString are identical.`)
        }
        if (edit.oldString === '') {
          if (n > 0 || !creating) throw coded('failed', 'EDIT_NOT_FOUND', `${which}: oldString is empty.`)
          text = edit.newString
          return
        }
        const count = text.split(edit.oldString).length - 1
        if (count === 0) {
          throw coded(
            'failed',
            'EDIT_NOT_FOUND',
            `${which}: oldString was not found (after the edits before it); nothing was changed.`,
          )
        }
        if (count > 1 && !edit.replaceAll) {
          throw coded(
            'failed',
            'EDIT_NOT_UNIQUE',
            `${which}: oldString occurs ${count} times; add context or set replaceAll. Nothing was changed.`,
          )
        }
        text = edit.replaceAll
          ? text.split(edit.oldString).join(edit.newString)
          : text.replace(edit.oldString, () => edit.newString)
      })
      const change: FileChange = before
        ? { type: 'update', path, before, after: text }
        : { type: 'add', path, after: text }
      const applied = await askAndApply(ctx, 'multiedit', [change], deps)
      return {
        output: `${before ? 'Edited' : 'Created'} ${path.display}: ${args.edits.length} edit${args.edits.length === 1 ? '' : 's'}.`,
        title: path.display,
        metadata: { filePath: path.real, edits: args.edits.length, ...applied },
      }
    },
  })
}
