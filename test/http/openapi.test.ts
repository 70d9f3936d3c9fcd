import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Ajv, type ValidateFunction } from 'ajv'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { routesOf } from '../../src/http/app.js'
import { startServer, type TestServer } from './helpers.js'

/**
 * The OpenAPI document (GET /openapi.json) is the contract, held against the
 * real server: (a) it is well-formed OpenAPI 3.0 with an operationId, tags,
 * success and problem responses on every operation, and names every route
 * the app serves; (b) every operation in it is called over a real socket —
 * successes and errors — and every answer is checked against it: the status
 * must be listed, the content type the listed one, and the body valid for
 * that status's schema (ajv, with the document's components).
 */

// ── the document's shape (the subset of OpenAPI 3.0 it uses) ─────────────

type Schema = Record<string, unknown>
interface Media {
  schema?: Schema
}
interface Answer {
  description?: string
  content?: Record<string, Media>
}
interface Parameter {
  in: string
  name: string
  required?: boolean
  schema?: Schema
}
interface Operation {
  operationId?: string
  summary?: string
  tags?: string[]
  security?: unknown[]
  parameters?: Parameter[]
  requestBody?: { required?: boolean; content?: Record<string, Media> }
  responses?: Record<string, Answer>
}
interface Document {
  openapi: string
  info: { title?: unknown; version?: unknown }
  paths: Record<string, Record<string, Operation>>
  components: { schemas: Record<string, Schema>; securitySchemes?: Record<string, unknown> }
  security?: unknown[]
}

interface Located {
  readonly method: string
  readonly path: string
  readonly operation: Operation
}

/** Routes the document leaves out, on purpose (docs/API.md "The OpenAPI document"). */
// GET /metrics answers Prometheus text, not JSON: docs/API.md and docs/OBSERVABILITY.md describe it
const UNDOCUMENTED = [
  'GET /ws',
  'GET /openapi.json',
  'GET /',
  'GET /login',
  'GET /assets/*',
  'GET /mcp/oauth/callback',
  'GET /metrics',
  // a cluster's nodes: only a node of one answers it (test/cluster/failover.postgres.test.ts calls it)
  'GET /cluster',
]
const METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'])
const PROBLEM_REF = '#/components/schemas/Problem'

function operationsOf(doc: Document): Located[] {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, operation]) => ({ method, path, operation })),
  )
}

function refsIn(value: unknown): string[] {
  return [...JSON.stringify(value).matchAll(/"\$ref":"([^"]*)"/g)].map((m) => m[1] as string)
}

/** What is wrong with the document as OpenAPI 3.0 and as this API's contract (empty: nothing). */
function structuralProblems(doc: Document): string[] {
  const out: string[] = []
  if (!/^3\.0\.\d+$/.test(doc.openapi)) out.push(`openapi is ${doc.openapi}, not 3.0.x`)
  if (typeof doc.info?.title !== 'string' || typeof doc.info?.version !== 'string')
    out.push('info needs a title and a version')
  if (JSON.stringify(doc.components?.securitySchemes?.bearer) !== '{"type":"http","scheme":"bearer"}')
    out.push('no bearer security scheme')
  if (JSON.stringify(doc.security) !== '[{"bearer":[]}]') out.push('the bearer token is not required by default')
  for (const ref of refsIn(doc)) {
    const id = /^#\/components\/schemas\/(.+)$/.exec(ref)?.[1]
    if (id === undefined || !doc.components.schemas[id]) out.push(`$ref ${ref} resolves to nothing`)
  }
  const problem = doc.components.schemas.Problem
  if (JSON.stringify(problem?.required) !== '["type","title","status","code","detail"]')
    out.push('the Problem component does not require type, title, status, code and detail')

  const ids = new Map<string, string>()
  for (const { method, path, operation: op } of operationsOf(doc)) {
    const where = `${method.toUpperCase()} ${path}`
    if (!METHODS.has(method)) out.push(`${where}: ${method} is not an HTTP method`)
    if (!path.startsWith('/') || path.includes(':')) out.push(`${where}: not an OpenAPI path template`)
    const id = op.operationId
    if (id === undefined || !/^[a-z][A-Za-z0-9]*$/.test(id)) out.push(`${where}: operationId ${id} is not camelCase`)
    else if (ids.has(id)) out.push(`${where}: operationId ${id} is also ${ids.get(id)}'s`)
    else ids.set(id, where)
    if (!op.summary) out.push(`${where}: no summary`)
    if (!op.tags?.length || op.tags.some((t) => typeof t !== 'string')) out.push(`${where}: no tags`)

    const params = op.parameters ?? []
    const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1])
    for (const name of templated) {
      if (!params.some((p) => p.in === 'path' && p.name === name && p.required === true && p.schema))
        out.push(`${where}: path parameter ${name} is not described as required`)
    }
    for (const p of params) {
      if (!['path', 'query', 'header', 'cookie'].includes(p.in) || !p.schema)
        out.push(`${where}: parameter ${p.name} is malformed`)
      if (p.in === 'path' && !templated.includes(p.name)) out.push(`${where}: ${p.name} is not in the path`)
    }
    const body = op.requestBody?.content?.['application/json']?.schema
    if (op.requestBody && !body) out.push(`${where}: the request body has no application/json schema`)
    if (op.requestBody && op.requestBody.required !== (body?.nullable !== true))
      out.push(`${where}: the request body is required, or not, against its schema's nullable`)

    const responses = op.responses ?? {}
    const codes = Object.keys(responses)
    if (!codes.some((c) => c.startsWith('2'))) out.push(`${where}: no success response`)
    for (const [code, answer] of Object.entries(responses)) {
      if (!/^[1-5]\d\d$/.test(code)) out.push(`${where}: response ${code} is not a status code`)
      if (!answer.description) out.push(`${where} ${code}: no description`)
      const media = Object.keys(answer.content ?? {})
      // a success is JSON, or a file a download gets (the export's JSON lines, or its ATIF document as JSON)
      const download = code.startsWith('2') && media[0] === 'application/x-ndjson'
      const expected = code.startsWith('2')
        ? download
          ? 'application/x-ndjson'
          : 'application/json'
        : 'application/problem+json'
      const others = download
        ? media.slice(1).filter((m) => m === 'application/json' && answer.content?.[m]?.schema)
        : []
      if (code === '204') {
        if (answer.content !== undefined) out.push(`${where} 204: has content`)
      } else if (media.length !== 1 + others.length || media[0] !== expected || !answer.content?.[expected]?.schema)
        out.push(`${where} ${code}: content is ${media.join(', ') || 'missing'}, not one ${expected} schema`)
      if (!code.startsWith('2') && answer.content?.[expected]?.schema?.$ref !== PROBLEM_REF)
        out.push(`${where} ${code}: not a Problem`)
    }
    const needs = ['403', '500']
    if (JSON.stringify(op.security) !== '[]') needs.push('401')
    if (params.length > 0 || op.requestBody) needs.push('400')
    if (method === 'post' || method === 'delete') needs.push('413', '415')
    for (const code of needs) if (!responses[code]) out.push(`${where}: no ${code} response`)
  }
  return out
}

// ── answers against the document ─────────────────────────────────────────

/** Holds real answers against the document and remembers which statuses each operation answered. */
class Conformance {
  readonly answered = new Map<string, Set<number>>()
  private readonly ajv = new Ajv({ allErrors: true, strict: true })
  private readonly compiled = new Map<Schema, ValidateFunction>()
  readonly operations: Map<string, Located>

  constructor(readonly doc: Document) {
    this.operations = new Map(operationsOf(doc).map((o) => [o.operation.operationId ?? '', o]))
    this.ajv.addSchema({ $id: 'components', definitions: local(doc.components.schemas) })
  }

  /** Every response schema, compiled (ajv's strict mode refuses a malformed schema or an unknown keyword). */
  compileAll(): void {
    for (const { operation } of this.operations.values())
      for (const answer of Object.values(operation.responses ?? {}))
        for (const media of Object.values(answer.content ?? {})) if (media.schema) this.validator(media.schema)
  }

  /** What is wrong with an answer to an operation (empty: it is one the document describes). */
  check(operationId: string, status: number, contentType: string | null, body: unknown): string[] {
    const located = this.operations.get(operationId)
    if (!located) return [`${operationId} is not in the document`]
    const answer = located.operation.responses?.[String(status)]
    if (!answer) return [`${operationId} answered ${status}, which the document does not list`]
    const type = contentType?.split(';')[0]?.trim()
    const listed = Object.entries(answer.content ?? {})
    // a download may come in one of its formats (the export: JSON lines, or ATIF as JSON); anything else, in one
    const [media, described] = listed.find(([m]) => m === type) ?? listed[0] ?? []
    if (type !== media) return [`${operationId} ${status}: content type ${type}, the document says ${media}`]
    const validate = described?.schema && this.validator(described.schema)
    if (validate && !validate(body))
      return (validate.errors ?? []).map((e) => `${operationId} ${status}: body${e.instancePath} ${e.message}`)
    return []
  }

  record(operationId: string, status: number): void {
    const seen = this.answered.get(operationId) ?? new Set<number>()
    seen.add(status)
    this.answered.set(operationId, seen)
  }

  private validator(schema: Schema): ValidateFunction {
    let validate = this.compiled.get(schema)
    if (!validate) {
      validate = this.ajv.compile(local(schema))
      this.compiled.set(schema, validate)
    }
    return validate
  }
}

/** The document's `#/components/schemas/X` as a reference into the schema ajv holds as `components`. */
function local(schema: object): Schema {
  return JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', '"components#/definitions/'))
}

// ── the server, and a scripted model that writes files and asks for a permission ──

const SCRIPT = {
  steps: [
    {
      when: { afterToolResult: false, userContains: 'first' },
      toolCalls: [{ id: 'call_1', name: 'write', input: { filePath: 'notes.md', content: 'first draft\n' } }],
    },
    {
      when: { afterToolResult: false, userContains: 'second' },
      toolCalls: [{ id: 'call_2', name: 'write', input: { filePath: 'notes.md', content: 'second draft\n' } }],
    },
    {
      when: { afterToolResult: false, userContains: 'shell' },
      toolCalls: [{ id: 'call_3', name: 'bash', input: { command: 'echo from-bash', description: 'say hi' } }],
    },
    { when: { afterToolResult: true }, text: 'Done.' },
    { when: { afterToolResult: false }, text: 'Hi.' },
  ],
}

let server: TestServer
let conformance: Conformance
let work: string
let model: string

beforeAll(async () => {
  server = await startServer(
    { CHRONICLE_LOG_LEVEL: 'warn' },
    { config: { rules: [{ permission: 'edit', pattern: '*', action: 'allow' }] } },
  )
  work = join(server.dir, 'work')
  mkdirSync(work)
  writeFileSync(join(work, 'README.md'), '# project\n')
  const script = join(server.dir, 'script.json')
  writeFileSync(script, JSON.stringify(SCRIPT))
  model = `scripted:${script}`
  const res = await fetch(`${server.url}/openapi.json`, { headers: { authorization: `Bearer ${server.token}` } })
  expect(res.status).toBe(200)
  conformance = new Conformance((await res.json()) as Document)
})
afterAll(async () => {
  await server.close()
})

interface Request {
  readonly params?: Record<string, string>
  readonly query?: Record<string, string | number | boolean>
  readonly body?: unknown
  /** a body sent as is, with its content type */
  readonly raw?: { readonly type: string; readonly data: string }
  /** another token, or null for none */
  readonly token?: string | null
  readonly origin?: string
}

/** Calls an operation, found by its operationId in the document, and holds the answer against the document. */
async function call(operationId: string, request: Request = {}): Promise<{ status: number; body: any }> {
  const located = conformance.operations.get(operationId)
  if (!located) throw new Error(`${operationId} is not in the document`)
  const path = located.path.replace(/\{(\w+)\}/g, (_, name: string) =>
    encodeURIComponent(request.params?.[name] ?? `${name}_missing`),
  )
  const search = new URLSearchParams()
  for (const [name, value] of Object.entries(request.query ?? {})) search.set(name, String(value))
  const query = search.toString()
  const token = request.token === undefined ? server.token : request.token
  const headers: Record<string, string> = {
    ...(token !== null && { authorization: `Bearer ${token}` }),
    ...(request.origin !== undefined && { origin: request.origin }),
    ...(request.body !== undefined && { 'content-type': 'application/json' }),
    ...(request.raw && { 'content-type': request.raw.type }),
  }
  const res = await fetch(`${server.url}${path}${query ? `?${query}` : ''}`, {
    method: located.method.toUpperCase(),
    headers,
    ...(request.body !== undefined && { body: JSON.stringify(request.body) }),
    ...(request.raw && { body: request.raw.data }),
  })
  const text = await res.text()
  // JSON answers are parsed; a file (the export) is checked as the text it is
  const json = /^application\/(?:[\w.-]+\+)?json\b/.test(res.headers.get('content-type') ?? '')
  const body = text === '' ? undefined : json ? JSON.parse(text) : text
  conformance.record(operationId, res.status)
  expect(conformance.check(operationId, res.status, res.headers.get('content-type'), body)).toEqual([])
  return { status: res.status, body }
}

/** The session once it is idle with nothing waiting (a run, or the snapshots after it, may still be writing). */
async function settled(id: string): Promise<{ lastSeq: number; pendingPermissions: { requestId: string }[] }> {
  for (;;) {
    const { body } = await call('getSession', { params: { id } })
    const s = body.session
    if (s.status === 'idle' && s.inbox.length === 0 && !s.restoring) return s
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

async function untilAsked(id: string): Promise<string> {
  for (;;) {
    const { body } = await call('getSession', { params: { id } })
    const [pending] = body.session.pendingPermissions as { requestId: string }[]
    if (pending) return pending.requestId
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const text = (t: string) => ({ parts: [{ type: 'text', text: t }] })
const FOREIGN = 'https://evil.example'

describe('the document', () => {
  it('is well-formed OpenAPI 3.0, and every operation has an operationId, tags, success and problem responses', () => {
    expect(structuralProblems(conformance.doc)).toEqual([])
    conformance.compileAll()
  })

  it('names every route the app serves, but the WebSocket upgrade and itself', () => {
    const served = routesOf(server.chronicle.app)
      .map((r) => `${r.method} ${r.url}`)
      .filter((r) => !UNDOCUMENTED.includes(r))
      .sort()
    const documented = operationsOf(conformance.doc)
      .map((o) => `${o.method.toUpperCase()} ${o.path.replace(/\{(\w+)\}/g, ':$1')}`)
      .sort()
    expect(documented).toEqual(served)
  })

  it('its checks can fail: a broken document, an unlisted status, a wrong content type or body are refused', () => {
    const broken = structuredClone(conformance.doc)
    const getSession = broken.paths['/sessions/{id}']?.get
    const archive = broken.paths['/sessions/{id}']?.delete
    if (!getSession || !archive?.responses) throw new Error('no /sessions/{id}')
    getSession.operationId = 'archiveSession'
    delete archive.responses['401']
    expect(structuralProblems(broken)).toEqual([
      "DELETE /sessions/{id}: operationId archiveSession is also GET /sessions/{id}'s",
      'DELETE /sessions/{id}: no 401 response',
    ])

    const json = 'application/json; charset=utf-8'
    expect(conformance.check('getSession', 299, json, {})).toEqual([
      'getSession answered 299, which the document does not list',
    ])
    expect(conformance.check('getSession', 404, json, {})).toEqual([
      'getSession 404: content type application/json, the document says application/problem+json',
    ])
    expect(conformance.check('getSession', 200, json, { session: { id: 1 } })[0]).toMatch(
      /^getSession 200: body\/session /,
    )
    expect(conformance.check('getSession', 404, 'application/problem+json', { code: 'SESSION_NOT_FOUND' })).toEqual([
      "getSession 404: body must have required property 'type'",
      "getSession 404: body must have required property 'title'",
      "getSession 404: body must have required property 'status'",
      "getSession 404: body must have required property 'detail'",
    ])
  })
})

describe('every operation, called for real', () => {
  let session = ''
  let first = 0
  let second = 0

  it('health: served without a token; refused from a foreign origin', async () => {
    expect((await call('getHealth', { token: null })).status).toBe(200)
    expect((await call('getHealth', { token: null, origin: FOREIGN })).body).toMatchObject({ code: 'FORBIDDEN' })
  })

  it('sessions: created (201), listed, read; refused with problems', async () => {
    const created = await call('createSession', { body: { directory: work, model, title: 'contract' } })
    expect(created.status).toBe(201)
    session = created.body.session.id
    expect((await call('createSession')).status).toBe(201) // no body at all: every parameter defaulted
    expect((await call('createSession', { body: { directory: 'relative/dir' } })).status).toBe(400)
    expect((await call('createSession', { body: { agent: 'nobody' } })).status).toBe(422)
    expect((await call('createSession', { raw: { type: 'text/plain', data: 'hi' } })).status).toBe(415)
    const huge = JSON.stringify({ title: 'x'.repeat(1_100_000) })
    expect((await call('createSession', { raw: { type: 'application/json', data: huge } })).status).toBe(413)

    expect((await call('listSessions', { query: { limit: 1 } })).body.cursor).toEqual(expect.any(String))
    expect((await call('listSessions', { query: { limit: 0 } })).status).toBe(400)
    expect((await call('getSession', { params: { id: session } })).status).toBe(200)
    expect((await call('getSession', { params: { id: 'ses_nope' } })).status).toBe(404)
  })

  it('inputs: 200 when waited for, 202 when accepted; conflicts and bad input refused', async () => {
    const waited = await call('submitInput', { params: { id: session }, query: { wait: true }, body: text('first') })
    expect(waited).toMatchObject({ status: 200, body: { outcome: 'idle', text: 'Done.' } })
    first = (await settled(session)).lastSeq
    const accepted = await call('submitInput', {
      params: { id: session },
      body: { inputId: 'in_second', ...text('second') },
    })
    expect(accepted).toMatchObject({ status: 202, body: { inputId: 'in_second', duplicate: false } })
    second = (await settled(session)).lastSeq

    const conflict = await call('submitInput', {
      params: { id: session },
      body: { inputId: 'in_second', ...text('x') },
    })
    expect(conflict.body).toMatchObject({ status: 409, code: 'INPUT_CONFLICT' })
    expect((await call('submitInput', { params: { id: session }, body: { parts: [] } })).status).toBe(400)
    expect(
      (await call('submitInput', { params: { id: session }, body: { agent: 'nobody', ...text('x') } })).status,
    ).toBe(422)
    expect((await call('submitInput', { params: { id: 'ses_nope' }, body: text('x') })).status).toBe(404)
    const outside = await call('submitInput', {
      params: { id: session },
      body: { parts: [{ type: 'file', path: '/etc/hostname' }] },
    })
    expect(outside.body).toMatchObject({ status: 403, code: 'FILE_FORBIDDEN' })
  })

  it('time travel: state, context, history, files and diff at seqs; unknown seqs refused', async () => {
    const at = { id: session }
    expect((await call('getSessionState', { params: at, query: { at: first } })).body.seq).toBe(first)
    expect((await call('getSessionState', { params: at, query: { at: 999_999 } })).status).toBe(404)

    const exported = await call('exportSession', { params: at })
    expect((exported.body as string).split('\n')[0]).toContain('"chronicle":"session-export"')
    expect((await call('exportSession', { params: { id: 'ses_missing' } })).status).toBe(404)
    const atif = await call('exportSession', { params: at, query: { format: 'atif' } })
    expect(atif.body).toMatchObject({ schema_version: 'ATIF-v1.6', session_id: session, agent: { name: 'chronicle' } })
    expect((await call('exportSession', { params: at, query: { format: 'xml' } })).status).toBe(400)
    const history = await call('getSessionHistory', { params: at, query: { limit: 3 } })
    expect(history.body.next).toEqual(expect.any(Number))
    const all = (await call('getSessionHistory', { params: at, query: { limit: 5000 } })).body.events as {
      seq: number
      type: string
    }[]
    expect((await call('getSessionHistory', { params: at, query: { limit: 0 } })).status).toBe(400)

    const step = all.find((e) => e.type === 'step.started')?.seq
    expect((await call('getSessionContext', { params: at, query: { at: step ?? 0 } })).body.step?.seq).toBe(step)
    expect((await call('getSessionContext', { params: at })).status).toBe(200)
    expect((await call('getSessionContext', { params: { id: 'ses_nope' } })).status).toBe(404)

    // notes.md is there too once the snapshot after the write is recorded, which may trail the run's end
    const files = (await call('getSessionFiles', { params: at, query: { at: first } })).body.files as { path: string }[]
    expect(files.map((f) => f.path).filter((p) => p !== 'notes.md')).toEqual(['README.md'])
    const readme = await call('getSessionFiles', { params: at, query: { at: second, path: 'README.md' } })
    expect(readme.body).toMatchObject({ path: 'README.md', content: '# project\n', encoding: 'utf8' })
    expect((await call('getSessionFiles', { params: at, query: { path: 'missing.md' } })).body).toMatchObject({
      code: 'NOT_IN_SNAPSHOT',
    })
    expect((await call('getSessionFiles', { params: at, query: { at: 'soon' } })).status).toBe(400)

    expect((await call('getSessionDiff', { params: at, query: { from: first, to: second } })).status).toBe(200)
    expect((await call('getSessionDiff', { params: at, query: { from: first } })).status).toBe(400)
  })

  it('revert and unrevert: the directory back and forth; nothing to unrevert after', async () => {
    const at = { id: session }
    expect((await call('revertSession', { params: at, body: { to: first } })).body.kind).toBe('revert')
    await settled(session)
    expect((await call('unrevertSession', { params: at })).body.kind).toBe('unrevert') // no body: every parameter defaulted
    await settled(session)
    expect((await call('unrevertSession', { params: at, body: {} })).body).toMatchObject({
      status: 409,
      code: 'NOTHING_TO_UNREVERT',
    })
    expect((await call('revertSession', { params: at, body: { to: 0 } })).status).toBe(400)
    expect((await call('revertSession', { params: { id: 'ses_nope' }, body: { to: 1 } })).status).toBe(404)
  })

  it('fork (201) and compact a fork; unknown seqs and sessions refused', async () => {
    const forked = await call('forkSession', { params: { id: session }, body: { at: second, title: 'a fork' } })
    expect(forked).toMatchObject({ status: 201, body: { session: { forkedFrom: { sessionId: session } } } })
    expect((await call('forkSession', { params: { id: session }, body: { at: 999_999 } })).status).toBe(404)
    expect((await call('forkSession', { params: { id: session }, body: {} })).status).toBe(400)
    expect((await call('compactSession', { params: { id: forked.body.session.id } })).body.duplicate).toBe(false)
    expect((await call('compactSession', { params: { id: 'ses_nope' } })).status).toBe(404)
  })

  it('permissions: a request answered "always", its rule listed and revoked; unknown ones refused', async () => {
    const at = { id: session }
    expect((await call('submitInput', { params: at, body: text('shell') })).status).toBe(202)
    const requestId = await untilAsked(session)
    const reply = { reply: 'always' }
    expect((await call('replyPermission', { params: { ...at, requestId: 'per_nope' }, body: reply })).status).toBe(404)
    expect((await call('replyPermission', { params: { ...at, requestId }, body: { reply: 'maybe' } })).status).toBe(400)
    expect((await call('replyPermission', { params: { ...at, requestId }, body: reply })).body).toEqual({})
    await settled(session)

    const rules = await call('listPermissionRules', { params: at })
    const [rule] = rules.body.rules as { ruleId: string }[]
    expect((await call('listPermissionRules', { params: { id: 'ses_nope' } })).status).toBe(404)
    expect((await call('revokePermissionRule', { params: { ...at, ruleId: rule?.ruleId ?? '' } })).body).toEqual({})
    expect((await call('revokePermissionRule', { params: { ...at, ruleId: rule?.ruleId ?? '' } })).status).toBe(404)
  })

  it('elicitations: a pending one answered; unknown ones and content against the schema refused', async () => {
    const created = await call('createSession', { body: { directory: work } })
    const id = created.body.session.id as string
    // the question as the elicitation bridge appends it (the real MCP flow: test/http/elicitation.test.ts)
    const requestedSchema = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }
    server.chronicle.store.append(
      id,
      [
        {
          type: 'elicitation.requested',
          data: { elicitationId: 'eli_1', server: 'booking', message: 'Who?', requestedSchema },
        },
      ],
      { meta: { actor: 'tool' } },
    )
    const at = { id, elicitationId: 'eli_1' }
    expect(
      (await call('answerElicitation', { params: at, body: { action: 'accept', content: {} } })).body,
    ).toMatchObject({
      code: 'ELICITATION_INVALID',
    })
    expect((await call('answerElicitation', { params: at, body: { action: 'maybe' } })).status).toBe(400)
    const body = { action: 'accept', content: { name: 'Ada' } }
    expect((await call('answerElicitation', { params: at, body })).body).toEqual({})
    expect((await call('answerElicitation', { params: at, body })).body).toMatchObject({
      code: 'ELICITATION_NOT_FOUND',
    })
  })

  it('cancel and archive; unknown sessions refused', async () => {
    expect((await call('cancelRun', { params: { id: session } })).body).toEqual({ cancelled: false })
    expect((await call('cancelRun', { params: { id: 'ses_nope' } })).status).toBe(404)
    expect((await call('archiveSession', { params: { id: session } })).body).toEqual({})
    expect((await call('archiveSession', { params: { id: 'ses_nope' } })).status).toBe(404)
    expect((await call('submitInput', { params: { id: session }, body: text('x') })).body).toMatchObject({
      code: 'SESSION_ARCHIVED',
    })
  })

  it('update: renamed and unarchived (200, the session); unknown sessions refused', async () => {
    const updated = await call('updateSession', {
      params: { id: session },
      body: { title: 'renamed', archived: false },
    })
    expect(updated.body).toMatchObject({ session: { id: session, title: 'renamed', archived: false } })
    expect((await call('updateSession', { params: { id: 'ses_nope' }, body: { archived: true } })).status).toBe(404)
  })

  it('tokens: created (201), used, listed, revoked; names, roles and the owner refused', async () => {
    const created = await call('createToken', { body: { name: 'reader', role: 'audit' } })
    expect(created).toMatchObject({ status: 201, body: { name: 'reader', role: 'audit' } })
    const { token, tokenId } = created.body as { token: string; tokenId: string }
    expect((await call('createToken', { body: { name: 'reader', role: 'audit' } })).status).toBe(409)
    expect((await call('createToken', { body: { name: 'x', role: 'god' } })).status).toBe(400)
    expect((await call('listTokens')).body.tokens).toHaveLength(1)
    expect((await call('whoami', { token })).body).toEqual({ id: tokenId, name: 'reader', role: 'audit' })
    expect((await call('whoami')).body).toEqual({ id: 'owner', name: 'owner', role: 'admin' })
    expect((await call('createSession', { token, body: {} })).body).toMatchObject({ status: 403, code: 'FORBIDDEN' })
    expect((await call('listTokens', { token })).status).toBe(403)

    expect((await call('revokeToken', { params: { id: tokenId } })).body.revokedAt).toEqual(expect.any(String))
    expect((await call('revokeToken', { params: { id: tokenId } })).status).toBe(409)
    expect((await call('revokeToken', { params: { id: 'owner' } })).status).toBe(403)
    expect((await call('revokeToken', { params: { id: 'tok_nope' } })).status).toBe(404)
    expect((await call('whoami', { token })).status).toBe(401)
  })

  it('shares: created (201) with a link, listed, revoked; a missing session, a taken name, a revoked one refused', async () => {
    const id = (await call('createSession', { body: {} })).body.session.id as string
    const created = await call('createShare', { params: { id }, body: { name: 'for bob', role: 'operate' } })
    expect(created).toMatchObject({ status: 201, body: { session: id, name: 'for bob', role: 'operate' } })
    const { shareId, url } = created.body as { shareId: string; url: string }
    expect(url).toMatch(new RegExp(`^${server.url}/login#${shareId}\\.[A-Za-z0-9_-]{43}$`))
    expect((await call('createShare', { params: { id }, body: { name: 'for bob' } })).body).toMatchObject({
      code: 'SHARE_NAME_TAKEN',
    })
    expect((await call('createShare', { params: { id: 'ses_nope' } })).status).toBe(404)
    expect((await call('listShares', { query: { session: id } })).body.shares).toHaveLength(1)
    expect((await call('listShares', { query: { session: '' } })).status).toBe(400)
    expect((await call('revokeShare', { params: { id: shareId } })).body.revokedAt).toEqual(expect.any(String))
    expect((await call('revokeShare', { params: { id: shareId } })).body).toMatchObject({
      status: 410,
      code: 'SHARE_REVOKED',
    })
    expect((await call('revokeShare', { params: { id: 'shr_nope' } })).status).toBe(404)
  })

  it('backup: a new directory (200); a relative or existing path refused', async () => {
    const out = join(server.dir, 'backup-1')
    expect((await call('backupStore', { body: { out } })).body).toMatchObject({
      directory: out,
      seq: expect.any(Number),
    })
    expect((await call('backupStore', { body: { out } })).body).toMatchObject({ status: 409, code: 'BACKUP_REFUSED' })
    expect((await call('backupStore', { body: { out: 'backup-2' } })).status).toBe(400)
  })

  it('MCP servers: the state at a seq (200); a seq past the log and a bad one refused', async () => {
    expect((await call('getMcpServers')).body).toEqual({ seq: expect.any(Number), servers: [] })
    expect((await call('getMcpServers', { query: { at: '1' } })).body).toEqual({ seq: 1, servers: [] })
    expect((await call('getMcpServers', { query: { at: '999999999' } })).body).toMatchObject({
      status: 404,
      code: 'SEQ_OUT_OF_RANGE',
    })
    expect((await call('getMcpServers', { query: { at: 'x' } })).status).toBe(400)
  })

  it('search: a page of hits (200); a malformed query refused (400 BAD_QUERY)', async () => {
    const id = (await call('createSession', { body: { title: 'searchable pelican' } })).body.session.id as string
    expect((await call('search', { query: { q: 'pelican' } })).body).toMatchObject({
      hits: [{ session: id, type: 'title', snippet: 'searchable pelican' }],
      indexedThrough: expect.any(Number),
      head: expect.any(Number),
    })
    expect((await call('search', { query: { q: '"pelican' } })).body).toMatchObject({
      status: 400,
      code: 'BAD_QUERY',
      details: { position: 0 },
    })
  })

  it('web login: a link (201) traded once for the cookie (204), then LOGIN_INVALID; logout (204)', async () => {
    const link = await call('createLoginLink', { body: {} })
    expect(link.status).toBe(201)
    const code = new URL(link.body.url).hash.slice(1)
    expect((await call('createLoginLink', { body: { code } })).status).toBe(400)
    expect((await call('login', { token: null, body: {} })).status).toBe(400)
    expect((await call('login', { token: null, body: { code } })).status).toBe(204)
    expect((await call('login', { token: null, body: { code } })).body).toMatchObject({ code: 'LOGIN_INVALID' })
    expect((await call('logout')).status).toBe(204)
  })

  it('every operation refuses a request without the token (401) and one from a foreign origin (403)', async () => {
    const params = { id: 'ses_nope', requestId: 'per_nope', ruleId: 'rul_nope' }
    for (const [operationId, { operation }] of conformance.operations) {
      if (JSON.stringify(operation.security) !== '[]')
        expect((await call(operationId, { params, token: null })).status).toBe(401)
      expect((await call(operationId, { params, origin: FOREIGN })).status).toBe(403)
    }
  })

  it('every operation in the document was called: each success it lists answered, and an error', () => {
    const missing: string[] = []
    for (const [operationId, { operation }] of conformance.operations) {
      const answered = conformance.answered.get(operationId) ?? new Set<number>()
      const successes = Object.keys(operation.responses ?? {}).filter((c) => c.startsWith('2'))
      for (const code of successes) if (!answered.has(Number(code))) missing.push(`${operationId} ${code}`)
      if (![...answered].some((s) => s >= 400)) missing.push(`${operationId}: no error`)
    }
    expect(missing).toEqual([])
  })
})
