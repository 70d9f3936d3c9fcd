'use strict'
/*
 * grep's matcher, run in a worker thread (src/tools/search/grep-search.ts) so
 * that a regex with catastrophic backtracking stalls only this thread, which
 * the main thread terminates at its deadline. Plain CommonJS on purpose: a
 * worker does not inherit the tsx loader that runs the .ts sources, so this
 * file must load in bare Node. It only reads the files it is given and tests
 * their lines; walking and permission checks stay on the main thread.
 *
 * workerData: { source, files, limit, maxLineChars, maxFileBytes }
 * posts once: { matches: string[] (at most limit, "path:line: text"), total: number }
 */
const {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readlinkSync,
  readSync,
  realpathSync,
} = require('node:fs')
const { parentPort, workerData } = require('node:worker_threads')

const { source, files, limit, maxLineChars, maxFileBytes } = workerData
const re = new RegExp(source)
const matches = []
let total = 0
for (const file of files) {
  const text = readText(file, maxFileBytes)
  if (text === undefined) continue
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]
    if (!re.test(line)) continue
    total++
    if (matches.length < limit)
      matches.push(`${file}:${i + 1}: ${line.length > maxLineChars ? `${line.slice(0, maxLineChars)}...` : line}`)
  }
}
parentPort.postMessage({ matches, total })

/**
 * The file's text, or undefined to skip it: not a regular file (checked on the
 * descriptor, opened non-blocking so a FIFO swapped in cannot hang us), not the
 * file its real path names (a name on the way swapped for a link since the
 * walk: the files are real paths, confined before they come here; checked as
 * src/tools/opened-path.ts checks, which this worker cannot import), larger than
 * the cap, unreadable, or binary (a NUL in the first 4 KB).
 */
function readText(file, cap) {
  let fd
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY)
  } catch {
    return undefined
  }
  try {
    const stat = fstatSync(fd)
    if (!stat.isFile() || stat.size > cap) return undefined
    if (openedPath(fd, file, stat) !== file) return undefined
    const buf = Buffer.allocUnsafe(stat.size)
    let length = 0
    while (length < buf.length) {
      const n = readSync(fd, buf, length, buf.length - length, length)
      if (n === 0) break
      length += n
    }
    const data = buf.subarray(0, length)
    if (data.subarray(0, 4096).includes(0)) return undefined
    return data.toString('utf8')
  } catch {
    return undefined
  } finally {
    closeSync(fd)
  }
}

/** src/tools/opened-path.ts realPathOfOpened */
function openedPath(fd, path, opened) {
  try {
    return readlinkSync(`/proc/self/fd/${fd}`)
  } catch {
    try {
      const real = realpathSync(path)
      const named = lstatSync(real)
      return named.ino === opened.ino && named.dev === opened.dev ? real : undefined
    } catch {
      return undefined
    }
  }
}
