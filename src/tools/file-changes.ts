import { existsSync, mkdirSync, rmdirSync, statSync, unlinkSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { APPROVAL_DIFF_BYTES, approvalDiff } from './approval-diff.js'
import type { CredentialPaths } from './credentials/credential-paths.js'
import type { FileTimes } from './file-times.js'
import { accessPath, type ResolvedPath } from './paths.js'
import { kindOf, writeRegular } from './regular-file.js'
import { type ToolContext, ToolFailure } from './tool.js'

/**
 * All-or-nothing changes to several files, for apply_patch and multiedit (docs/TOOLS.md
 * "apply_patch and multiedit"). Every path is resolved and checked, and every file's new text
 * computed, before anything is asked or written; one `edit` request names every path touched
 * (a move's destination too); the files read are checked again after the answer; a write that
 * still fails undoes the ones before it. Each failure carries a stable code in its message.
 */

export interface FileChangeDeps {
  readonly fileTimes: FileTimes
  readonly forbidden?: readonly string[]
  readonly credentials?: CredentialPaths
}

/** One file's change, its new text computed. `before` is what was read (absent for an added file). */
export type FileChange =
  | { readonly type: 'add'; readonly path: ResolvedPath; readonly after: string }
  | { readonly type: 'delete'; readonly path: ResolvedPath; readonly before: Buffer }
  | {
      readonly type: 'update'
      readonly path: ResolvedPath
      readonly moveTo?: ResolvedPath
      readonly before: Buffer
      readonly after: string
    }

/** Same limit as edit: these tools hold each file and its new text in memory. */
export const MAX_CHANGE_BYTES = 16 * 1024 * 1024

export function coded(kind: ToolFailure['kind'], code: string, message: string): ToolFailure {
  return new ToolFailure(kind, `${code}: ${message}`, code)
}

/** A shared check's failure (file-times, paths, the gate) with its code put in front of the message. */
function withCode(err: unknown): unknown {
  if (!(err instanceof ToolFailure) || err.message.startsWith(`${err.code}:`)) return err
  const code = err.code ?? (err.kind === 'denied' ? 'PERMISSION_DENIED' : undefined)
  return code === undefined ? err : coded(err.kind, code, err.message)
}

/**
 * Resolves a path to change: confined (`confine`: a path outside the session directory is
 * refused, as a patch's paths are relative to it) or, like edit, asking `external_directory`;
 * never a forbidden root; a hidden credential asks `credentials` (docs/SECURITY.md).
 */
export async function resolveForChange(
  ctx: ToolContext,
  filePath: string,
  deps: FileChangeDeps,
  confine: boolean,
): Promise<ResolvedPath> {
  try {
    const path = await accessPath(
      confine ? { ...ctx, ask: (r) => (r.permission === 'external_directory' ? outside(filePath) : ctx.ask(r)) } : ctx,
      filePath,
      { forbidden: deps.forbidden ?? [], credentials: deps.credentials },
    )
    return path
  } catch (err) {
    throw withCode(err)
  }
}

function outside(filePath: string): never {
  throw coded(
    'denied',
    'PATH_OUTSIDE_WORKSPACE',
    `${filePath} resolves outside the session directory (through "..", an absolute path or a symlink); a patch may only change files inside it.`,
  )
}

/** An existing file's bytes, after the read-before-write check (FILE_NOT_READ, FILE_CHANGED_SINCE_READ). */
export async function readForChange(ctx: ToolContext, path: ResolvedPath, deps: FileChangeDeps): Promise<Buffer> {
  const stat = statSync(path.real, { throwIfNoEntry: false })
  if (!stat) throw coded('failed', 'FILE_NOT_FOUND', `${path.display} does not exist.`)
  if (!stat.isFile()) throw coded('failed', 'NOT_A_REGULAR_FILE', `${path.display} is ${kindOf(stat)}.`)
  if (stat.size > MAX_CHANGE_BYTES) {
    throw coded('failed', 'FILE_TOO_LARGE', `${path.display} is ${stat.size} bytes; use bash for files over 16 MiB.`)
  }
  try {
    await deps.fileTimes.assertUnchanged(ctx.sessionId, path.real, path.display)
  } catch (err) {
    throw withCode(err)
  }
  return readFile(path.real)
}

export function assertAbsent(path: ResolvedPath): void {
  if (existsSync(path.real)) throw coded('failed', 'FILE_EXISTS', `${path.display} already exists.`)
}

/** Refuses a change set that touches one file twice (the order of two changes to it would matter). */
export function assertDistinct(changes: readonly FileChange[]): void {
  const seen = new Set<string>()
  for (const c of changes) {
    for (const p of c.type === 'update' && c.moveTo ? [c.path, c.moveTo] : [c.path]) {
      if (seen.has(p.real)) throw coded('invalid', 'PATCH_INVALID', `${p.display} is touched more than once.`)
      seen.add(p.real)
    }
  }
}

export interface AppliedChanges {
  readonly files: { path: string; type: 'add' | 'delete' | 'update' | 'move'; movePath?: string }[]
  readonly diff?: string
  readonly diffOmitted?: string
}

/** Asks `edit` for every path (with the diff), checks the read files again, then writes all or none. */
export async function askAndApply(
  ctx: ToolContext,
  tool: string,
  changes: readonly FileChange[],
  deps: FileChangeDeps,
): Promise<AppliedChanges> {
  const summary = describe(changes)
  const patterns = [...new Set(summary.files.flatMap((f) => (f.movePath ? [f.path, f.movePath] : [f.path])))]
  try {
    await ctx.ask({
      permission: 'edit',
      patterns,
      metadata: { tool, files: summary.files, ...diffOf(summary) },
    })
    // the person may have taken a while: a file changed meanwhile is refused, as before the ask
    for (const c of changes) {
      if (c.type !== 'add') await deps.fileTimes.assertUnchanged(ctx.sessionId, c.path.real, c.path.display)
    }
  } catch (err) {
    throw withCode(err)
  }
  await writeAll(changes)
  for (const c of changes) {
    if (c.type === 'add') await deps.fileTimes.record(ctx.sessionId, c.path.real)
    if (c.type === 'update') await deps.fileTimes.record(ctx.sessionId, (c.moveTo ?? c.path).real)
  }
  return { files: summary.files, ...diffOf(summary) }
}

function describe(changes: readonly FileChange[]) {
  const files: AppliedChanges['files'] = []
  const diffs: { diff?: string; diffOmitted?: string }[] = []
  for (const c of changes) {
    const before = c.type === 'add' ? '' : c.before.toString('utf8')
    const after = c.type === 'delete' ? '' : c.after
    if (c.type === 'update' && c.moveTo) {
      files.push({ path: c.path.display, type: 'move', movePath: c.moveTo.display })
      diffs.push(approvalDiff(`${c.path.display} → ${c.moveTo.display}`, before, after))
    } else {
      files.push({ path: c.path.display, type: c.type })
      diffs.push(approvalDiff(c.path.display, before, after))
    }
  }
  return { files, diffs }
}

function diffOf(summary: ReturnType<typeof describe>): { diff?: string; diffOmitted?: string } {
  const omitted = summary.diffs.find((d) => d.diffOmitted !== undefined)
  if (omitted) return { diffOmitted: omitted.diffOmitted as string }
  const diff = summary.diffs.map((d) => d.diff ?? '').join('')
  if (diff.length <= APPROVAL_DIFF_BYTES) return { diff }
  return { diff: `${diff.slice(0, diff.lastIndexOf('\n', APPROVAL_DIFF_BYTES) + 1)}… (diff truncated)\n` }
}

/** Writes every change in order; on a failure, undoes the ones done (newest first) and fails. */
async function writeAll(changes: readonly FileChange[]): Promise<void> {
  const undo: (() => Promise<void> | void)[] = []
  try {
    for (const c of changes) {
      if (c.type === 'add') {
        const made = mkdirSync(dirname(c.path.real), { recursive: true })
        undo.push(() => removeMadeDirs(dirname(c.path.real), made))
        await writeRegular(c.path.real, c.path.display, c.after)
        undo.push(() => unlinkSync(c.path.real))
      } else if (c.type === 'delete') {
        unlinkSync(c.path.real)
        undo.push(() => writeRegular(c.path.real, c.path.display, c.before))
      } else if (c.moveTo) {
        const to = c.moveTo
        const made = mkdirSync(dirname(to.real), { recursive: true })
        undo.push(() => removeMadeDirs(dirname(to.real), made))
        await writeRegular(to.real, to.display, c.after)
        undo.push(() => unlinkSync(to.real))
        unlinkSync(c.path.real)
        undo.push(() => writeRegular(c.path.real, c.path.display, c.before))
      } else {
        await writeRegular(c.path.real, c.path.display, c.after)
        undo.push(() => writeRegular(c.path.real, c.path.display, c.before))
      }
    }
  } catch (err) {
    for (const step of undo.reverse()) {
      try {
        await step()
      } catch {
        // keep undoing the rest: each step restores one file
      }
    }
    throw coded('failed', 'WRITE_FAILED', `${(err as Error).message}; the files written before it were restored.`)
  }
}

/** Removes the directories mkdir made for a file (deepest first), only while they are empty. */
function removeMadeDirs(dir: string, firstMade: string | undefined): void {
  if (firstMade === undefined) return
  for (let d = dir; ; d = dirname(d)) {
    try {
      rmdirSync(d)
    } catch {
      return
    }
    if (d === firstMade || dirname(d) === d) return
  }
}
