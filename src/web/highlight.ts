import type { Element, ElementContent, Root } from 'hast'
import bash from 'highlight.js/lib/languages/bash'
import c from 'highlight.js/lib/languages/c'
import cpp from 'highlight.js/lib/languages/cpp'
import css from 'highlight.js/lib/languages/css'
import diff from 'highlight.js/lib/languages/diff'
import go from 'highlight.js/lib/languages/go'
import java from 'highlight.js/lib/languages/java'
import javascript from 'highlight.js/lib/languages/javascript'
import json from 'highlight.js/lib/languages/json'
import markdown from 'highlight.js/lib/languages/markdown'
import python from 'highlight.js/lib/languages/python'
import rust from 'highlight.js/lib/languages/rust'
import sql from 'highlight.js/lib/languages/sql'
import typescript from 'highlight.js/lib/languages/typescript'
import xml from 'highlight.js/lib/languages/xml'
import yaml from 'highlight.js/lib/languages/yaml'
import { createLowlight } from 'lowlight'
import { type ComponentChild, h } from 'preact'

/**
 * Syntax highlighting for code blocks (docs/WEB.md "Reading"). lowlight runs
 * highlight.js's grammars and answers a syntax tree, not HTML, so the page
 * turns it into elements and text nodes itself: code is never parsed as
 * markup. Only the languages below are bundled (a code block in another
 * language, or none, is shown plain) and only a block up to MAX_CODE is
 * highlighted, so a huge block costs its text and nothing more.
 */

const lowlight = createLowlight({
  bash,
  c,
  cpp,
  css,
  diff,
  go,
  java,
  javascript,
  json,
  markdown,
  python,
  rust,
  sql,
  typescript,
  xml,
  yaml,
})
lowlight.registerAlias({
  bash: ['sh', 'shell', 'zsh', 'console'],
  javascript: ['js', 'jsx', 'mjs', 'cjs'],
  typescript: ['ts', 'tsx', 'mts'],
  python: ['py'],
  xml: ['html', 'svg'],
  yaml: ['yml'],
  markdown: ['md'],
  rust: ['rs'],
  cpp: ['c++', 'cc', 'hpp'],
})

/** characters of code highlighted at most; longer code is shown plain */
export const MAX_CODE = 50_000

/** The highlighted nodes of `code` in `lang`, or undefined when the language is not bundled or the code too long. */
export function highlight(code: string, lang: string | undefined): ComponentChild[] | undefined {
  const name = lang?.trim().split(/\s/)[0]?.toLowerCase()
  if (!name || code.length > MAX_CODE || !lowlight.registered(name)) return undefined
  const tree: Root = lowlight.highlight(name, code)
  return tree.children.map(toNode)
}

function toNode(node: Root['children'][number] | ElementContent): ComponentChild {
  if (node.type === 'text') return node.value
  if (node.type !== 'element') return null
  const el = node as Element
  const names = el.properties.className
  const className = Array.isArray(names) ? names.filter((n) => typeof n === 'string').join(' ') : undefined
  // only spans with highlight.js's class names: nothing else is made from the tree
  return h('span', { class: className }, el.children.map(toNode))
}
