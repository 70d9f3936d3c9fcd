import { ToolFailure } from '../tool.js'
import type { Hunk } from './parse-patch.js'

/**
 * Applies an Update File's hunks to a file's text, in order, each found after the one before
 * (Codex's seek_sequence, docs/TOOLS.md "apply_patch"): first exactly, then ignoring trailing
 * whitespace (models often lose it). Pure: the caller writes only when every hunk of every file
 * applied. A hunk that is not found fails with the file and the hunk's number.
 */
export function applyHunks(display: string, content: string, hunks: readonly Hunk[]): string {
  const eol = content.includes('\r\n') ? '\r\n' : '\n'
  const lines = content.split(eol)
  const endsWithNewline = lines.length > 1 && lines.at(-1) === ''
  if (endsWithNewline) lines.pop()
  if (content === '') lines.length = 0
  let from = 0
  const replacements: { at: number; remove: number; insert: readonly string[] }[] = []
  hunks.forEach((hunk, n) => {
    if (hunk.anchor !== undefined) {
      const anchored = seek(lines, [hunk.anchor], from, false)
      if (anchored < 0) throw doesNotApply(display, n, `its @@ line "${hunk.anchor}" was not found`)
      from = anchored + 1
    }
    if (hunk.oldLines.length === 0) {
      // a pure insertion goes after its anchor, or at the end of the file
      const at = hunk.anchor !== undefined ? from : lines.length
      replacements.push({ at, remove: 0, insert: hunk.newLines })
      from = at
      return
    }
    let at = seek(lines, hunk.oldLines, from, hunk.atEnd)
    // a trailing empty context line the model added for the file's final newline
    let old = hunk.oldLines
    let next = hunk.newLines
    if (at < 0 && old.at(-1) === '') {
      old = old.slice(0, -1)
      next = next.at(-1) === '' ? next.slice(0, -1) : next
      at = old.length === 0 ? -1 : seek(lines, old, from, hunk.atEnd)
    }
    if (at < 0) throw doesNotApply(display, n, 'its context and removed lines were not found in the file')
    replacements.push({ at, remove: old.length, insert: next })
    from = at + old.length
  })
  for (const r of replacements.reverse()) lines.splice(r.at, r.remove, ...r.insert)
  if (lines.length === 0) return ''
  return lines.join(eol) + (endsWithNewline || content === '' ? eol : '')
}

function doesNotApply(display: string, index: number, why: string): ToolFailure {
  return new ToolFailure(
    'failed',
    `PATCH_DOES_NOT_APPLY: ${display} hunk ${index + 1}: ${why}. Read the file again and resend the whole patch; nothing was changed.`,
    'PATCH_DOES_NOT_APPLY',
  )
}

/** Where `wanted` occurs in `lines` at or after `from` (at the very end when `atEnd`), or -1. */
function seek(lines: readonly string[], wanted: readonly string[], from: number, atEnd: boolean): number {
  const exact = (a: string, b: string) => a === b
  const loose = (a: string, b: string) => a.trimEnd() === b.trimEnd()
  for (const same of [exact, loose]) {
    const last = lines.length - wanted.length
    for (let at = atEnd ? last : from; at <= last; at++) {
      if (at < from) break
      if (wanted.every((w, k) => same(lines[at + k] as string, w))) return at
    }
  }
  return -1
}
