import { z } from 'zod'
import type { CredentialPaths } from '../credentials/credential-paths.js'
import {
  assertAbsent,
  assertDistinct,
  askAndApply,
  type FileChange,
  readForChange,
  resolveForChange,
} from '../file-changes.js'
import type { FileTimes } from '../file-times.js'
import { applyHunks } from '../patch/apply-hunks.js'
import { parsePatch } from '../patch/parse-patch.js'
import { defineTool } from '../tool.js'

const parameters = z.object({
  patchText: z.string().min(1).describe('The whole patch, from "*** Begin Patch" to "*** End Patch"'),
})

const DESCRIPTION = `Applies a patch that adds, deletes, updates and moves files, all or nothing. Format:
*** Begin Patch
*** Add File: path/new.ts
+every line of the new file, each starting with +
*** Delete File: path/old.ts
*** Update File: path/file.ts
*** Move to: path/renamed.ts   (optional)
@@ a line to find first (optional, e.g. a function's signature)
 context line (starts with a space)
-line removed
+line added
*** End of File   (optional: the hunk ends the file)
*** End Patch
Paths are relative to the session directory. Give about 3 lines of context around each change. Files you update, move or delete must have been read in this session and be unchanged since. If any hunk does not apply, nothing is changed and the error names the file and hunk.`

/** apply_patch: Codex's `*** Begin Patch` format (docs/TOOLS.md "apply_patch and multiedit"). */
export function createApplyPatchTool(deps: {
  fileTimes: FileTimes
  forbidden?: readonly string[]
  credentials?: CredentialPaths
}) {
  return defineTool({
    id: 'apply_patch',
    permission: 'edit',
    writes: true,
    description: DESCRIPTION,
    parameters,
    async execute(args, ctx) {
      const ops = parsePatch(args.patchText)
      const changes: FileChange[] = []
      // everything is checked and computed before the one permission request and the first write
      for (const op of ops) {
        const path = await resolveForChange(ctx, op.path, deps, true)
        if (op.type === 'add') {
          assertAbsent(path)
          changes.push({ type: 'add', path, after: op.content })
          continue
        }
        const before = await readForChange(ctx, path, deps)
        if (op.type === 'delete') {
          changes.push({ type: 'delete', path, before })
          continue
        }
        const moveTo = op.moveTo === undefined ? undefined : await resolveForChange(ctx, op.moveTo, deps, true)
        if (moveTo) assertAbsent(moveTo)
        const after = applyHunks(path.display, before.toString('utf8'), op.hunks)
        changes.push({ type: 'update', path, ...(moveTo && { moveTo }), before, after })
      }
      assertDistinct(changes)
      const applied = await askAndApply(ctx, 'apply_patch', changes, deps)
      const lines = applied.files.map((f) =>
        f.type === 'move'
          ? `M ${f.path} → ${f.movePath}`
          : `${f.type === 'add' ? 'A' : f.type === 'delete' ? 'D' : 'M'} ${f.path}`,
      )
      return {
        output: `Applied the patch:\n${lines.join('\n')}`,
        title: `${applied.files.length} file${applied.files.length === 1 ? '' : 's'}`,
        metadata: { ...applied },
      }
    },
  })
}
