import { createTwoFilesPatch } from 'diff'
import type { PermissionAsk, ToolContext } from './tool.js'

/**
 * The unified diff an edit or write approval shows (permission.requested
 * `metadata.diff`), so the person asked sees what they allow. It is recorded
 * with the request: bounded in size, and in the time spent computing it (a
 * huge or pathological change is described, not diffed).
 */

export const APPROVAL_DIFF_BYTES = 32 * 1024
/** inputs larger than this are not diffed: a request must not wait on a megabyte-scale diff */
const MAX_INPUT_BYTES = 1024 * 1024
const MAX_DIFF_MS = 200
const TOO_LARGE = 'the file is too large to diff here'

export function approvalDiff(display: string, before: string, after: string): { diff?: string; diffOmitted?: string } {
  if (before.length + after.length > MAX_INPUT_BYTES) return { diffOmitted: TOO_LARGE }
  const patch = createTwoFilesPatch(display, display, before, after, undefined, undefined, {
    context: 3,
    timeout: MAX_DIFF_MS,
  })
  if (patch === undefined) return { diffOmitted: 'the change is too large to diff here' }
  // drop the "Index:" and "===" lines jsdiff puts before the ---/+++ header
  const body = patch.slice(patch.indexOf('--- '))
  if (body.length <= APPROVAL_DIFF_BYTES) return { diff: body }
  const cut = body.lastIndexOf('\n', APPROVAL_DIFF_BYTES)
  return { diff: `${body.slice(0, cut + 1)}… (diff truncated)\n` }
}

/**
 * Asks to change a file, with the diff in the request when a person will be
 * asked (where the rules allow or deny, nobody is asked and nothing is read
 * or diffed). `before` is read only then; `beforeBytes` above the limit skips it.
 */
export async function askToChange(
  ctx: Pick<ToolContext, 'ask' | 'check'>,
  request: PermissionAsk & { readonly metadata: Record<string, unknown> },
  change: {
    readonly display: string
    readonly before: () => string | Promise<string>
    readonly beforeBytes?: number
    readonly after: string
  },
): Promise<void> {
  if (ctx.check(request) !== 'ask') return ctx.ask(request)
  const diff =
    (change.beforeBytes ?? 0) > MAX_INPUT_BYTES
      ? { diffOmitted: TOO_LARGE }
      : approvalDiff(change.display, await change.before(), change.after)
  return ctx.ask({ ...request, metadata: { ...request.metadata, ...diff } })
}
