import { createReadStream, openSync, readSync, closeSync, readdirSync, statSync } from 'node:fs'
import { extname } from 'node:path'
import { createInterface } from 'node:readline'
import { z } from 'zod'
import type { FileTimes } from '../file-times.js'
import { accessPath } from '../paths.js'
import { defineTool, ToolFailure } from '../tool.js'
import { MAX_BYTES, MAX_LINES, outputDir } from '../truncate.js'

export const MAX_LINE_CHARS = 2000

const BINARY_EXTENSIONS = new Set([
  '.zip', '.tar', '.gz', '.tgz', '.bz2', '.xz', '.7z', '.exe', '.dll', '.so', '.dylib', '.o', '.a', '.class', '.jar',
  '.wasm', '.pyc', '.bin', '.dat', '.db', '.sqlite', '.png', '.jpg', '.jpeg', '.gif', '.webp', '.ico', '.pdf', '.mp3',
  '.mp4', '.mov', '.woff', '.woff2', '.ttf', '.otf',
])

const parameters = z.object({
  filePath: z.string().min(1).describe('The file to read: absolute, or relative to the session directory'),
  offset: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe('The 1-based line number to start reading from (default 1). Use it to page through large files'),
  limit: z
    .number()
    .int()
    .min(1)
    .max(MAX_LINES)
    .optional()
    .describe(`The number of lines to read (default and maximum ${MAX_LINES})`),
})

export interface ReadToolDeps {
  readonly dataDir: string
  readonly fileTimes: FileTimes
  /** roots no tool may touch (default: the data directory) */
  readonly forbidden?: readonly string[]
}

/** read: numbered lines of a text file, capped at 2000 lines, 2000 characters a line and 50 KB. */
export function createReadTool(deps: ReadToolDeps) {
  return defineTool({
    id: 'read',
    permission: 'read',
    description: `Reads a text file from the project. Returns numbered lines (\`N| text\`). By default up to ${MAX_LINES} lines from the start; lines longer than ${MAX_LINE_CHARS} characters are cut and output stops at 50 KB — use offset/limit to read further. A directory path returns its entries. Binary files are refused. Read a file before editing it.`,
    parameters,
    async execute(args, ctx) {
      const path = await accessPath(ctx, args.filePath, { trusted: [outputDir(deps.dataDir, ctx.sessionId)], forbidden: deps.forbidden ?? [deps.dataDir] })
      await ctx.ask({ permission: 'read', patterns: [path.display], metadata: { filePath: path.real } })
      let stat
      try {
        stat = statSync(path.real)
      } catch {
        throw new ToolFailure('failed', `File not found: ${path.display}`)
      }
      if (stat.isDirectory()) {
        const entries = readdirSync(path.real, { withFileTypes: true })
          .map((e) => (e.isDirectory() ? `${e.name}/` : e.name))
          .sort()
        return { output: `<directory path="${path.display}">\n${entries.join('\n')}\n</directory>`, title: path.display }
      }
      if (isBinary(path.real)) throw new ToolFailure('failed', `Cannot read binary file: ${path.display}`)

      const offset = args.offset ?? 1
      const limit = args.limit ?? MAX_LINES
      const lines: string[] = []
      let bytes = 0
      let lineNo = 0
      let more = false
      let cappedAtBytes = false
      const reader = createInterface({ input: createReadStream(path.real, { encoding: 'utf8' }), crlfDelay: Infinity })
      for await (const raw of reader) {
        lineNo++
        if (lineNo < offset) continue
        if (lines.length >= limit) {
          more = true
          break
        }
        const text = raw.length > MAX_LINE_CHARS ? `${raw.slice(0, MAX_LINE_CHARS)}... (line truncated to ${MAX_LINE_CHARS} characters)` : raw
        const line = `${String(lineNo).padStart(5, '0')}| ${text}`
        const size = Buffer.byteLength(line) + 1
        if (bytes + size > MAX_BYTES) {
          more = true
          cappedAtBytes = true
          break
        }
        lines.push(line)
        bytes += size
      }
      reader.close()
      if (lineNo < offset && offset > 1) {
        throw new ToolFailure('failed', `offset ${offset} is beyond the end of ${path.display} (${lineNo} lines)`)
      }
      deps.fileTimes.record(ctx.sessionId, path.real)
      const last = offset + lines.length - 1
      const footer = more
        ? `\n(${cappedAtBytes ? 'Output capped at 50 KB' : 'File has more lines'}. Use offset=${last + 1} to continue reading.)`
        : `\n(End of file - ${lines.length === 0 ? 0 : last} lines)`
      return {
        output: `<file path="${path.display}">\n${lines.join('\n')}\n${footer}\n</file>`,
        title: path.display,
        metadata: { lines: lines.length, offset, truncated: more, ...(more && { nextOffset: last + 1 }) },
      }
    },
  })
}

/** Binary when the extension says so, or the first 4 KB hold a NUL byte or mostly non-text bytes. */
function isBinary(path: string): boolean {
  if (BINARY_EXTENSIONS.has(extname(path).toLowerCase())) return true
  const fd = openSync(path, 'r')
  try {
    const buf = Buffer.alloc(4096)
    const n = readSync(fd, buf, 0, buf.length, 0)
    if (n === 0) return false
    let odd = 0
    for (let i = 0; i < n; i++) {
      const b = buf[i] as number
      if (b === 0) return true
      if (b < 9 || (b > 13 && b < 32)) odd++
    }
    return odd / n > 0.3
  } finally {
    closeSync(fd)
  }
}
