import { describe, expect, it } from 'vitest'
import { colourFor, painter, StreamWrapper, terminalOf, visibleLength, wrap } from '../../src/cli/terminal.js'

/** Colours only where they belong, and lines broken between words. */

const tty = (columns = 20, colours = true) => {
  let written = ''
  const stream = { isTTY: true, columns, hasColors: () => colours, write: (t: string) => void (written += t) }
  return { stream, written: () => written }
}

describe('colours', () => {
  it('on a terminal that has them, unless NO_COLOR', () => {
    expect(colourFor(tty().stream, {})).toBe(true)
    expect(colourFor(tty().stream, { NO_COLOR: '1' })).toBe(false)
    expect(colourFor(tty(20, false).stream, {})).toBe(false)
  })

  it('never into a pipe or a file, unless FORCE_COLOR', () => {
    const pipe = { write: () => true }
    expect(colourFor(pipe, {})).toBe(false)
    expect(colourFor(pipe, { FORCE_COLOR: '1' })).toBe(true)
    expect(colourFor(pipe, { FORCE_COLOR: '0' })).toBe(false)
  })

  it('paints with ANSI codes when on, and leaves text alone when off', () => {
    expect(painter(true)('red', 'x')).toBe('\u001b[31mx\u001b[39m')
    expect(painter(false)('red', 'x')).toBe('x')
    expect(visibleLength(painter(true)(['bold', 'red'], 'abc'))).toBe(3)
  })

  it('a command’s terminal wraps lines on a terminal and passes a pipe’s text through', () => {
    const t = tty(12)
    terminalOf(t.stream, {}).line('one two three four')
    expect(t.written()).toBe('one two\nthree four\n')
    let piped = ''
    terminalOf({ write: (s: string) => void (piped += s) }, {}).line('one two three four')
    expect(piped).toBe('one two three four\n')
  })
})

describe('wrap', () => {
  it('breaks at spaces, never inside a word that fits a line', () => {
    expect(wrap('the quick brown fox jumps over the lazy dog', 15)).toBe(
      'the quick brown\nfox jumps over\nthe lazy dog',
    )
  })

  it('keeps the indent on continuation lines', () => {
    expect(wrap('    alpha beta gamma delta', 16)).toBe('    alpha beta\n    gamma delta')
  })

  it('cuts only a word longer than a whole line', () => {
    expect(wrap('a abcdefghijklmnopqrstuvwxyz b', 10)).toBe('a\nabcdefghij\nklmnopqrst\nuvwxyz b')
  })

  it('counts colour codes as no width', () => {
    const red = painter(true)('red', 'seven77')
    expect(wrap(`${red} abc`, 11)).toBe(`${red} abc`)
  })
})

describe('StreamWrapper', () => {
  it('wraps text arriving in pieces the way wrap() wraps it whole', () => {
    let out = ''
    const w = new StreamWrapper((t) => void (out += t), 15)
    for (const piece of ['the qu', 'ick bro', 'wn fox ', 'jumps o', 'ver the lazy d', 'og']) w.write(piece)
    w.end()
    expect(out.split('\n').map((l) => l.trimEnd())).toEqual(['the quick brown', 'fox jumps over', 'the lazy dog'])
  })

  it('passes text through unchanged without a width', () => {
    let out = ''
    const w = new StreamWrapper((t) => void (out += t), undefined)
    w.write('a very long line that is not wrapped at all')
    expect(out).toBe('a very long line that is not wrapped at all')
  })
})
