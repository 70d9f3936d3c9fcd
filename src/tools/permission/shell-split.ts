import { interpreterRuns } from './shell-interpreters.js'
import { childByField, childrenByField, namedChildren, parseShell, type ShellNode } from './shell-parser.js'
import { isQuotedHeredoc, redirectText, stdinScript } from './shell-redirects.js'
import { readWord, type ShellWord } from './shell-words.js'
import { type Runs, wrapperRuns } from './shell-wrappers.js'

/**
 * Finds every simple command a bash command string would run, so that
 * permission rules see each one: across lists, pipelines and control
 * structures, inside substitutions, function bodies and heredocs, behind
 * wrappers (`sudo`, `env`, `xargs`, `find -exec`…) and inside scripts handed
 * to `bash -c`, `eval` and the like. Names are resolved as bash would
 * (`/bin/rm`, `\rm`, `"r"m` are all `rm`); a name that only the running
 * shell can know (`$x f`) makes the result `dynamic`.
 */
export interface SplitResult {
  /** every simple command as a pattern: resolved name, then its words (see `SimpleCommand`) and redirections, joined by single spaces; outer commands before nested ones; deduplicated */
  readonly commands: readonly string[]
  /** false when the text has a syntax error or could not be followed: callers fail closed (never auto-allow) */
  readonly complete: boolean
  /** some command's name cannot be known statically (`$x f`, `eval "$s"`, `curl … | sh`, `source f`): callers must ask, never allow, when any deny or ask rule exists */
  readonly dynamic: boolean
}

export interface SimpleCommand {
  /** the program, resolved through paths, quotes and escapes (`/bin/r\m` → `rm`); the source text when not literal */
  readonly name: string
  /** its arguments, unquoted and unescaped when literal; an argument with an expansion keeps its source text */
  readonly args: readonly string[]
}

/** How deep scripts inside scripts are followed (`bash -c "eval 'sh -c …'"`); deeper is incomplete. */
const MAX_DEPTH = 8
/** How many wrappers in a row are followed (`sudo nice env … rm`); more is incomplete. */
const MAX_HOPS = 32

interface Found extends SimpleCommand {
  /** the name as written when it is a path (`./ls`): see `patternsOf` */
  readonly path?: string
  /** redirections, as written: part of the pattern, never of the name */
  readonly redirects: readonly string[]
}

interface Findings {
  readonly commands: Found[]
  complete: boolean
  dynamic: boolean
}

export function splitShellCommand(command: string): SplitResult {
  const { commands, complete, dynamic } = findCommands(command)
  return { commands: [...new Set(commands.flatMap(patternsOf))], complete, dynamic }
}

/**
 * A command's patterns: by its program's name, so that a deny on `rm *`
 * covers `/bin/rm`; and, for a path, also as written, so that an allow on
 * `ls *` does not cover `./ls`, which is some other program.
 */
function patternsOf(c: Found): string[] {
  const rest = [...c.args, ...c.redirects]
  const byName = [c.name, ...rest].join(' ')
  return c.path === undefined ? [byName] : [byName, [c.path, ...rest].join(' ')]
}

/** Every simple command in `command`, outer ones first, wrapped ones right after their wrapper. */
export function simpleCommands(command: string): SimpleCommand[] {
  return findCommands(command).commands.map(({ name, args }) => ({ name, args }))
}

function findCommands(command: string): Findings {
  const out: Findings = { commands: [], complete: true, dynamic: false }
  script(command, out, 0)
  return out
}

function script(text: string, out: Findings, depth: number): void {
  if (depth > MAX_DEPTH) {
    out.complete = false
    return
  }
  const tree = parseShell(text)
  if (!tree || tree.error) out.complete = false
  if (tree) walk(tree.root, out, depth)
}

function walk(node: ShellNode, out: Findings, depth: number): void {
  switch (node.type) {
    case 'command':
      return command(node, [], out, depth)
    case 'redirected_statement':
      return redirected(node, out, depth)
    case 'heredoc_redirect':
      return heredoc(node, out, depth)
    case 'declaration_command': // export, declare, local, readonly, typeset
    case 'unset_command':
      out.commands.push({
        name: node.children[0]?.text ?? '',
        args: namedChildren(node).map((n) => readWord(n).text),
        redirects: [],
      })
      return walkChildren(node, out, depth)
    case 'variable_assignment':
      if (changesMeaning(node)) out.dynamic = true
      return walkChildren(node, out, depth)
    case 'expansion':
      if (/@P\}$/.test(node.text)) out.dynamic = true // `${x@P}` expands x as a prompt, running its substitutions
      return walkChildren(node, out, depth)
    default: // lists, pipelines, compound statements, substitutions, expansions, words: look inside
      return walkChildren(node, out, depth)
  }
}

function walkChildren(node: ShellNode, out: Findings, depth: number): void {
  for (const child of node.children) if (child.named) walk(child, out, depth)
}

/** A simple command: its name and words, its redirections (also those written around it), then what is nested in them. */
function command(node: ShellNode, around: readonly ShellNode[], out: Findings, depth: number): void {
  const name = childByField(node, 'name')
  const redirects = [...childrenByField(node, 'redirect'), ...around]
  if (name) {
    const words = [namedChildren(name)[0] ?? name, ...childrenByField(node, 'argument')].map(readWord)
    run(words, redirects.map(redirectText), stdinScript(redirects), out, depth, 0)
  }
  walkChildren(node, out, depth)
}

function redirected(node: ShellNode, out: Findings, depth: number): void {
  const body = childByField(node, 'body')
  const redirects = childrenByField(node, 'redirect')
  if (body?.type === 'command') command(body, redirects, out, depth)
  else if (body) walk(body, out, depth)
  for (const r of redirects) walk(r, out, depth)
}

/**
 * Records the command `words` and follows what it runs in turn. `stdin` is
 * the script text on its standard input when the command line holds it (a
 * heredoc or here-string), for a shell that reads its script from there.
 */
function run(
  words: readonly ShellWord[],
  redirects: readonly string[],
  stdin: ShellWord | undefined,
  out: Findings,
  depth: number,
  hops: number,
): void {
  const [head, ...rest] = words
  if (!head) return
  const known = head.literal && !head.pattern
  if (!known) out.dynamic = true
  const name = known ? programName(head.text) : head.text
  const path = name !== head.text ? { path: head.text } : {}
  out.commands.push({ name, ...path, args: rest.map((w) => w.text), redirects })
  if (!known) return
  if (hops >= MAX_HOPS) {
    out.complete = false
    return
  }
  for (const runs of wrapperRuns(name, rest) ?? interpreterRuns(name, rest) ?? [])
    follow(runs, stdin, out, depth, hops + 1)
}

function follow(runs: Runs, stdin: ShellWord | undefined, out: Findings, depth: number, hops: number): void {
  switch (runs.kind) {
    case 'command':
      return run(runs.words, [], stdin, out, depth, hops)
    case 'script':
      return runScript(runs.text, out, depth)
    case 'stdin':
      return runScript(stdin, out, depth)
    case 'unknown':
      out.dynamic = true
      return
    default:
      runs satisfies never
  }
}

/** A script we can read is split like the command itself; one we cannot is dynamic. */
function runScript(text: ShellWord | undefined, out: Findings, depth: number): void {
  if (text?.literal) script(text.text, out, depth + 1)
  else out.dynamic = true
}

/** `/bin/rm`, `./x/rm`, `~/bin/rm` → `rm`: rules name programs, not where they live. */
function programName(path: string): string {
  return path.split('/').at(-1) || path
}

/**
 * An assignment that changes what later text runs: a literal holding code
 * (`x='a[$(rm f)]'` runs when x is used in arithmetic or `${x@P}`), or a
 * variable that decides which program a name is (PATH) or what a shell
 * reads first (BASH_ENV, ENV).
 */
function changesMeaning(assignment: ShellNode): boolean {
  const name = childByField(assignment, 'name')?.text ?? ''
  const value = childByField(assignment, 'value')
  return MEANINGFUL.has(name) || (value !== undefined && holdsCode(readWord(value)))
}

const MEANINGFUL = new Set(['PATH', 'BASH_ENV', 'ENV'])

function holdsCode(word: ShellWord): boolean {
  return word.literal && /\$\(|`/.test(word.text)
}

/**
 * The rest of a heredoc's line may hold more commands (`cat <<EOF | sh`,
 * which the grammar puts inside the redirection). An unquoted body is
 * expanded by the shell: its substitutions run, backticks included (which
 * the grammar leaves as text).
 */
function heredoc(node: ShellNode, out: Findings, depth: number): void {
  const quoted = isQuotedHeredoc(node)
  for (const child of namedChildren(node)) {
    if (child.type === 'heredoc_start' || child.type === 'heredoc_end') continue
    if (child.type !== 'heredoc_body') walk(child, out, depth)
    else if (!quoted) {
      walkChildren(child, out, depth)
      backquoted(child.text, out, depth)
    }
  }
}

/** Runs the scripts between backticks in `text`; an unmatched backtick leaves the text incomplete. */
function backquoted(text: string, out: Findings, depth: number): void {
  let open = -1
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '\\') i++
    else if (text[i] === '`' && open < 0) open = i
    else if (text[i] === '`') {
      script(text.slice(open + 1, i).replace(/\\([$`\\])/g, '$1'), out, depth + 1)
      open = -1
    }
  }
  if (open >= 0) out.complete = false
}
