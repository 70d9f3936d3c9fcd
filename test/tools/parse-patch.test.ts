import { describe, expect, it } from 'vitest'
import { applyHunks } from '../../src/tools/patch/apply-hunks.js'
import { parsePatch } from '../../src/tools/patch/parse-patch.js'

/** The `*** Begin Patch` format (src/tools/patch/): parsing, and hunks applied to text. */

describe('parsePatch', () => {
  it('reads adds, deletes, updates with a move, anchors and the end-of-file mark', () => {
    const text = [
      '*** Begin Patch',
      '*** Add File: n.txt',
      '+a',
      '+',
      '*** Delete File: d.txt',
      '*** Update File: u.txt',
      '*** Move to: v.txt',
      '@@ function f() {',
      ' keep',
      '-old',
      '+new',
      '',
      '*** End of File',
      '*** End Patch',
    ].join('\n')
    expect(parsePatch(text)).toEqual([
      { type: 'add', path: 'n.txt', content: 'a\n\n' },
      { type: 'delete', path: 'd.txt' },
      {
        type: 'update',
        path: 'u.txt',
        moveTo: 'v.txt',
        hunks: [
          { anchor: 'function f() {', oldLines: ['keep', 'old', ''], newLines: ['keep', 'new', ''], atEnd: true },
        ],
      },
    ])
  })

  it.each([
    ['no envelope', '*** Add File: x\n+x', 'PATCH_INVALID: the first line must be "*** Begin Patch"'],
    ['no end', '*** Begin Patch\n*** Add File: x\n+x', 'PATCH_INVALID: the last line must be "*** End Patch"'],
    ['nothing in it', '*** Begin Patch\n*** End Patch', 'PATCH_INVALID: the patch changes no file'],
    [
      'an add line without +',
      '*** Begin Patch\n*** Add File: x\nx\n*** End Patch',
      'PATCH_INVALID: Add File x: every line must start with "+"',
    ],
    [
      'an update with no hunks',
      '*** Begin Patch\n*** Update File: x\n*** End Patch',
      'PATCH_INVALID: Update File x has no hunks',
    ],
    [
      'a bad hunk line',
      '*** Begin Patch\n*** Update File: x\n@@\n-a\n*b\n*** End Patch',
      'PATCH_INVALID: Update File x hunk 1: line "*b" must start with " ", "-" or "+"',
    ],
  ])('refuses %s', (_name, text, message) => {
    expect(() => parsePatch(text)).toThrow(message)
  })
})

describe('applyHunks', () => {
  const hunk = (oldLines: string[], newLines: string[], extra: { anchor?: string; atEnd?: boolean } = {}) => ({
    oldLines,
    newLines,
    atEnd: extra.atEnd ?? false,
    ...(extra.anchor !== undefined && { anchor: extra.anchor }),
  })

  it('applies hunks in order, the second found after the first', () => {
    const text = 'x\ny\nx\ny\n'
    expect(applyHunks('f', text, [hunk(['x'], ['X']), hunk(['x'], ['Z'])])).toBe('X\ny\nZ\ny\n')
  })

  it('finds a hunk after its anchor, at the end when marked, and keeps CRLF and a missing final newline', () => {
    expect(applyHunks('f', 'a\nb\nc\nb', [hunk(['b'], ['B'], { anchor: 'c' })])).toBe('a\nb\nc\nB')
    expect(applyHunks('f', 'b\nb\n', [hunk(['b'], ['B'], { atEnd: true })])).toBe('b\nB\n')
    expect(applyHunks('f', 'a\r\nb\r\n', [hunk(['b'], ['B'])])).toBe('a\r\nB\r\n')
  })

  it('tolerates trailing whitespace the model lost, and inserts at the end with no old lines', () => {
    expect(applyHunks('f', 'a  \nb\n', [hunk(['a', 'b'], ['a', 'c'])])).toBe('a\nc\n')
    expect(applyHunks('f', 'a\n', [hunk([], ['z'])])).toBe('a\nz\n')
  })

  it('names the file and hunk that does not apply', () => {
    expect(() => applyHunks('src/f.ts', 'a\n', [hunk(['a'], ['A']), hunk(['q'], ['Q'])])).toThrow(
      'PATCH_DOES_NOT_APPLY: src/f.ts hunk 2: its context and removed lines were not found in the file.',
    )
    expect(() => applyHunks('f', 'a\n', [hunk(['a'], ['A'], { anchor: 'zz' })])).toThrow(
      'PATCH_DOES_NOT_APPLY: f hunk 1: its @@ line "zz" was not found',
    )
  })
})
