/**
 * Splits a shell command into the simple commands it would run, so that
 * permission rules see every one of them: `a && b`, `a || b`, `a; b`, `a | b`,
 * `a & b`, newlines, `( … )` and `{ …; }` groups, and the commands inside
 * `$( … )`, `<( … )`, backticks (also inside double quotes) and `sh -c '…'`.
 *
 * It is not a full shell parser. When it cannot follow the text (an unclosed
 * quote or substitution) it says so with `complete: false`, and callers must
 * fail closed (never auto-allow).
 */
export interface SplitResult {
  /** every simple command, whitespace-collapsed, outer ones before the ones nested in them */
  readonly commands: readonly string[]
  readonly complete: boolean
}

const SHELLS = new Set(['sh', 'bash', 'zsh', 'dash', 'ksh'])
const MAX_DEPTH = 8

export function splitShellCommand(command: string): SplitResult {
  const out: string[] = []
  const complete = split(command, out, 0)
  return { commands: [...new Set(out)], complete }
}

/** Splits `text` into `out`; false when the text could not be followed to its end. */
function split(text: string, out: string[], depth: number): boolean {
  if (depth > MAX_DEPTH) return false
  let ok = true
  let current = ''
  const nested: string[] = []
  const flush = () => {
    const cmd = current.replace(/\s+/g, ' ').trim()
    current = ''
    if (cmd) {
      out.push(cmd)
      ok = wrappedShell(cmd, out, depth) && ok
    }
  }
  let i = 0
  while (i < text.length) {
    const c = text[i] as string
    const next = text[i + 1]
    if (c === '\\') {
      current += text.slice(i, i + 2)
      i += 2
      continue
    }
    if (c === "'") {
      const end = text.indexOf("'", i + 1)
      if (end < 0) return finish(false)
      current += text.slice(i, end + 1)
      i = end + 1
      continue
    }
    if (c === '"') {
      const end = closeDouble(text, i + 1, nested)
      if (end < 0) return finish(false)
      current += text.slice(i, end + 1)
      i = end + 1
      continue
    }
    if (c === '`') {
      const end = closeBacktick(text, i + 1)
      if (end < 0) return finish(false)
      nested.push(text.slice(i + 1, end))
      current += text.slice(i, end + 1)
      i = end + 1
      continue
    }
    if ((c === '$' || c === '<' || c === '>') && next === '(') {
      const end = closeParen(text, i + 2)
      if (end < 0) return finish(false)
      if (c === '$' && text[i + 2] === '(') {
        current += text.slice(i, end + 1) // $(( arithmetic )) runs nothing
      } else {
        nested.push(text.slice(i + 2, end))
        current += text.slice(i, end + 1)
      }
      i = end + 1
      continue
    }
    if (c === '#' && (current === '' || /\s$/.test(current))) {
      const end = text.indexOf('\n', i)
      i = end < 0 ? text.length : end
      continue
    }
    if (c === '(' || c === ')' || c === ';' || c === '\n' || c === '|') {
      flush()
      i += c === '|' && (next === '|' || next === '&') ? 2 : c === ';' && next === ';' ? 2 : 1
      continue
    }
    if (c === '&') {
      const prev = current.at(-1)
      if (prev === '>' || prev === '<' || next === '>') {
        current += c // a redirection such as 2>&1 or &>file
        i++
        continue
      }
      flush()
      i += next === '&' ? 2 : 1
      continue
    }
    if ((c === '{' || c === '}') && (current.trim() === '' || c === '}') && isWordBoundary(text, i)) {
      flush()
      i++
      continue
    }
    current += c
    i++
  }
  return finish(true)

  function finish(followed: boolean): boolean {
    flush()
    for (const inner of nested) ok = split(inner, out, depth + 1) && ok
    return followed && ok
  }
}

function isWordBoundary(text: string, i: number): boolean {
  const before = i === 0 ? ' ' : (text[i - 1] as string)
  const after = text[i + 1] ?? ' '
  return /[\s;&|()]/.test(before) && /[\s;&|()]/.test(after)
}

/** The index of the closing `"`, collecting `$( … )` and backticks inside. */
function closeDouble(text: string, from: number, nested: string[]): number {
  let i = from
  while (i < text.length) {
    const c = text[i]
    if (c === '\\') i += 2
    else if (c === '"') return i
    else if (c === '`') {
      const end = closeBacktick(text, i + 1)
      if (end < 0) return -1
      nested.push(text.slice(i + 1, end))
      i = end + 1
    } else if (c === '$' && text[i + 1] === '(') {
      const end = closeParen(text, i + 2)
      if (end < 0) return -1
      if (text[i + 2] !== '(') nested.push(text.slice(i + 2, end))
      i = end + 1
    } else i++
  }
  return -1
}

function closeBacktick(text: string, from: number): number {
  for (let i = from; i < text.length; i++) {
    if (text[i] === '\\') i++
    else if (text[i] === '`') return i
  }
  return -1
}

/** The index of the `)` that closes a `(` just before `from`, honouring quotes and nesting. */
function closeParen(text: string, from: number): number {
  let depth = 1
  for (let i = from; i < text.length; i++) {
    const c = text[i]
    if (c === '\\') i++
    else if (c === "'") {
      const end = text.indexOf("'", i + 1)
      if (end < 0) return -1
      i = end
    } else if (c === '"') {
      const end = closeDouble(text, i + 1, [])
      if (end < 0) return -1
      i = end
    } else if (c === '(') depth++
    else if (c === ')' && --depth === 0) return i
  }
  return -1
}

/** `sh -c '…'` (also after env assignments): the quoted script is split too. */
function wrappedShell(cmd: string, out: string[], depth: number): boolean {
  const words = shellWords(cmd)
  if (!words) return false
  let k = 0
  while (k < words.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[k] as string)) k++
  if (k > 0 && k < words.length) out.push(words.slice(k).join(' ')) // the command without its env assignments
  const program = (words[k] ?? '').split('/').at(-1) ?? ''
  if (!SHELLS.has(program)) return true
  const c = words.indexOf('-c', k + 1)
  if (c < 0) return true
  const script = words[c + 1]
  return script === undefined ? true : split(script, out, depth + 1)
}

/** Words of a simple command with quotes removed; undefined on unbalanced quotes. */
export function shellWords(cmd: string): string[] | undefined {
  const words: string[] = []
  let word = ''
  let inWord = false
  for (let i = 0; i < cmd.length; i++) {
    const c = cmd[i] as string
    if (c === '\\' && i + 1 < cmd.length) {
      word += cmd[++i]
      inWord = true
    } else if (c === "'" || c === '"') {
      const end = cmd.indexOf(c, i + 1)
      if (end < 0) return undefined
      word += cmd.slice(i + 1, end)
      inWord = true
      i = end
    } else if (/\s/.test(c)) {
      if (inWord) words.push(word)
      word = ''
      inWord = false
    } else {
      word += c
      inWord = true
    }
  }
  if (inWord) words.push(word)
  return words
}
