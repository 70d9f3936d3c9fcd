import { type Token, type Tokens, lexer } from 'marked'
import type { ComponentChild } from 'preact'
import { useState } from 'preact/hooks'
import { formatBytes } from './ui.js'
import { CodeBlock } from './views/code-block.js'

/**
 * The model's Markdown as elements (docs/WEB.md "Reading"). `marked` only
 * lexes (GFM: tables, task lists, strikethrough, autolinks); the tokens are
 * turned into Preact elements here, so nothing the model writes is ever
 * parsed as HTML: raw HTML in its text is shown as text, an image is a link
 * that loads nothing, and only http(s) and mailto destinations become links,
 * each opening a new tab with `rel="noopener noreferrer"`. No element gets a
 * style or an event handler from the text, so the page's CSP holds.
 *
 * A text longer than MAX_MARKDOWN is shown as plain text, its first
 * MAX_MARKDOWN characters until "Show all" — a 5 MB answer costs neither a
 * parse per frame nor a 5 MB layout until asked.
 */

export const MAX_MARKDOWN = 64 * 1024

export function Markdown({ text }: { text: string }) {
  if (text.length > MAX_MARKDOWN) return <LongText text={text} />
  const tokens = lexer(text, { gfm: true })
  return <>{blocks(tokens, headingLevels(tokens))}</>
}

/**
 * The page owns h1; the text's headings go from h2 down, its distinct depths
 * made consecutive (a text with only `##` and `####` gets h2 and h3), so the
 * page's outline never skips a level whatever the model wrote.
 */
type Levels = ReadonlyMap<number, number>

function headingLevels(tokens: readonly Token[]): Levels {
  const depths = new Set<number>()
  const walk = (list: readonly Token[]) => {
    for (const t of list as Tokens.Generic[]) {
      if (t.type === 'heading') depths.add(t.depth as number)
      if (t.type === 'blockquote' && t.tokens) walk(t.tokens)
      if (t.type === 'list') for (const item of (t as Tokens.List).items) walk(item.tokens)
    }
  }
  walk(tokens)
  return new Map([...depths].sort((a, b) => a - b).map((d, i) => [d, Math.min(6, i + 2)]))
}

function LongText({ text }: { text: string }) {
  const [all, setAll] = useState(false)
  return (
    <div class="long-text">
      <p class="note">
        A long text ({formatBytes(new TextEncoder().encode(text).length)}), shown as plain text
        {!all && `: its first ${formatBytes(MAX_MARKDOWN)}`}.{' '}
        {!all && (
          <button type="button" class="link" onClick={() => setAll(true)}>
            Show all
          </button>
        )}
      </p>
      <div class="plain">{all ? text : `${text.slice(0, MAX_MARKDOWN)}…`}</div>
    </div>
  )
}

function blocks(tokens: readonly Token[], levels: Levels): ComponentChild[] {
  return tokens.map((t, i) => block(t, i, levels))
}

function block(token: Token, key: number, levels: Levels): ComponentChild {
  const t = token as Tokens.Generic
  switch (t.type) {
    case 'space':
    case 'def':
    case 'checkbox': // a task item's box is drawn by its list
      return null
    case 'paragraph':
      return <p key={key}>{inline(t.tokens)}</p>
    case 'heading': {
      const Tag = `h${levels.get(t.depth as number) ?? 6}` as 'h3'
      return (
        <Tag key={key} class="md-heading">
          {inline(t.tokens)}
        </Tag>
      )
    }
    case 'code':
      return <CodeBlock key={key} code={t.text as string} lang={t.lang as string | undefined} />
    case 'blockquote':
      return <blockquote key={key}>{blocks(t.tokens ?? [], levels)}</blockquote>
    case 'list': {
      const list = t as Tokens.List
      const items = list.items.map((item, i) => (
        <li key={i}>
          {item.task && <span class="task">{item.checked ? '☑ ' : '☐ '}</span>}
          {item.loose ? blocks(item.tokens, levels) : item.tokens.map((t, j) => tight(t, j, levels))}
        </li>
      ))
      return list.ordered ? (
        <ol key={key} start={typeof list.start === 'number' ? list.start : undefined}>
          {items}
        </ol>
      ) : (
        <ul key={key}>{items}</ul>
      )
    }
    case 'table': {
      const table = t as Tokens.Table
      return (
        <div key={key} class="md-table">
          <table>
            <thead>
              <tr>
                {table.header.map((cell, i) => (
                  <th key={i} class={alignClass(cell.align)}>
                    {inline(cell.tokens)}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {table.rows.map((row, r) => (
                <tr key={r}>
                  {row.map((cell, i) => (
                    <td key={i} class={alignClass(cell.align)}>
                      {inline(cell.tokens)}
                    </td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )
    }
    case 'hr':
      return <hr key={key} />
    case 'html':
      // the model's HTML, as the text it is
      return (
        <p key={key} class="raw-html">
          {t.raw}
        </p>
      )
    case 'text':
      return <p key={key}>{t.tokens ? inline(t.tokens) : decode(t.text as string)}</p>
    default:
      return <p key={key}>{t.raw}</p>
  }
}

/** A tight list item's content: its text inline, nested lists as blocks. */
function tight(token: Token, key: number, levels: Levels): ComponentChild {
  const t = token as Tokens.Generic
  if (t.type === 'text') return <span key={key}>{t.tokens ? inline(t.tokens) : decode(t.text as string)}</span>
  return block(token, key, levels)
}

function inline(tokens: readonly Token[] | undefined): ComponentChild[] {
  return (tokens ?? []).map(span)
}

function span(token: Token, key: number): ComponentChild {
  const t = token as Tokens.Generic
  switch (t.type) {
    case 'text':
      return t.tokens ? <span key={key}>{inline(t.tokens)}</span> : decode(t.text as string)
    case 'escape':
      return decode(t.text as string)
    case 'strong':
      return <strong key={key}>{inline(t.tokens)}</strong>
    case 'em':
      return <em key={key}>{inline(t.tokens)}</em>
    case 'del':
      return <del key={key}>{inline(t.tokens)}</del>
    case 'codespan':
      return <code key={key}>{t.text as string}</code>
    case 'br':
      return <br key={key} />
    case 'link': {
      const href = safeHref(t.href as string)
      const label = t.autolink ? (t.text as string) : inline(t.tokens)
      if (!href) return <span key={key}>{t.raw}</span>
      return (
        <a key={key} href={href} target="_blank" rel="noopener noreferrer">
          {label}
        </a>
      )
    }
    case 'image': {
      // a link to the image, not the image: the model's text loads nothing by itself
      const href = safeHref(t.href as string)
      const label = `image: ${(t.text as string) || (t.href as string)}`
      if (!href) return <span key={key}>{t.raw}</span>
      return (
        <a key={key} href={href} target="_blank" rel="noopener noreferrer" class="md-image">
          {label}
        </a>
      )
    }
    case 'checkbox':
      return null
    default:
      return t.raw
  }
}

/** The destination as a link, when it is an absolute http(s) or mailto URL; undefined otherwise. */
export function safeHref(href: string): string | undefined {
  let url: URL
  try {
    url = new URL(href)
  } catch {
    return undefined
  }
  return url.protocol === 'https:' || url.protocol === 'http:' || url.protocol === 'mailto:' ? url.href : undefined
}

function alignClass(align: string | null): string | undefined {
  return align ? `align-${align}` : undefined
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'", apos: "'" }

/** marked keeps character references in text (its HTML renderer would resolve them); a text node resolves these few. */
function decode(text: string): string {
  return text.includes('&')
    ? text.replace(/&(amp|lt|gt|quot|#39|apos);/g, (entity: string, name: string) => ENTITIES[name] ?? entity)
    : text
}
