import { createWriteStream, mkdirSync, rmSync, type WriteStream } from 'node:fs'
import { dirname } from 'node:path'
import { MAX_BYTES, MAX_LINES } from './truncate.js'

/**
 * A command's output with bounded memory (docs/SECURITY.md): however much a
 * command prints, the server keeps the first and the last part in memory,
 * streams the whole of it (up to MAX_SAVED_BYTES) to the saved-output file,
 * and reports live progress as only what is new since the last report,
 * bounded per report and per second — so a chatty command never writes the
 * same text into the immutable log again and again.
 */

export const HEAD_CHARS = 10 * 1024
export const TAIL_CHARS = MAX_BYTES - HEAD_CHARS
const HEAD_LINES = MAX_LINES / 10
/** the saved file stops growing here; the tail is still kept */
export const MAX_SAVED_BYTES = 64 * 1024 * 1024
export const PROGRESS_EVERY_MS = 250
export const PROGRESS_MAX_CHARS = 4 * 1024

export interface Progress {
  /** the output since the previous report (its newest PROGRESS_MAX_CHARS) */
  readonly output: string
  /** characters printed since the previous report but left out of it */
  readonly skipped?: number
}

export interface CaptureOptions {
  /** where the full output goes once it outgrows what a result may hold */
  readonly savePath: string
  readonly progress?: (progress: Progress) => void
}

export interface Captured {
  readonly output: string
  readonly truncated: boolean
  readonly outputPath?: string
  readonly bytes: number
  /** the saved file could not be written (a full disk): it was removed, and `output` says so */
  readonly saveError?: string
}

export class OutputCapture {
  private all: string | undefined = '' // everything, until it outgrows a result
  private head = ''
  private tail = ''
  private chars = 0
  private bytes = 0
  private lines = 0
  private file: WriteStream | undefined
  private saved = 0
  private saveError: string | undefined
  private pending = ''
  private skipped = 0
  private lastReport = 0
  private timer: NodeJS.Timeout | undefined

  constructor(private readonly options: CaptureOptions) {}

  /** Takes the next piece of output; false: the saved file is behind, pause the source until `drained()`. */
  write(text: string, live = true): boolean {
    if (text === '') return true
    this.chars += text.length
    this.bytes += Buffer.byteLength(text)
    this.lines += count(text, '\n')
    this.tail = (this.tail + text).slice(-TAIL_CHARS)
    if (this.head.length < HEAD_CHARS) this.head += text.slice(0, HEAD_CHARS - this.head.length)
    if (live) this.queueProgress(text)
    if (this.all !== undefined) {
      this.all += text
      if (this.all.length <= MAX_BYTES && this.lines < MAX_LINES) return true
      this.open()
      text = this.all
      this.all = undefined
    }
    return this.save(text)
  }

  /** Resolves when the saved file has taken what it was given. */
  drained(): Promise<void> {
    return new Promise((resolve) => {
      const file = this.file
      if (!file?.writableNeedDrain || this.saveError !== undefined) return resolve()
      // a file that failed is destroyed: it closes instead of draining
      file.once('drain', resolve)
      file.once('close', resolve)
    })
  }

  /** Sends the last progress, then ends the capture with `trailer` (e.g. the exit status, not live output). */
  async finish(trailer: string): Promise<Captured> {
    clearTimeout(this.timer)
    this.report()
    this.write(trailer, false)
    if (this.all !== undefined) return { output: this.all, truncated: false, bytes: this.bytes }
    if (this.saveError === undefined) {
      await new Promise<void>((resolve) =>
        (this.file as WriteStream).end((err?: Error | null) => {
          if (err) this.failed(err)
          resolve()
        }),
      )
    }
    const head = firstOrLast(this.head, HEAD_LINES, 'head')
    const tail = firstOrLast(this.tail, MAX_LINES - HEAD_LINES - 2, 'tail')
    // Head and tail never overlap: output is cut only past MAX_BYTES (= HEAD_CHARS + TAIL_CHARS) or MAX_LINES lines.
    const omitted = this.chars - head.length - tail.length
    const truncated = `... output truncated: ${omitted} characters omitted here (${this.bytes} bytes, ${this.lines} lines in all).`
    if (this.saveError !== undefined) {
      const note = `${truncated} The full output could not be saved at ${this.options.savePath} (${this.saveError}): the partial file was removed, only the parts shown here are kept.`
      return { output: `${head}\n${note}\n${tail}`, truncated: true, bytes: this.bytes, saveError: this.saveError }
    }
    const savedNote = this.saved < this.bytes ? ` (the first ${MAX_SAVED_BYTES / 1024 / 1024} MiB of it)` : ''
    const note = `${truncated} The full output is saved at ${this.options.savePath}${savedNote} — use read with offset/limit or grep on that file to see the rest.`
    return {
      output: `${head}\n${note}\n${tail}`,
      truncated: true,
      outputPath: this.options.savePath,
      bytes: this.bytes,
    }
  }

  private open(): void {
    try {
      mkdirSync(dirname(this.options.savePath), { recursive: true, mode: 0o700 })
      this.file = createWriteStream(this.options.savePath, { mode: 0o600 })
      this.file.on('error', (err) => this.failed(err))
    } catch (err) {
      this.failed(err as Error)
    }
  }

  /**
   * The saved file cannot be written (ENOSPC: the data dir's filesystem is full). Saving stops and the partial
   * file goes, giving its space back to the log; the capture still keeps the head and tail (docs/BACKUP.md).
   */
  private failed(err: Error): void {
    if (this.saveError !== undefined) return
    this.saveError = err.message
    this.file?.destroy()
    rmSync(this.options.savePath, { force: true })
  }

  private save(text: string): boolean {
    const file = this.file as WriteStream
    if (this.saveError !== undefined || this.saved >= MAX_SAVED_BYTES) return true
    const room = MAX_SAVED_BYTES - this.saved
    const piece = Buffer.byteLength(text) <= room ? text : Buffer.from(text).subarray(0, room).toString()
    this.saved += Buffer.byteLength(piece)
    return file.write(piece)
  }

  private queueProgress(text: string): void {
    if (!this.options.progress) return
    this.pending += text
    if (this.pending.length > PROGRESS_MAX_CHARS) {
      this.skipped += this.pending.length - PROGRESS_MAX_CHARS
      this.pending = this.pending.slice(-PROGRESS_MAX_CHARS)
    }
    if (this.timer) return
    this.timer = setTimeout(() => this.report(), Math.max(0, PROGRESS_EVERY_MS - (Date.now() - this.lastReport)))
  }

  private report(): void {
    this.timer = undefined
    if (!this.options.progress || (this.pending === '' && this.skipped === 0)) return
    this.lastReport = Date.now()
    const progress: Progress = { output: this.pending, ...(this.skipped > 0 && { skipped: this.skipped }) }
    this.pending = ''
    this.skipped = 0
    this.options.progress(progress)
  }
}

function count(text: string, char: string): number {
  let n = 0
  for (let i = text.indexOf(char); i >= 0; i = text.indexOf(char, i + 1)) n++
  return n
}

/** At most `max` lines of `text`: its first ones (head) or its last ones (tail). */
function firstOrLast(text: string, max: number, end: 'head' | 'tail'): string {
  const lines = text.split('\n')
  if (lines.length <= max) return text
  return (end === 'head' ? lines.slice(0, max) : lines.slice(-max)).join('\n')
}
