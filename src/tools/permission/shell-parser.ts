import { childByField, childrenByField, endOf, parseTree, type ShellNode, type ShellTree } from './shell-grammar.js'

export type { ShellNode, ShellTree }
export { childByField, childrenByField, namedChildren } from './shell-grammar.js'

/**
 * A bash script's syntax tree as bash reads it: the grammar's tree, with
 * the places where tree-sitter-bash reads bash differently put right (each
 * one below hid a command from the rules). Undefined when the parser gave up.
 */
export function parseShell(text: string): ShellTree | undefined {
  let source = joinContinuations(text)
  for (let attempt = 0; ; attempt++) {
    const tree = parseTree(source)
    if (!tree) return undefined
    const merged = mergedLines(tree.root)
    if (merged.length === 0 || attempt === MAX_REPAIRS) {
      const error = tree.error || merged.length > 0 || skipsText(tree.root, source)
      return { root: placeRedirections(tree.root, source), error }
    }
    source = insertSemicolons(source, merged)
  }
}

/**
 * Backslash-newlines: bash removes them before it splits words, the
 * grammar treats them as blanks, so `r\⏎m f` would read as `r m f` where
 * bash runs `rm f`. Only those between tokens go: inside quotes, comments
 * and heredocs the text is left alone.
 */
function joinContinuations(text: string): string {
  if (!text.includes('\\\n')) return text
  const tree = parseTree(text)
  if (!tree) return text
  let joined = ''
  let from = 0
  for (let i = text.indexOf('\\\n'); i >= 0; i = text.indexOf('\\\n', i + 2)) {
    if (!betweenTokens(tree.root, i)) continue
    joined += text.slice(from, i)
    from = i + 2
  }
  // Joining can bring two continuations together (`\⏎\⏎`): go again until none is left.
  return from === 0 ? text : joinContinuations(joined + text.slice(from))
}

/** Whether offset `i` lies in no token: the innermost node around it has children, and is not a string or heredoc. */
function betweenTokens(node: ShellNode, i: number): boolean {
  const inner = node.children.find((c) => c.start <= i && i < endOf(c))
  if (inner) return betweenTokens(inner, i)
  return node.children.length > 0 && !LITERAL_CONTAINERS.has(node.type)
}

/** Nodes whose gaps between children are still their own text (a string's or heredoc's content). */
const LITERAL_CONTAINERS = new Set(['string', 'translated_string', 'heredoc_body'])

/**
 * Text the grammar skipped without reporting an error (`a - 2>&1` loses
 * its `-`). Whatever words it loses, the rules do not see: such a tree
 * counts as an error. Every character outside tokens must be blank.
 */
function skipsText(root: ShellNode, source: string): boolean {
  let covered = 0
  const gap = (upTo: number) => /\S/.test(source.slice(covered, upTo))
  const visit = (node: ShellNode): boolean => {
    if (gap(node.start)) return true
    if (node.children.length === 0) covered = Math.max(covered, endOf(node))
    for (const child of node.children) {
      // A heredoc body's text around its substitutions is its own, not a token.
      if (node.type === 'heredoc_body') covered = Math.max(covered, child.start)
      if (visit(child)) return true
    }
    if (node.type === 'heredoc_body') covered = Math.max(covered, endOf(node))
    return false
  }
  return visit(root) || gap(source.length)
}

/**
 * Lines run together: after a pipeline of three or more commands the
 * grammar can read `a | b | c⏎rm f && d` as the command `c rm f` (or make
 * `rm f` targets of a redirection of c), where bash runs `c`, then `rm f`.
 * A newline between the words and redirections of one simple command is
 * such a merge: a `;` put before it ends the command there, as bash does.
 */
const MAX_REPAIRS = 8
const ONE_LINE = new Set([
  'command',
  'redirected_statement',
  'file_redirect',
  'herestring_redirect',
  'heredoc_redirect',
])

function mergedLines(node: ShellNode, found: number[] = []): number[] {
  if (ONE_LINE.has(node.type)) {
    // A heredoc's body rightly starts on the next line: only what comes before it counts.
    const body = node.children.findIndex((c) => c.type === 'heredoc_body')
    const line = body < 0 ? node.children : node.children.slice(0, body)
    for (let i = 1; i < line.length; i++) {
      const end = endOf(line[i - 1] as ShellNode)
      const gap = node.text.slice(end - node.start, (line[i] as ShellNode).start - node.start)
      if (gap.includes('\n')) found.push(end + gap.indexOf('\n'))
    }
  }
  for (const child of node.children) mergedLines(child, found)
  return found
}

function insertSemicolons(text: string, offsets: readonly number[]): string {
  let out = ''
  let from = 0
  for (const at of [...offsets].sort((a, b) => a - b)) {
    out += `${text.slice(from, at)};`
    from = at
  }
  return out + text.slice(from)
}

/**
 * Redirections: the grammar reads `cmd > out a b` as a redirection to
 * `out a b` (and `cmd <<EOF a b` as words of the heredoc), where bash passes
 * `a b` to cmd; and it hangs `x && y > out` on the whole list, where bash
 * redirects only `y`. Both are moved to where bash has them.
 */
function placeRedirections(node: ShellNode, source: string): ShellNode {
  const children = node.children.map((c) => placeRedirections(c, source))
  const placed = children.some((c, i) => c !== node.children[i]) ? { ...node, children } : node
  if (placed.type === 'redirected_statement') return redirectLast(placed, source)
  if (placed.type === 'command') return withStrayWords(placed, []).command
  return placed
}

/** A redirected list, pipeline or negation: the redirections belong to its last command. */
function redirectLast(node: ShellNode, source: string): ShellNode {
  const body = childByField(node, 'body')
  const redirects = childrenByField(node, 'redirect')
  if (body?.type === 'command') {
    const placed = withStrayWords(body, redirects)
    return { ...node, children: [placed.command, ...placed.redirects] }
  }
  const last = body && LISTS.has(body.type) ? body.children.findLast((c) => c.named) : undefined
  if (!body || !last) return node
  const inner = redirectLast(
    {
      ...node,
      field: last.field,
      start: last.start,
      text: source.slice(last.start, endOf(node)),
      children: [{ ...last, field: 'body' }, ...redirects],
    },
    source,
  )
  return { ...body, field: node.field, children: body.children.map((c) => (c === last ? inner : c)) }
}

const LISTS = new Set(['list', 'pipeline', 'negated_command'])

/** Moves the words the grammar put in `command`'s redirections (its own and `around` it) into its arguments. */
function withStrayWords(
  command: ShellNode,
  around: readonly ShellNode[],
): { command: ShellNode; redirects: ShellNode[] } {
  const strays: ShellNode[] = []
  const own = command.children.map((c) => (c.field === 'redirect' ? withoutStrays(c, strays) : c))
  const redirects = around.map((r) => withoutStrays(r, strays))
  if (strays.length === 0) return { command, redirects: [...around] }
  const args = strays.map((s) => ({ ...s, field: 'argument' }))
  return { command: { ...command, children: [...own, ...args].sort((a, b) => a.start - b.start) }, redirects }
}

/** A redirection keeps its first target; further targets and heredoc-line words are collected in `strays`. */
function withoutStrays(redirect: ShellNode, strays: ShellNode[]): ShellNode {
  if (redirect.type === 'file_redirect') {
    const extra = childrenByField(redirect, 'destination').slice(1)
    if (extra.length === 0) return redirect
    strays.push(...extra)
    const kept = redirect.children.filter((c) => !extra.includes(c))
    return {
      ...redirect,
      text: redirect.text.slice(0, endOf(kept.at(-1) as ShellNode) - redirect.start),
      children: kept,
    }
  }
  if (redirect.type === 'heredoc_redirect') {
    strays.push(...childrenByField(redirect, 'argument'))
    const kept = redirect.children.filter((c) => c.field !== 'argument')
    return { ...redirect, children: kept.map((c) => (c.field === 'redirect' ? withoutStrays(c, strays) : c)) }
  }
  return redirect
}
