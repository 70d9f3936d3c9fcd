import { type Stats, statSync } from 'node:fs'
import { opendir } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import { extname } from 'node:path'
import { z } from 'zod'
import type { CredentialPaths } from '../credentials/credential-paths.js'
import type { FileTimes } from '../file-times.js'
import { scanLines, type ScanResult } from '../line-scan.js'
import { accessPath } from '../paths.js'
import { notRegular, openRegularForRead } from '../regular-file.js'
import { defineTool, ToolFailure } from '../tool.js'
import { MAX_BYTES, MAX_LINES, outputDir } from '../truncate.js'

export const MAX_DIRECTORY_ENTRIES = 2000
export const MAX_LINE_CHARS = 2000

/**
 * How far into a file read scans, to reach `offset` or the end of a long
 * line: 256 MiB (about a second). Files are read in 1 MiB chunks keeping at
 * most ~MAX_LINE_CHARS of any line (line-scan.ts), so memory stays small
 * whatever the file; past this point grep or bash are the better tools.
 */
export const MAX_SCAN_MIB = 256
const MAX_SCAN_BYTES = MAX_SCAN_MIB * 1024 * 1024

const BINARY_EXTENSIONS = new Set([
  '.zip',
  '.tar',
  '.gz',
  '.tgz',
  '.bz2',
  '.xz',
  '.7z',
  '.exe',
  '.dll',
  '.so',
  '.dylib',
  '.o',
  '.a',
  '.class',
  '.jar',
  '.wasm',
  '.pyc',
  '.bin',
  '.dat',
  '.db',
  '.sqlite',
  '.png',
  '.jpg',
  '.jpeg',
  '.gif',
  '.webp',
  '.ico',
  '.pdf',
  '.mp3',
  '.mp4',
  '.mov',
  '.woff',
  '.woff2',
  '.ttf',
  '.otf',
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
  /** the user's hidden credentials: a path inside one asks `credentials` (default: none) */
  readonly credentials?: CredentialPaths
}

/** read: numbered lines of a text file, capped at 2000 lines, 2000 characters a line and 50 KB. */
export function createReadTool(deps: ReadToolDeps) {
  return defineTool({
    id: 'read',
    permission: 'read',
    description: `Reads a text file from the project. Returns numbered lines (\`N| text\`). By default up to ${MAX_LINES} lines from the start; lines longer than ${MAX_LINE_CHARS} characters are cut and output stops at 50 KB — use offset/limit to read further. A directory path returns its entries. Binary files are refused. Read a file before editing it.`,
    parameters,
    async execute(args, ctx) {
      const path = await accessPath(ctx, args.filePath, {
        trusted: [outputDir(deps.dataDir, ctx.sessionId)],
        forbidden: deps.forbidden ?? [deps.dataDir],
        credentials: deps.credentials,
      })
      await ctx.ask({ permission: 'read', patterns: [path.display], metadata: { filePath: path.real } })
      let stat: Stats
      try {
        stat = statSync(path.real)
      } catch {
        throw new ToolFailure('failed', `File not found: ${path.display}`)
      }
      if (stat.isDirectory()) {
        // read without blocking the event loop, and no more than a listing can show
        const entries: string[] = []
        let more = false
        for await (const e of await opendir(path.real)) {
          if (entries.length === MAX_DIRECTORY_ENTRIES) {
            more = true
            break
          }
          entries.push(e.isDirectory() ? `${e.name}/` : e.name)
        }
        entries.sort()
        const note = more
          ? `\n(more than ${MAX_DIRECTORY_ENTRIES} entries; use glob or list with ignore globs to narrow it)`
          : ''
        return {
          output: `<directory path="${path.display}">\n${entries.join('\n')}${note}\n</directory>`,
          title: path.display,
        }
      }
      // refused before it is opened; the descriptor is checked again (it may have been swapped since)
      if (!stat.isFile()) throw notRegular(path.display, stat)
      if (BINARY_EXTENSIONS.has(extname(path.real).toLowerCase())) throw binary(path.display)

      const offset = args.offset ?? 1
      const limit = args.limit ?? MAX_LINES
      const lines: string[] = []
      let bytes = 0
      let cappedAtBytes = false
      const { handle, stat: opened } = await openRegularForRead(path.real, path.display)
      let scan: ScanResult
      try {
        if (await looksBinary(handle)) throw binary(path.display)
        scan = await scanLines(
          handle,
          {
            from: offset,
            to: offset + limit - 1,
            keepChars: MAX_LINE_CHARS,
            maxBytes: MAX_SCAN_BYTES,
            sizeHint: opened.size,
          },
          (l) => {
            const text = l.cut ? `${l.text}... (line truncated to ${MAX_LINE_CHARS} characters)` : l.text
            const line = `${String(l.number).padStart(5, '0')}| ${text}`
            const size = Buffer.byteLength(line) + 1
            if (bytes + size > MAX_BYTES) {
              cappedAtBytes = true
              return false
            }
            lines.push(line)
            bytes += size
            return true
          },
        )
      } finally {
        await handle.close()
      }
      if (lines.length === 0 && scan.lines < offset && offset > 1) {
        if (scan.capped) {
          throw new ToolFailure(
            'failed',
            `offset ${offset} is more than ${MAX_SCAN_MIB} MiB into ${path.display} (${scan.lines} lines), and read scans no further. Use grep to find the lines you need, or bash (e.g. tail -n) for the end of a large file.`,
          )
        }
        throw new ToolFailure('failed', `offset ${offset} is beyond the end of ${path.display} (${scan.lines} lines)`)
      }
      await deps.fileTimes.record(ctx.sessionId, path.real)
      const last = offset + lines.length - 1
      const more = scan.more || cappedAtBytes
      const footer = scan.capped
        ? `\n(Read scans at most ${MAX_SCAN_MIB} MiB of a file and stopped there, in or after line ${last}. Use grep, or bash (e.g. tail -c), for the rest.)`
        : more
          ? `\n(${cappedAtBytes ? 'Output capped at 50 KB' : 'File has more lines'}. Use offset=${last + 1} to continue reading.)`
          : `\n(End of file - ${lines.length === 0 ? 0 : last} lines)`
      return {
        output: `<file path="${path.display}">\n${lines.join('\n')}\n${footer}\n</file>`,
        title: path.display,
        metadata: {
          filePath: path.real, // what the language server is started for (lsp/with-diagnostics.ts)
          lines: lines.length,
          offset,
          truncated: more || scan.capped,
          ...(more && { nextOffset: last + 1 }),
        },
      }
    },
  })
}

function binary(display: string): ToolFailure {
  return new ToolFailure('failed', `Cannot read binary file: ${display}`)
}

/** Binary when the first 4 KB hold a NUL byte or mostly non-text bytes (read from the open descriptor). */
async function looksBinary(handle: FileHandle): Promise<boolean> {
  const buf = Buffer.alloc(4096)
  const { bytesRead: n } = await handle.read(buf, 0, buf.length, 0)
  if (n === 0) return false
  let odd = 0
  for (let i = 0; i < n; i++) {
    const b = buf[i] as number
    if (b === 0) return true
    if (b < 9 || (b > 13 && b < 32)) odd++
  }
  return odd / n > 0.3
}
