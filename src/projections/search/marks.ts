/**
 * A document's marks (which event each piece of its text came from:
 * [seq, offset, seq, offset…], both ascending) packed small for the index:
 * unsigned LEB128 varints of the differences, so a streamed part costs two
 * or three bytes a delta.
 */

export function packMarks(marks: readonly number[]): Buffer {
  const out: number[] = []
  let seq = 0
  let offset = 0
  for (let i = 0; i + 1 < marks.length; i += 2) {
    varint(out, (marks[i] as number) - seq)
    varint(out, (marks[i + 1] as number) - offset)
    seq = marks[i] as number
    offset = marks[i + 1] as number
  }
  return Buffer.from(out)
}

export function unpackMarks(packed: Uint8Array): number[] {
  const marks: number[] = []
  let seq = 0
  let offset = 0
  let i = 0
  const next = (): number => {
    let value = 0
    let scale = 1
    for (;;) {
      const byte = packed[i++] as number
      value += (byte & 0x7f) * scale
      if (byte < 0x80) return value
      scale *= 128
    }
  }
  while (i < packed.length) {
    seq += next()
    offset += next()
    marks.push(seq, offset)
  }
  return marks
}

function varint(out: number[], value: number): void {
  let v = value
  while (v >= 0x80) {
    out.push((v % 128) | 0x80)
    v = Math.floor(v / 128)
  }
  out.push(v)
}

/** The seq of the event the text at `offset` came from: the last mark at or before it. */
export function seqAt(marks: readonly number[], offset: number): number {
  let seq = marks[0] as number
  for (let i = 0; i + 1 < marks.length && (marks[i + 1] as number) <= offset; i += 2) seq = marks[i] as number
  return seq
}
