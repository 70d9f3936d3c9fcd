import { isAbsolute, join, relative } from 'node:path'
import type { Tool } from '../tool.js'
import type { DiagnosticsReport, DiagnosticsService } from './diagnostics.js'

/**
 * The file-changing tools with the language server's verdict appended (docs/TOOLS.md "Diagnostics"):
 * after `edit`, `write`, `multiedit` or `apply_patch` succeeds, the errors reported for the files it
 * changed end its output and are recorded as `metadata.diagnostics`, so the model fixes what it broke at
 * its next step. A server that is slow, absent or dead never fails the edit: the output says so. A `read`
 * starts the server of the file it read, so that the edit after it seldom finds the server cold.
 */

export const DIAGNOSED_TOOLS: ReadonlySet<string> = new Set(['edit', 'write', 'multiedit', 'apply_patch'])

/** Errors shown per file, and files, at most (the rest counted). */
const MAX_ERRORS = 20

/** The real paths a result says it changed (deleted files have nothing to check). */
export function changedFiles(directory: string, metadata: Record<string, unknown> | undefined): string[] {
  if (!metadata) return []
  if (typeof metadata.filePath === 'string') return [metadata.filePath]
  const files = Array.isArray(metadata.files)
    ? (metadata.files as { path?: unknown; type?: unknown; movePath?: unknown }[])
    : []
  return files.flatMap((f) => {
    if (f.type === 'delete') return []
    const path = typeof f.movePath === 'string' ? f.movePath : f.path
    if (typeof path !== 'string') return []
    return [isAbsolute(path) ? path : join(directory, path)]
  })
}

export function withDiagnostics<T extends Tool>(tool: T, diagnostics: DiagnosticsService): T {
  if (tool.id === 'read') return warming(tool, diagnostics)
  if (!DIAGNOSED_TOOLS.has(tool.id)) return tool
  return Object.assign({}, tool, {
    async execute(args: never, ctx: Parameters<T['execute']>[1]) {
      const result = await tool.execute(args, ctx)
      const files = changedFiles(ctx.directory, result.metadata)
      if (files.length === 0) return result
      const report = await diagnostics.after(ctx.directory, files, ctx.abort)
      if (report.files.length === 0 && report.notReady.length === 0) return result
      return Object.assign({}, result, {
        output: result.output + render(ctx.directory, report),
        metadata: Object.assign({}, result.metadata, { diagnostics: recorded(ctx.directory, report) }),
      })
    },
  })
}

/** `read` starts the file's language server (edits need a read first): its cold start overlaps the model's step. */
function warming<T extends Tool>(tool: T, diagnostics: DiagnosticsService): T {
  return Object.assign({}, tool, {
    async execute(args: never, ctx: Parameters<T['execute']>[1]) {
      const result = await tool.execute(args, ctx)
      const file = result.metadata?.filePath
      if (typeof file === 'string') diagnostics.warm(ctx.directory, file)
      return result
    },
  })
}

function recorded(directory: string, report: DiagnosticsReport) {
  return {
    files: report.files.map((f) => ({ path: relative(directory, f.path), errors: f.errors.slice(0, MAX_ERRORS) })),
    ...(report.notReady.length > 0 && { notReady: report.notReady.map((p) => relative(directory, p)) }),
  }
}

function render(directory: string, report: DiagnosticsReport): string {
  let out = ''
  for (const f of report.files) {
    if (f.errors.length === 0) continue
    const shown = f.errors.slice(0, MAX_ERRORS).map((e) => `ERROR [${e.line}:${e.character}] ${e.message}`)
    if (f.errors.length > MAX_ERRORS) shown.push(`… and ${f.errors.length - MAX_ERRORS} more`)
    out += `\n\nThis file has errors, please fix them:\n<diagnostics file="${relative(directory, f.path)}">\n${shown.join('\n')}\n</diagnostics>`
  }
  if (report.notReady.length > 0)
    out += `\n\n(Diagnostics were not ready in time for ${report.notReady.map((p) => relative(directory, p)).join(', ')}.)`
  return out
}
