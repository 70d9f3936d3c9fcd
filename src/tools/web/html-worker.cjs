'use strict'
/*
 * HTML as the model reads it, converted in a worker thread
 * (src/tools/web/html.ts): turning a megabyte of HTML into Markdown takes
 * most of a second, which must not stall the server's event loop. Plain
 * CommonJS on purpose: a worker does not inherit the tsx loader that runs the
 * .ts sources, so this file must load in bare Node.
 *
 * One parse with turndown's own DOM (@mixmark-io/domino), then Markdown
 * through turndown, or plain text by walking the same tree. Scripts, styles
 * and embedded objects are dropped: they are not content, and a page's
 * script is the likeliest place for text meant to steer the model.
 *
 * workerData: { html, format: 'markdown' | 'text' }
 * posts once: the converted text (a string)
 */
const domino = require('@mixmark-io/domino')
const TurndownService = require('turndown')
const { parentPort, workerData } = require('node:worker_threads')

const DROPPED = ['script', 'style', 'noscript', 'template', 'iframe', 'object', 'embed', 'svg', 'canvas', 'head']

/** Elements that stand as paragraphs (a blank line around them), and those that stand on a line of their own. */
const PARAGRAPH = new Set([
  'article',
  'aside',
  'blockquote',
  'details',
  'dl',
  'figure',
  'footer',
  'form',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'header',
  'hr',
  'main',
  'nav',
  'ol',
  'p',
  'pre',
  'section',
  'table',
  'ul',
])
const LINE = new Set(['address', 'dd', 'div', 'dt', 'figcaption', 'li', 'summary', 'tr'])

function bodyOf(html) {
  const doc = domino.createDocument(html)
  for (const tag of DROPPED) for (const el of Array.from(doc.getElementsByTagName(tag))) el.remove()
  return doc.body || doc.documentElement
}

function toMarkdown(html) {
  const turndown = new TurndownService({ headingStyle: 'atx', codeBlockStyle: 'fenced', bulletListMarker: '-' })
  turndown.remove(DROPPED)
  return turndown.turndown(bodyOf(html)).trim()
}

function toText(html) {
  const out = []
  walk(bodyOf(html), out, false)
  // numbers are line breaks wanted between pieces of text: consecutive ones merge into the largest
  let text = ''
  let pending = 0
  for (const piece of out) {
    if (typeof piece === 'number') pending = Math.max(pending, piece)
    else if (pending && !piece.trim()) continue
    else {
      text += (text ? '\n'.repeat(pending) : '') + piece
      pending = 0
    }
  }
  return text
    .split('\n')
    .map((line) => line.replace(/[ \t]+/g, ' ').trim())
    .join('\n')
    .trim()
}

function walk(node, out, pre) {
  for (const child of Array.from(node.childNodes)) {
    if (child.nodeType === 3) {
      const text = child.nodeValue || ''
      out.push(pre ? text : text.replace(/\s+/g, ' '))
      continue
    }
    if (child.nodeType !== 1) continue
    const tag = child.tagName.toLowerCase()
    if (tag === 'br') {
      out.push('\n')
      continue
    }
    const breaks = PARAGRAPH.has(tag) ? 2 : LINE.has(tag) ? 1 : 0
    if (breaks) out.push(breaks)
    if (tag === 'td' || tag === 'th') out.push(' ')
    walk(child, out, pre || tag === 'pre')
    if (breaks) out.push(breaks)
  }
}

const { html, format } = workerData
parentPort.postMessage(format === 'text' ? toText(html) : toMarkdown(html))
