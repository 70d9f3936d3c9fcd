import { mkdirSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import { z } from 'zod'
import type { CredentialPaths } from '../credentials/credential-paths.js'
import type { FileTimes } from '../file-times.js'
import { askToChange } from '../approval-diff.js'
import { accessPath } from '../paths.js'
import { notRegular, readRegularText, writeRegular } from '../regular-file.js'
import { defineTool, ToolFailure } from '../tool.js'

const parameters = z.object({
  filePath: z.string().min(1).describe('The file to write: absolute, or relative to the session directory'),
  content: z.string().describe('The complete new content of the file'),
})

/** write: creates or overwrites a file. Overwriting needs a read of the current content first. */
export function createWriteTool(deps: {
  fileTimes: FileTimes
  forbidden?: readonly string[]
  credentials?: CredentialPaths
}) {
  return defineTool({
    id: 'write',
    permission: 'edit',
    writes: true,
    description:
      'Writes a file with the given content, creating parent directories. To overwrite an existing file you must have read it in this session (and it must not have changed since). Prefer edit for changes to existing files.',
    parameters,
    async execute(args, ctx) {
      const path = await accessPath(ctx, args.filePath, {
        forbidden: deps.forbidden ?? [],
        credentials: deps.credentials,
      })
      const existing = statSync(path.real, { throwIfNoEntry: false })
      const exists = existing !== undefined
      if (existing?.isDirectory()) throw new ToolFailure('failed', `${path.display} is a directory`)
      // a FIFO or device is refused without opening it (writing to a FIFO blocks until a reader comes)
      if (existing && !existing.isFile()) throw notRegular(path.display, existing)
      if (exists) await deps.fileTimes.assertUnchanged(ctx.sessionId, path.real, path.display)
      const request = { permission: 'edit', patterns: [path.display], metadata: { filePath: path.real, tool: 'write' } }
      await askToChange(ctx, request, {
        display: path.display,
        before: () => (exists ? readRegularText(path.real, path.display) : ''),
        beforeBytes: existing?.size ?? 0,
        after: args.content,
      })
      mkdirSync(dirname(path.real), { recursive: true })
      await writeRegular(path.real, path.display, args.content)
      await deps.fileTimes.record(ctx.sessionId, path.real)
      return {
        output: `${exists ? 'Overwrote' : 'Created'} ${path.display} (${Buffer.byteLength(args.content)} bytes).`,
        title: path.display,
        metadata: { filePath: path.real, created: !exists },
      }
    },
  })
}
