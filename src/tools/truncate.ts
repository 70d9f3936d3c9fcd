import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/**
 * Caps a tool's output (2000 lines, 50 KB). The full text is saved under
 * `<dataDir>/tool-output/<sessionId>/` and the truncated output says where, so
 * the model can read or grep the rest. Each session may read only its own
 * directory there (the rest of the data directory is closed to every tool).
 */
export const MAX_LINES = 2000
export const MAX_BYTES = 50 * 1024

export interface Truncated {
  readonly output: string
  readonly truncated: boolean
  readonly outputPath?: string
}

/** Where a session's saved outputs go (every session's, without `sessionId`). */
export function outputDir(dataDir: string, sessionId?: string): string {
  const root = join(dataDir, 'tool-output')
  return sessionId === undefined ? root : join(root, safeName(sessionId))
}

function safeName(name: string): string {
  return name.replace(/[^A-Za-z0-9_.-]/g, '_')
}

export function truncateOutput(
  text: string,
  opts: {
    dataDir: string
    sessionId: string
    name: string
    maxLines?: number
    maxBytes?: number
    keep?: 'head' | 'tail'
  },
): Truncated {
  const maxLines = opts.maxLines ?? MAX_LINES
  const maxBytes = opts.maxBytes ?? MAX_BYTES
  const lines = text.split('\n')
  if (lines.length <= maxLines && Buffer.byteLength(text) <= maxBytes) return { output: text, truncated: false }

  const kept: string[] = []
  let bytes = 0
  const ordered = opts.keep === 'tail' ? [...lines].reverse() : lines
  for (const line of ordered) {
    const size = Buffer.byteLength(line) + 1
    if (kept.length >= maxLines || bytes + size > maxBytes) break
    kept.push(line)
    bytes += size
  }
  if (opts.keep === 'tail') kept.reverse()
  const dir = outputDir(opts.dataDir, opts.sessionId)
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const outputPath = join(dir, `${safeName(opts.name)}.txt`)
  writeFileSync(outputPath, text, { mode: 0o600 })
  const omitted = lines.length - kept.length
  const note = `... output truncated: ${omitted} more lines (${Buffer.byteLength(text)} bytes in all). The full output is saved at ${outputPath} — use read with offset/limit or grep on that file to see the rest.`
  const output = opts.keep === 'tail' ? `${note}\n${kept.join('\n')}` : `${kept.join('\n')}\n${note}`
  return { output, truncated: true, outputPath }
}
