import type { Root } from 'hast'
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

/**
 * Syntax highlighting for code blocks (docs/WEB.md "Reading"), loaded on
 * demand: src/web/views/code-block.tsx imports this module with a dynamic
 * import(), so the page's first paint neither fetches nor evaluates lowlight
 * and its grammars (esbuild puts them in a chunk of their own). lowlight
 * runs highlight.js's grammars and answers a syntax tree, not HTML; the code
 * block turns it into elements and text nodes itself, so code is never
 * parsed as markup. Only the languages below are bundled (a code block in
 * another language, or none, is shown plain). Nothing here imports the
 * page's own modules (nor preact), so the chunk shares no code with the
 * main one.
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

/** The syntax tree of `code` in `lang`, or undefined when the language is not bundled. */
export function highlightTree(code: string, lang: string): Root | undefined {
  if (!lowlight.registered(lang)) return undefined
  return lowlight.highlight(lang, code)
}
