import { useMemo, useRef, useState } from 'preact/hooks'
import { highlight } from '../highlight.js'

/**
 * A fenced code block from the model's Markdown: highlighted when its
 * language is one the page bundles (src/web/highlight.ts), with its language
 * named and a Copy button that puts the code — the text, not the markup — on
 * the clipboard. Where the clipboard API is missing (a page served over plain
 * HTTP from another host is not a secure context) the button selects the code
 * so the user can copy it, and says so.
 */
export function CodeBlock({ code, lang }: { code: string; lang?: string | undefined }) {
  const nodes = useMemo(() => highlight(code, lang), [code, lang])
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
