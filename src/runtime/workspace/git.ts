import { spawn } from 'node:child_process'
import { ChronicleError } from '../../events/errors.js'

/**
 * Running git for the shadow store: always asynchronously (the server's event
 * loop keeps running), always with an environment built here — nothing of the
 * server's own (`GIT_DIR`, `GIT_INDEX_FILE`, a user config with filters,
 * hooks, `diff.noprefix`, colour, fsmonitor…) reaches it.
 */

export interface GitPlace {
  /** the shadow object store (`GIT_DIR`) */
  readonly gitDir: string
  /** `HOME` for git: a directory with no `.gitconfig`, so no user config is read */
  readonly home: string
  /** the directory whose files are read or written (`GIT_WORK_TREE`) */
  readonly workTree?: string
  /** the workspace's index (`GIT_INDEX_FILE`) */
  readonly index?: string
  /** where git starts (default: the work tree, else the git directory) */
  readonly cwd?: string
}

export interface GitResult {
  readonly code: number
  readonly stdout: Buffer
  readonly stderr: string
}

/**
 * Settings on every call: output that does not depend on the machine (no
 * quoting of non-ASCII paths, no colour, a fixed abbreviation), no automatic
 * gc (nothing refers to a snapshot: a gc would prune them all), no line-ending
 * or safety conversions, no fsmonitor or untracked cache, new indexes in the
 * compact version 4.
 */
const CONFIG = [
  'core.autocrlf=false',
  'core.safecrlf=false',
  'core.quotepath=off',
  'core.symlinks=true',
  'core.fsmonitor=false',
  'core.untrackedCache=false',
  'core.abbrev=12',
  'color.ui=false',
  'gc.auto=0',
  'index.version=4',
  'advice.addEmbeddedRepo=false',
  'init.defaultBranch=main',
  'submodule.recurse=false',
].flatMap((setting) => ['-c', setting])

export function gitEnv(place: GitPlace): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: place.home,
    LC_ALL: 'C',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_ATTR_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    // a path given on the command line is a path, never a glob
    GIT_LITERAL_PATHSPECS: '1',
    GIT_DIR: place.gitDir,
    ...(place.workTree !== undefined && { GIT_WORK_TREE: place.workTree }),
    ...(place.index !== undefined && { GIT_INDEX_FILE: place.index }),
  }
}

/** Runs git; resolves with its exit code and output whatever the code (see `git` for the throwing form). */
export function runGit(
  args: readonly string[],
  place: GitPlace,
  input?: Buffer,
  env: Record<string, string> = gitEnv(place),
): Promise<GitResult> {
  return startGit(args, place, env).finish(input)
}

/**
 * Starts git now and gives it its input later: a process takes milliseconds
 * to start and load the index, which can overlap with other work (the
 * snapshot starts `update-index` while `ls-files` is still looking).
 */
export function startGit(
  args: readonly string[],
  place: GitPlace,
  env: Record<string, string> = gitEnv(place),
): { finish(input?: Buffer): Promise<GitResult> } {
  const child = spawn('git', [...CONFIG, ...args], {
    cwd: place.cwd ?? place.workTree ?? place.gitDir,
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  const done = new Promise<GitResult>((resolve, reject) => {
    const out: Buffer[] = []
    const err: Buffer[] = []
    let errBytes = 0
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk))
    child.stderr.on('data', (chunk: Buffer) => {
      // keep the start of what git says: enough to explain a failure
      if (errBytes < 64 * 1024) err.push(chunk), (errBytes += chunk.length)
    })
    child.stdin.on('error', () => undefined) // git may exit before reading all of its input; its exit code says why
    child.on('error', (cause) =>
      reject(new ChronicleError('INTERNAL', `could not run git ${args[0]}: ${cause.message}`, { args: [...args] })),
    )
    child.on('close', (code, signal) =>
      resolve({
        code: code ?? (signal ? 128 : 1),
        stdout: Buffer.concat(out),
        stderr: Buffer.concat(err).toString('utf8'),
      }),
    )
  })
  done.catch(() => undefined) // a spawn failure before finish() is reported by finish()
  return {
    finish(input) {
      child.stdin.end(input)
      return done
    },
  }
}

/** Runs git and returns its output; a non-zero exit is an INTERNAL error naming the command and what git said. */
export async function git(args: readonly string[], place: GitPlace, input?: Buffer): Promise<Buffer> {
  const result = await runGit(args, place, input)
  if (result.code !== 0) throw gitFailed(args, result)
  return result.stdout
}

/** What git says when an object it needs is not in the store or cannot be read (deleted, truncated, edited). */
const DAMAGED_OBJECT =
  /unable to read|bad object|: bad file$|not a valid object name|is corrupt|inflate|object file .* is empty|missing (?:blob|tree)|invalid object|hash mismatch/im

export function gitFailed(args: readonly string[], result: GitResult): ChronicleError {
  const said = result.stderr.trim().split('\n').slice(-3).join(' / ')
  if (DAMAGED_OBJECT.test(result.stderr))
    // the object store is damaged, not the request: said so, on the operation that needed it (docs/BACKUP.md)
    return new ChronicleError(
      'WORKSPACE_DAMAGED',
      `the workspace object store lacks an object this needs or cannot read it (deleted or damaged): ${said}. ` +
        'Snapshots that do not need it still read; `chronicle restore <backup>` puts a backup of the store back',
      { args: [...args], exitCode: result.code },
    )
  return new ChronicleError('INTERNAL', `git ${args[0]} failed (exit ${result.code}): ${said}`, {
    args: [...args],
    exitCode: result.code,
    stderr: result.stderr,
  })
}

/** The records of a `-z` output: split at each NUL, without the empty one after the last. */
export function splitNul(output: Buffer): Buffer[] {
  const records: Buffer[] = []
  let start = 0
  for (let end = output.indexOf(0, start); end !== -1; end = output.indexOf(0, start)) {
    records.push(output.subarray(start, end))
    start = end + 1
  }
  if (start < output.length) records.push(output.subarray(start))
  return records
}
