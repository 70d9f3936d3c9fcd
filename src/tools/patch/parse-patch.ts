import { ToolFailure } from '../tool.js'

/**
 * The `*** Begin Patch` envelope Codex's and OpenCode's models are trained on (docs/TOOLS.md
 * "apply_patch"). Parsing is pure: it names the files and hunks, it never touches the disk.
 *
 *   *** Begin Patch
 *   *** Add File: path          then lines starting with `+`
 *   *** Delete File: path
 *   *** Update File: path
 *   *** Move to: new/path       optional, right after Update File
 *   @@ optional context line    then lines starting with ` `, `-` or `+`
 *   *** End of File             optional: the hunk before it ends the file
 *   *** End Patch
 */

export type PatchOp =
  | { readonly type: 'add'; readonly path: string; readonly content: string }
  | { readonly type: 'delete'; readonly path: string }
  | { readonly type: 'update'; readonly path: string; readonly moveTo?: string; readonly hunks: readonly Hunk[] }

export interface Hunk {
  /** the text after `@@`: a line to find first, the hunk is looked for after it */
  readonly anchor?: string
  /** context and removed lines, in order: what the file must contain */
  readonly oldLines: readonly string[]
  /** context and added lines, in order: what replaces them */
  readonly newLines: readonly string[]
  /** `*** End of File` followed it: the old lines must be the file's last */
  readonly atEnd: boolean
}

const BEGIN = '*** Begin Patch'
const END = '*** End Patch'
const ADD = '*** Add File: '
const DELETE = '*** Delete File: '
const UPDATE = '*** Update File: '
const MOVE = '*** Move to: '
const EOF_MARK = '*** End of File'

export function patchInvalid(message: string): ToolFailure {
  return new ToolFailure('invalid', `PATCH_INVALID: ${message}`, 'PATCH_INVALID')
}

export function parsePatch(text: string): PatchOp[] {
  const lines = text.replace(/\r\n/g, '\n').trim().split('\n')
  if (lines[0]?.trim() !== BEGIN) throw patchInvalid(`the first line must be "${BEGIN}"`)
  if (lines.at(-1)?.trim() !== END) throw patchInvalid(`the last line must be "${END}"`)
  const body = lines.slice(1, -1)
  const ops: PatchOp[] = []
  let i = 0
  while (i < body.length) {
    const line = body[i] as string
    if (line.startsWith(ADD)) {
      const path = fileName(line, ADD)
      const content: string[] = []
      for (i++; i < body.length && !isHeader(body[i] as string); i++) {
        const added = body[i] as string
        if (!added.startsWith('+')) throw patchInvalid(`Add File ${path}: every line must start with "+"`)
        content.push(added.slice(1))
      }
      ops.push({ type: 'add', path, content: content.length === 0 ? '' : `${content.join('\n')}\n` })
    } else if (line.startsWith(DELETE)) {
      ops.push({ type: 'delete', path: fileName(line, DELETE) })
      i++
    } else if (line.startsWith(UPDATE)) {
      const path = fileName(line, UPDATE)
      i++
      let moveTo: string | undefined
      if (body[i]?.startsWith(MOVE)) {
        moveTo = fileName(body[i] as string, MOVE)
        i++
      }
      const start = i
      while (i < body.length && !isHeader(body[i] as string)) i++
      const hunks = parseHunks(path, body.slice(start, i))
      if (hunks.length === 0 && moveTo === undefined) throw patchInvalid(`Update File ${path} has no hunks`)
      ops.push({ type: 'update', path, ...(moveTo !== undefined && { moveTo }), hunks })
    } else if (line.trim() === '') {
      i++
    } else {
      throw patchInvalid(
        `unexpected line ${i + 2}: "${line.slice(0, 80)}" (expected a *** Add, Delete or Update File header)`,
      )
    }
  }
  if (ops.length === 0) throw patchInvalid('the patch changes no file')
  return ops
}

function fileName(line: string, header: string): string {
  const name = line.slice(header.length).trim()
  if (name === '') throw patchInvalid(`"${header.trim()}" needs a path`)
  return name
}

function isHeader(line: string): boolean {
  return line.startsWith(ADD) || line.startsWith(DELETE) || line.startsWith(UPDATE)
}

function parseHunks(path: string, lines: readonly string[]): Hunk[] {
  const hunks: Hunk[] = []
  let current: { anchor?: string; oldLines: string[]; newLines: string[]; atEnd: boolean } | undefined
  const close = () => {
    if (current && (current.oldLines.length > 0 || current.newLines.length > 0)) hunks.push(current)
    current = undefined
  }
  for (const line of lines) {
    if (line.startsWith('@@')) {
      close()
      const anchor = line.slice(2).trim()
      current = { ...(anchor !== '' && { anchor }), oldLines: [], newLines: [], atEnd: false }
      continue
    }
    if (line === EOF_MARK) {
      if (!current) throw patchInvalid(`Update File ${path}: "${EOF_MARK}" before any hunk`)
      current.atEnd = true
      close()
      continue
    }
    current ??= { oldLines: [], newLines: [], atEnd: false }
    const mark = line[0]
    const rest = line.slice(1)
    // an empty line inside a hunk is an empty context line (models drop the leading space)
    if (line === '' || mark === ' ') {
      current.oldLines.push(rest)
      current.newLines.push(rest)
    } else if (mark === '-') current.oldLines.push(rest)
    else if (mark === '+') current.newLines.push(rest)
    else
      throw patchInvalid(
        `Update File ${path} hunk ${hunks.length + 1}: line "${line.slice(0, 80)}" must start with " ", "-" or "+"`,
      )
  }
  close()
  return hunks
}
