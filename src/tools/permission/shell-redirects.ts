import { childrenByField, namedChildren, type ShellNode } from './shell-parser.js'
import { literalWord, readWord, type ShellWord } from './shell-words.js'

// Redirections as the permission patterns show them, and the script a shell may read from its standard input.

/**
 * A redirection as it appears in a pattern: its source text; for a heredoc
 * `<<EOF` without the body, plus the redirections written after it on its line.
 */
export function redirectText(node: ShellNode): string {
  if (node.type !== 'heredoc_redirect') return node.text.replace(/\s+/g, ' ')
  const start = node.children.findIndex((c) => c.type === 'heredoc_start')
  const operator = node.children
    .slice(0, start + 1)
    .map((c) => c.text)
    .join('')
  return [operator, ...childrenByField(node, 'redirect').map(redirectText)].join(' ')
}

/** The script a command's standard input holds, from the last heredoc or here-string; undefined when it comes from elsewhere. */
export function stdinScript(redirects: readonly ShellNode[]): ShellWord | undefined {
  let stdin: ShellWord | undefined
  for (const r of redirects) {
    if (r.type === 'heredoc_redirect') stdin = heredocText(r)
    else if (r.type === 'herestring_redirect') stdin = readHereString(r)
    else if (r.type === 'file_redirect' && /^\d*<(?!&?-)/.test(r.text)) stdin = undefined // `< file`: a script we cannot see
  }
  return stdin
}

function readHereString(node: ShellNode): ShellWord | undefined {
  const word = namedChildren(node)[0]
  return word && readWord(word)
}

/** `<<'EOF'` (any quote) keeps its body as is; an unquoted body is literal only without expansions or backticks. */
function heredocText(node: ShellNode): ShellWord {
  const body = node.children.find((c) => c.type === 'heredoc_body')
  if (!body) return literalWord('')
  if (isQuotedHeredoc(node)) return literalWord(body.text)
  if (namedChildren(body).some((c) => c.type !== 'heredoc_content') || body.text.includes('`')) {
    return { text: body.text, literal: false, pattern: false }
  }
  return literalWord(body.text.replace(/\\([$`\\\n])/g, (_, c: string) => (c === '\n' ? '' : c)))
}

export function isQuotedHeredoc(node: ShellNode): boolean {
  return /['"\\]/.test(node.children.find((c) => c.type === 'heredoc_start')?.text ?? '')
}
