import type { Element, ElementContent, Root } from 'hast'
import { type ComponentChild, h } from 'preact'
import { useEffect, useMemo, useRef, useState } from 'preact/hooks'

type Highlighter = typeof import('../highlight.js')

/** characters of code highlighted at most; longer code is shown plain */
export const MAX_CODE = 50_000

/** The highlighter once its chunk has arrived (src/web/highlight.ts), and its one load. */
let highlighter: Highlighter | undefined
let loading: Promise<Highlighter> | undefined

/**
 * Loads the highlighter's chunk once, the first time a code block that
 * names a language is drawn: a first paint does not wait for it.
 */
function loadHighlighter(): Promise<Highlighter> {
  loading ??= import('../highlight.js').then(
    (mod) => {
      highlighter = mod
      return mod
    },
    (err: unknown) => {
      loading = undefined // a later code block tries again
      throw err
    },
  )
  return loading
}

/** The language a fence names (its first word, lower case), or undefined. */
function languageOf(lang: string | undefined): string | undefined {
  return lang?.trim().split(/\s/)[0]?.toLowerCase() || undefined
}

/** The highlighted nodes of `code`, or undefined when its language is not bundled or the code too long. */
function highlight(mod: Highlighter, code: string, name: string | undefined): ComponentChild[] | undefined {
  if (!name || code.length > MAX_CODE) return undefined
  return mod.highlightTree(code, name)?.children.map(toNode)
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

/**
 * A fenced code block from the model's Markdown: highlighted when its
 * language is one the page bundles (src/web/highlight.ts) — drawn plain
 * first, highlighted when the highlighter's chunk has arrived — with its language
 * named and a Copy button that puts the code — the text, not the markup — on
 * the clipboard. Where the clipboard API is missing (a page served over plain
 * HTTP from another host is not a secure context) the button selects the code
 * so the user can copy it, and says so.
 */
export function CodeBlock({ code, lang }: { code: string; lang?: string | undefined }) {
  const name = languageOf(lang)
  const wanted = name !== undefined && code.length <= MAX_CODE
  const [mod, setMod] = useState<Highlighter | undefined>(highlighter)
  useEffect(() => {
    if (!wanted || mod) return
    let live = true
    loadHighlighter().then(
      (loaded) => {
        if (live) setMod(loaded)
      },
      () => {}, // no highlighter (the chunk failed to load): the code stays plain
    )
    return () => {
      live = false
    }
  }, [wanted, mod])
  const nodes = useMemo(() => (mod ? highlight(mod, code, name) : undefined), [mod, code, name])
  const [copied, setCopied] = useState<string>('')
  const pre = useRef<HTMLPreElement>(null)
  const copy = async () => {
    try {
      if (!navigator.clipboard) throw new Error('no clipboard')
      await navigator.clipboard.writeText(code)
      setCopied('Copied')
    } catch {
      const el = pre.current
      if (el) window.getSelection()?.selectAllChildren(el)
      setCopied('Selected: press Ctrl+C to copy')
    }
    setTimeout(() => setCopied(''), 2000)
  }
  const language = lang?.trim().split(/\s/)[0]
  return (
    <div class="code-block">
      <div class="code-head">
        <span class="code-lang">{language || 'text'}</span>
        <span class="code-copied" role="status">
          {copied}
        </span>
        <button type="button" class="small" aria-label={`Copy ${language || 'code'} code`} onClick={() => void copy()}>
          Copy
        </button>
      </div>
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a block that scrolls sideways must be reachable by keyboard to scroll it */}
      <pre ref={pre} class={nodes ? 'hljs' : undefined} tabIndex={0}>
        <code>{nodes ?? code}</code>
      </pre>
    </div>
  )
}
