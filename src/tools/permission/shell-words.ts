import { namedChildren, type ShellNode } from './shell-grammar.js'

/** One shell word, as the command that receives it would see it when that can be known. */
export interface ShellWord {
  /** the word after quote removal and escapes when literal; otherwise its source text */
  readonly text: string
  /** no expansion or substitution in it: `text` is exactly what the command receives */
  readonly literal: boolean
  /** an unquoted glob or brace pattern: the shell may turn it into other words */
  readonly pattern: boolean
}

export function literalWord(text: string): ShellWord {
  return { text, literal: true, pattern: false }
}

/** Reads a word node: a word, a quoted string, `$'…'`, a number, or a concatenation of those. */
export function readWord(node: ShellNode): ShellWord {
  const { text, literal, shape } = pieces(node)
  if (!literal) return { text: node.text.replace(/\s+/g, ' '), literal: false, pattern: false }
  return { text, literal: true, pattern: GLOB.test(shape) }
}

/**
 * Unquoted `*`, `?`, `[…]` or `{a,b}`/`{a..b}`. `shape` is the word with
 * quoted and escaped characters blanked, so `"r*"` or `r\*` are not patterns.
 */
const GLOB = /[*?]|\[.*\]|\{.*(,|\.\.).*\}/

interface Pieces {
  readonly text: string
  readonly literal: boolean
  /** the unquoted characters as written, with quoted or escaped ones replaced by `_` */
  readonly shape: string
}

function pieces(node: ShellNode): Pieces {
  switch (node.type) {
    case 'word':
      return { text: unescapeUnquoted(node.text), literal: true, shape: node.text.replace(/\\[\s\S]/g, '__') }
    case 'number':
    case 'variable_name':
      return { text: node.text, literal: true, shape: node.text }
    case 'raw_string':
      return quoted(node.text.slice(1, -1))
    case 'ansi_c_string':
      return quoted(decodeAnsiC(node.text.slice(2, -1)))
    case 'string':
      return doubleQuoted(node)
    case 'translated_string': // $"…": a string looked up in a message catalogue, which we treat as itself
      return doubleQuoted(namedChildren(node)[0] ?? node)
    case 'concatenation':
      return node.children
        .map(pieces)
        .reduce((a, b) => ({ text: a.text + b.text, literal: a.literal && b.literal, shape: a.shape + b.shape }), {
          text: '',
          literal: true,
          shape: '',
        })
    default:
      // A lone `$` (as in `x$`) is a token of its own; expansions, substitutions
      // and brace expressions are known only when the shell runs.
      if (!node.named) return { text: node.text, literal: true, shape: node.text }
      return { text: node.text, literal: false, shape: node.text }
  }
}

function quoted(text: string): Pieces {
  return { text, literal: true, shape: '_'.repeat(text.length) }
}

function doubleQuoted(node: ShellNode): Pieces {
  let text = ''
  for (const part of node.children.slice(1, -1)) {
    if (part.type === 'string_content')
      text += part.text.replace(/\\([$`"\\\n])/g, (_, c: string) => (c === '\n' ? '' : c))
    else if (part.named) return { text: node.text, literal: false, shape: '' }
    else text += part.text // a lone `$`
  }
  return quoted(text)
}

/** Outside quotes a backslash takes the next character literally (a backslash-newline is removed). */
function unescapeUnquoted(text: string): string {
  return text.replace(/\\([\s\S])/g, (_, c: string) => (c === '\n' ? '' : c))
}

/** The escapes of bash's `$'…'` strings, so that `$'\x72m'` reads as `rm`. */
export function decodeAnsiC(body: string): string {
  return body.replace(
    /\\(?:x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|([0-7]{1,3})|c([\s\S])|([\s\S]))/g,
    (_, hex?: string, u4?: string, u8?: string, oct?: string, ctrl?: string, c?: string) => {
      const code = hex ?? u4 ?? u8
      if (code !== undefined) return String.fromCodePoint(Math.min(Number.parseInt(code, 16), 0x10ffff))
      if (oct !== undefined) return String.fromCharCode(Number.parseInt(oct, 8) & 0xff)
      if (ctrl !== undefined) return String.fromCharCode(ctrl.charCodeAt(0) & 0x1f)
      return ANSI_C_ESCAPES[c ?? ''] ?? `\\${c}`
    },
  )
}

const ANSI_C_ESCAPES: Record<string, string> = {
  a: '\x07',
  b: '\b',
  e: '\x1b',
  E: '\x1b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
  v: '\v',
  '\\': '\\',
  "'": "'",
  '"': '"',
  '?': '?',
}
