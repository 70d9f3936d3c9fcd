import { createRequire } from 'node:module'
import { Language, Parser, type TreeCursor } from 'web-tree-sitter'

/**
 * The bash grammar (tree-sitter-bash), and the only module that touches it.
 *
 * The grammar is a wasm module that loads asynchronously, once per process:
 * the top-level await here lets every caller stay synchronous.
 */
await Parser.init()
const bash = await Language.load(createRequire(import.meta.url).resolve('tree-sitter-bash/tree-sitter-bash.wasm'))
const parser = new Parser()
parser.setLanguage(bash)

/**
 * A syntax node copied out of the wasm tree into plain objects: one pass
 * with a cursor is far cheaper than crossing into wasm for every question,
 * and nothing is left to free.
 */
export interface ShellNode {
  readonly type: string
  /** named in the grammar; anonymous nodes are punctuation and keywords (`"`, `$`, `<<`, `then`) */
  readonly named: boolean
  /** the field this node fills in its parent: `name`, `argument`, `redirect`, `body`, `value`… */
  readonly field: string | null
  readonly text: string
  /** offset of the node in the parsed text */
  readonly start: number
  readonly children: readonly ShellNode[]
}

export interface ShellTree {
  readonly root: ShellNode
  /** the grammar found a syntax error (and recovered around it) */
  readonly error: boolean
}

/** The grammar's tree for `text`, as is; undefined when the parser gave up. */
export function parseTree(text: string): ShellTree | undefined {
  const tree = parser.parse(text)
  if (!tree) return undefined
  const cursor = tree.walk()
  try {
    return { root: copy(cursor, text), error: tree.rootNode.hasError }
  } finally {
    cursor.delete()
    tree.delete()
  }
}

export function namedChildren(node: ShellNode): ShellNode[] {
  return node.children.filter((c) => c.named)
}

export function childrenByField(node: ShellNode, field: string): ShellNode[] {
  return node.children.filter((c) => c.field === field)
}

export function childByField(node: ShellNode, field: string): ShellNode | undefined {
  return node.children.find((c) => c.field === field)
}

export function endOf(node: ShellNode): number {
  return node.start + node.text.length
}

// Each cursor read is a call into wasm: types, namedness and fields are looked up by id here instead.
const typeNames = bash.types
const fieldNames = bash.fields
const namedTypes = typeNames.map((_, id) => bash.nodeTypeIsNamed(id))

function copy(cursor: TreeCursor, source: string): ShellNode {
  const start = cursor.startIndex
  const typeId = cursor.nodeTypeId
  const node = {
    type: typeNames[typeId] ?? 'ERROR',
    named: namedTypes[typeId] ?? true,
    field: fieldNames[cursor.currentFieldId] ?? null,
    text: source.slice(start, cursor.endIndex),
    start,
    children: [] as ShellNode[],
  }
  if (cursor.gotoFirstChild()) {
    do node.children.push(copy(cursor, source))
    while (cursor.gotoNextSibling())
    cursor.gotoParent()
  }
  return node
}
