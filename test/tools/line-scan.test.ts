import { writeFileSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { Readable } from 'node:stream'
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { type ScannedLine, scanLines } from '../../src/tools/line-scan.js'
import { tempDir } from './helpers.js'

/** The lines readline gives (what read used before), cut like the scanner cuts them. */
async function readlineLines(content: string, keepChars: number): Promise<{ text: string; cut: boolean }[]> {
  const lines: { text: string; cut: boolean }[] = []
  for await (const raw of createInterface({ input: Readable.from([Buffer.from(content)]), crlfDelay: Infinity })) {
    lines.push({ text: raw.slice(0, keepChars), cut: raw.length > keepChars })
  }
  return lines
}

describe('scanLines', () => {
  const tmp = tempDir()
  const file = join(tmp.dir, 'f.txt')
  afterAll(() => tmp.cleanup())

  async function scan(
    content: string,
    opts: { from: number; to: number; keepChars: number; chunkBytes: number; maxBytes?: number },
  ) {
    writeFileSync(file, content)
    const handle = await open(file)
    try {
      const seen: ScannedLine[] = []
      const result = await scanLines(handle, { maxBytes: Number.MAX_SAFE_INTEGER, ...opts }, (l) => {
        seen.push(l)
        return true
      })
      return { seen, result }
    } finally {
      await handle.close()
    }
  }

  it('gives the lines readline gives — \\n, \\r\\n and lone \\r, multi-byte text, breaks on chunk boundaries — each cut at keepChars', async () => {
    const content = fc.array(fc.constantFrom('a', 'b', '\n', '\r', '€', '😀'), { maxLength: 40 }).map((t) => t.join(''))
    await fc.assert(
      fc.asyncProperty(
        content,
        fc.integer({ min: 1, max: 7 }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 0, max: 6 }),
        async (text, chunkBytes, from, span) => {
          const expected = await readlineLines(text, 3)
          const to = from + span
          const { seen, result } = await scan(text, { from, to, keepChars: 3, chunkBytes })
          expect(seen.map(({ text, cut }) => ({ text, cut }))).toEqual(expected.slice(from - 1, to))
          expect(seen.map((l) => l.number)).toEqual(expected.slice(from - 1, to).map((_, i) => from + i))
          expect(result.more).toBe(expected.length > to)
          expect(result.ended).toBe(expected.length <= to)
          if (result.ended) expect(result.lines).toBe(expected.length)
        },
      ),
      { numRuns: 400 },
    )
  })

  it('stops at maxBytes, handing on the line it stopped in as cut', async () => {
    const { seen, result } = await scan('one\ntwo three four\nfive\n', {
      from: 1,
      to: 10,
      keepChars: 100,
      chunkBytes: 4,
      maxBytes: 10,
    })
    expect(seen).toEqual([
      { number: 1, text: 'one', cut: false },
      { number: 2, text: 'two th', cut: true },
    ])
    expect(result).toEqual({ lines: 1, ended: false, more: false, capped: true })
  })

  it('a visitor that says stop ends the scan, with more to read', async () => {
    writeFileSync(file, 'a\nb\nc\n')
    const handle = await open(file)
    try {
      const result = await scanLines(handle, { from: 1, to: 3, keepChars: 10, maxBytes: 100 }, (l) => l.number < 2)
      expect(result).toEqual({ lines: 1, ended: false, more: true, capped: false })
    } finally {
      await handle.close()
    }
  })
})
