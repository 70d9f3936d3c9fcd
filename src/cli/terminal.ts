import { styleText } from 'node:util'

/**
 * Where a command writes: colours only on a terminal that has them (NO_COLOR,
 * FORCE_COLOR and TERM are honoured, as `hasColors` reads them), and lines
 * wrapped at word boundaries to the terminal's width. A pipe gets plain,
 * unwrapped text.
 */

export type Style = Parameters<typeof styleText>[0]

export interface Terminal {
  /** raw text, as is */
  readonly write: (text: string) => void
  /** one line (or several), word-wrapped on a terminal */
  readonly line: (text?: string) => void
  readonly paint: (style: Style, text: string) => string
  /** the terminal's width; undefined for a pipe or a file (no wrapping) */
  readonly width: number | undefined
}

interface Stream {
  write(text: string): unknown
  readonly isTTY?: boolean
  readonly columns?: number
  hasColors?(): boolean
}

export function colourFor(stream: Stream, env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false
  if (stream.isTTY) return stream.hasColors?.() ?? false
  return env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0' && env.FORCE_COLOR !== 'false'
}

export function painter(enabled: boolean): Terminal['paint'] {
  return enabled ? (style, text) => styleText(style, text, { validateStream: false }) : (_style, text) => text
}

export function terminalOf(stream: Stream, env: NodeJS.ProcessEnv = process.env): Terminal {
  const width = stream.isTTY ? stream.columns : undefined
  const write = (text: string) => void stream.write(text)
  return {
    write,
    line: (text = '') => write(`${width ? wrap(text, width) : text}\n`),
    paint: painter(colourFor(stream, env)),
    width,
  }
}

/** The visible length of a string (colour codes take no columns). */
export function visibleLength(text: string): number {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching the ESC of colour codes is the point
  return text.replace(/\u001b\[[0-9;]*m/g, '').length
}

/**
 * Word-aware wrapping to `width` columns: breaks at spaces, keeps each line's
 * leading indent on its continuation lines, and cuts only a word longer than
 * a whole line.
 */
export function wrap(text: string, width: number): string {
  return text
    .split('\n')
    .map((line) => wrapLine(line, width))
    .join('\n')
}

function wrapLine(line: string, width: number): string {
  if (visibleLength(line) <= width) return line
  const indent = /^ */.exec(line)?.[0] ?? ''
  const room = Math.max(10, width - indent.length)
  const out: string[] = []
  let current = ''
  for (const word of line.slice(indent.length).split(/ +/)) {
    let rest = word
    while (visibleLength(rest) > room) {
      if (current) out.push(current)
      out.push(rest.slice(0, room))
      current = ''
      rest = rest.slice(room)
    }
    if (!current) current = rest
    else if (visibleLength(current) + 1 + visibleLength(rest) <= room) current += ` ${rest}`
    else {
      out.push(current)
      current = rest
    }
  }
  if (current) out.push(current)
  return out.map((l) => indent + l).join('\n')
}

/**
 * Wrapping for text that arrives in pieces (a streamed answer): a word is
 * held until its end is seen, then goes on this line or the next.
 */
export class StreamWrapper {
  private column = 0
  private word = ''

  constructor(
    private readonly out: (text: string) => void,
    private readonly width: number | undefined,
  ) {}

  write(text: string): void {
    if (!this.width) {
      this.out(text)
      return
    }
    for (const ch of text) {
      if (ch === '\n') {
        this.flushWord()
        this.out('\n')
        this.column = 0
      } else if (ch === ' ') {
        this.flushWord()
        if (this.column < this.width) {
          this.out(' ')
          this.column++
        }
      } else this.word += ch
    }
  }

  /** The held word, at the end of the text. */
  end(): void {
    this.flushWord()
  }

  private flushWord(): void {
    if (!this.word || !this.width) return
    if (this.column > 0 && this.column + this.word.length > this.width) {
      this.out('\n')
      this.column = 0
    }
    for (let i = 0; i < this.word.length; i += this.width) {
      const piece = this.word.slice(i, i + this.width)
      if (i > 0) this.out('\n')
      this.out(piece)
      this.column = i > 0 ? piece.length : this.column + piece.length
    }
    this.word = ''
  }
}
