import { formatBytes } from './ui.js'

/**
 * Files a person attaches in the composer (picker, drag and drop, paste),
 * sent as file parts of `input.submit` (docs/API.md "Input"): the content as
 * a `data:` URL with its media type and file name. Only images and PDFs are
 * taken — what a model reads as a file (src/runtime/loop/chat-messages.ts);
 * anything else is refused here with a reason, before it is read.
 *
 * The whole input must fit the server's input limit (`limits.inputBytes`,
 * default 256 KB, counted on the parts' JSON). The page checks the encoded
 * size against that default, and a `PAYLOAD_TOO_LARGE` refusal, which names
 * the server's own limit, replaces it: the next check uses the real one.
 */

export interface Attachment {
  readonly name: string
  readonly mediaType: string
  /** the file's size in bytes */
  readonly size: number
  readonly url: string
}

export const DEFAULT_INPUT_LIMIT = 256 * 1024

let inputLimit = DEFAULT_INPUT_LIMIT

export function currentInputLimit(): number {
  return inputLimit
}

/** The limit a PAYLOAD_TOO_LARGE refusal named (its `limit` detail). */
export function learnInputLimit(error: unknown): void {
  const limit = (error as { details?: { limit?: unknown } } | undefined)?.details?.limit
  if (typeof limit === 'number' && limit > 0) inputLimit = limit
}

export function accepted(mediaType: string): boolean {
  return /^image\/(png|jpeg|gif|webp)$/.test(mediaType) || mediaType === 'application/pdf'
}

/** What the attachment adds to the input's size: its data URL (base64, a third larger than the file). */
export function encodedBytes(attachments: readonly Attachment[]): number {
  return attachments.reduce((sum, a) => sum + a.url.length + a.name.length + a.mediaType.length + 50, 0)
}

/** Reads a file the person chose; a refusal (type, size) as an Error whose message says why. */
export async function readAttachment(file: File, already: readonly Attachment[]): Promise<Attachment> {
  const mediaType = file.type || 'application/octet-stream'
  if (!accepted(mediaType))
    throw new Error(`${file.name}: only images (PNG, JPEG, GIF, WebP) and PDFs can be attached, not ${mediaType}`)
  const room = inputLimit - encodedBytes(already)
  if (Math.ceil(file.size / 3) * 4 > room)
    throw new Error(
      `${file.name} is ${formatBytes(file.size)}: attachments may take ${formatBytes(Math.max(0, Math.floor((room * 3) / 4)))} more (the input limit is ${formatBytes(inputLimit)})`,
    )
  const url = await new Promise<string>((resolve, reject) => {
    const reader = new FileReader()
    reader.onload = () => resolve(String(reader.result))
    reader.onerror = () => reject(reader.error ?? new Error(`${file.name} could not be read`))
    reader.readAsDataURL(file)
  })
  return { name: file.name, mediaType, size: file.size, url }
}
