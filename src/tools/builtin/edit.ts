import { existsSync, mkdirSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import { z } from 'zod'
import type { CredentialPaths } from '../credentials/credential-paths.js'
import type { FileTimes } from '../file-times.js'
import { askToChange } from '../approval-diff.js'
import { accessPath } from '../paths.js'
import { notRegular, readRegularText, writeRegular } from '../regular-file.js'
import { defineTool, ToolFailure } from '../tool.js'

const parameters = z.object({
  filePath: z.string().min(1).describe('The file to modify: absolute, or relative to the session directory'),
  oldString: z
    .string()
    .describe(
      'The exact text to replace, including whitespace and indentation. An empty string creates a new file with newString',
    ),
  newString: z.string().describe('The text to put in its place (must differ from oldString)'),
  replaceAll: z
    .boolean()
    .optional()
    .describe('Replace every occurrence of oldString (default false: it must occur exactly once)'),
})

/** edit: exact string replacement in a file the session has read and that has not changed since. */
export function createEditTool(deps: {
  fileTimes: FileTimes
  forbidden?: readonly string[]
  credentials?: CredentialPaths
}) {
  return defineTool({
    id: 'edit',
    permission: 'edit',
    writes: true,
    description:
      'Replaces exact text in a file. oldString must match the file exactly and occur once (add surrounding lines to make it unique), unless replaceAll is true. You must read the file in this session first; if it changed since, read it again.',
    parameters,
    async execute(args, ctx) {
      if (args.oldString === args.newString) {
        throw new ToolFailure('invalid', 'oldString and newString are identical; there is nothing to change.')
      }
      const path = await accessPath(ctx, args.filePath, {
        forbidden: deps.forbidden ?? [],
        credentials: deps.credentials,
      })
      if (args.oldString === '') {
        if (existsSync(path.real)) {
          throw new ToolFailure('failed', `${path.display} already exists; give the text to replace in oldString.`)
        }
        await askToChange(
          ctx,
          { permission: 'edit', patterns: [path.display], metadata: { filePath: path.real, tool: 'edit' } },
          { display: path.display, before: () => '', after: args.newString },
        )
        mkdirSync(dirname(path.real), { recursive: true })
        await writeRegular(path.real, path.display, args.newString)
        await deps.fileTimes.record(ctx.sessionId, path.real)
        return {
          output: `Created ${path.display}.`,
          title: path.display,
          metadata: { filePath: path.real, replacements: 0 },
        }
      }
      const existing = statSync(path.real, { throwIfNoEntry: false })
      if (!existing) throw new ToolFailure('failed', `File not found: ${path.display}`)
      // a FIFO or device is refused without opening it (reading a FIFO blocks until a writer comes)
      if (!existing.isFile()) throw notRegular(path.display, existing)
      // edit holds the file and its new text in memory: a huge file is bash's (sed, patch) to change
      if (existing.size > MAX_EDIT_BYTES) {
        throw new ToolFailure(
          'failed',
          `${path.display} is ${existing.size} bytes; edit changes files up to ${MAX_EDIT_BYTES / 1024 / 1024} MiB. Use bash for larger files.`,
        )
      }
      await deps.fileTimes.assertUnchanged(ctx.sessionId, path.real, path.display)
      const content = await readRegularText(path.real, path.display)
      const count = occurrences(content, args.oldString)
      if (count === 0) {
        throw new ToolFailure(
          'failed',
          `oldString was not found in ${path.display}. It must match exactly, including whitespace; read the file again if unsure.`,
        )
      }
      if (count > 1 && !args.replaceAll) {
        throw new ToolFailure(
          'failed',
          `oldString occurs ${count} times in ${path.display}. Add surrounding lines to make it unique, or set replaceAll to true.`,
        )
      }
      const next = args.replaceAll
        ? content.split(args.oldString).join(args.newString)
        : content.replace(args.oldString, () => args.newString)
      await askToChange(
        ctx,
        {
          permission: 'edit',
          patterns: [path.display],
          metadata: { filePath: path.real, tool: 'edit', replacements: count },
        },
        { display: path.display, before: () => content, after: next },
      )
      await writeRegular(path.real, path.display, next)
      await deps.fileTimes.record(ctx.sessionId, path.real)
      return {
        output: `Edited ${path.display}: ${count} replacement${count === 1 ? '' : 's'}.`,
        title: path.display,
        metadata: { filePath: path.real, replacements: count },
      }
    },
  })
}

export const MAX_EDIT_BYTES = 16 * 1024 * 1024

function occurrences(text: string, needle: string): number {
  let count = 0
  for (let i = text.indexOf(needle); i >= 0; i = text.indexOf(needle, i + needle.length)) count++
  return count
}
