/**
 * The MCP conformance suite's client under test: Chronicle's own MCP client.
 *
 *   MCP_CONFORMANCE_SCENARIO=<name> [MCP_CONFORMANCE_CONTEXT=<json>] \
 *     node --import tsx scripts/conformance-client.ts <server-url>
 *
 * It builds the remote server config a user would write, connects with
 * connectMcpServer (src/tools/mcp/server.ts), lists the tools and calls each
 * one through the same Tool objects the agent loop runs. Where the server
 * wants a browser sign-in, this script plays the user: it opens the
 * authorization URL from the `needs-auth` status without following the
 * redirect, takes `code` and `state` from the Location header, and hands
 * them to finishMcpSignIn, the function Chronicle's OAuth callback calls.
 * Run by scripts/conformance.mjs (`npm run test:conformance`).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { z } from 'zod'
import type { McpServerConfig, McpOAuthConfig } from '../src/tools/mcp/config.js'
import { finishMcpSignIn, type McpOAuthOptions, type RemoteMcpServerConfig } from '../src/tools/mcp/oauth.js'
import { connectMcpServer, type McpServerHandle, type McpServerOptions } from '../src/tools/mcp/server.js'
import type { Tool, ToolContext } from '../src/tools/tool.js'

/** the suite's fixed client metadata document URL: servers that support CIMD take it as client_id */
const CIMD_URL = 'https://conformance-test.local/client-metadata.json'
/** the suite's scope-retry-limit scenario: a client stops asking after three sign-ins */
const MAX_SIGN_INS = 3

interface Context {
  readonly name?: string
  readonly client_id?: string
  readonly client_secret?: string
  readonly private_key_pem?: string
  readonly signing_algorithm?: string
  readonly idp_client_id?: string
  readonly idp_id_token?: string
  readonly idp_token_endpoint?: string
}

async function main(): Promise<void> {
  const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? ''
  const serverUrl = process.argv[2]
  if (!serverUrl) throw new Error('usage: MCP_CONFORMANCE_SCENARIO=<scenario> conformance-client.ts <server-url>')
  const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? '{}') as Context
  const dataDir = mkdtempSync(join(tmpdir(), 'chronicle-conformance-'))
  try {
    const config = await serverConfig(scenario, serverUrl, context)
    const oauth: McpOAuthOptions = { dataDir, redirectUrl: 'http://127.0.0.1:4780/mcp/oauth/callback' }
    const opts: McpServerOptions = {
      dataDir,
      oauthRedirectUrl: oauth.redirectUrl,
      connectTimeoutMs: 20_000,
      // what a user does with a form that offers defaults: accepts it as offered
      onElicitation: async () => ({ action: 'accept', content: {} }),
    }
    await run(config, opts, oauth)
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
}

/** Connect, list, call every tool; a sign-in the server asks for is done and the work goes on. */
async function run(config: RemoteMcpServerConfig, opts: McpServerOptions, oauth: McpOAuthOptions): Promise<void> {
  let signIns = 0
  const signIn = async (handle: McpServerHandle): Promise<McpServerHandle> => {
    const url = handle.status().authorizationUrl
    if (!url || ++signIns > MAX_SIGN_INS) throw new Error(`cannot connect: ${JSON.stringify(handle.status())}`)
    await finishMcpSignIn(config, oauth, await playUser(url))
    await handle.close()
    return connectMcpServer(config, opts)
  }
  let handle = await connectMcpServer(config, opts)
  while (handle.status().state === 'needs-auth') handle = await signIn(handle)
  if (handle.status().state !== 'connected') throw new Error(`cannot connect: ${JSON.stringify(handle.status())}`)
  try {
    for (const id of handle.tools().map((t) => t.id)) {
      for (;;) {
        const tool = handle.tools().find((t) => t.id === id)
        if (!tool) throw new Error(`tool ${id} is gone: ${JSON.stringify(handle.status())}`)
        try {
          await tool.execute(sampleArguments(tool), context())
          break
        } catch (err) {
          if (handle.status().state !== 'needs-auth') throw err
          handle = await signIn(handle) // a step-up: more scopes, signed in again, then the call once more
          if (handle.status().state !== 'connected') throw new Error(`cannot reconnect: ${JSON.stringify(handle.status())}`)
        }
      }
    }
  } finally {
    await handle.close()
  }
}

/** What a user's config for this server would say, from the scenario and the suite's context. */
async function serverConfig(scenario: string, url: string, context: Context): Promise<RemoteMcpServerConfig> {
  const remote = (oauth?: McpOAuthConfig | false, headers: Record<string, string> = {}) =>
    ({
      name: 'conformance',
      type: 'remote',
      url,
      headers,
      ...(oauth !== undefined && { oauth }),
    }) satisfies McpServerConfig
  switch (scenario) {
    case 'auth/client-credentials-basic':
      return remote({ grant: 'client_credentials', clientId: need(context.client_id), clientSecret: need(context.client_secret) })
    case 'auth/client-credentials-jwt':
      return remote({
        grant: 'client_credentials',
        clientId: need(context.client_id),
        privateKey: need(context.private_key_pem),
        ...(context.signing_algorithm && { signingAlgorithm: context.signing_algorithm }),
      })
    case 'auth/pre-registration':
      return remote({ clientId: need(context.client_id), clientSecret: need(context.client_secret) })
    case 'auth/cross-app-access-complete-flow':
      // enterprise-managed sign-in (SEP-990) is not a Chronicle feature: the token is obtained here, as an
      // identity provider's tooling would, and given to Chronicle as a configured Authorization header
      return remote(false, { Authorization: `Bearer ${await crossAppAccessToken(url, context)}` })
    default:
      return remote({ clientMetadataUrl: CIMD_URL })
  }
}

/** The user in the browser: opens the authorization URL; the server redirects to the callback with code and state. */
async function playUser(authorizationUrl: string): Promise<{ code: string; state: string | null }> {
  const response = await fetch(authorizationUrl, { redirect: 'manual' })
  const location = response.headers.get('location')
  if (!location) throw new Error(`the authorization server did not redirect (HTTP ${response.status})`)
  const callback = new URL(location)
  const code = callback.searchParams.get('code')
  if (!code) throw new Error(`no code in the redirect: ${callback.searchParams.get('error') ?? location}`)
  return { code, state: callback.searchParams.get('state') }
}

/** The suite's enterprise flow: the IdP's ID token → an ID-JAG at the IdP → an access token at the server's AS. */
async function crossAppAccessToken(url: string, context: Context): Promise<string> {
  const prm = await json(await fetch(new URL('/.well-known/oauth-protected-resource/mcp', url)))
  const authServer = String((prm.authorization_servers as string[])[0])
  const as = await json(await fetch(new URL('/.well-known/oauth-authorization-server', authServer)))
  const jag = await json(
    await fetch(need(context.idp_token_endpoint), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
        requested_token_type: 'urn:ietf:params:oauth:token-type:id-jag',
        audience: String(as.issuer),
        resource: String(prm.resource),
        subject_token: need(context.idp_id_token),
        subject_token_type: 'urn:ietf:params:oauth:token-type:id_token',
        client_id: need(context.idp_client_id),
      }),
    }),
  )
  const basic = Buffer.from(
    `${encodeURIComponent(need(context.client_id))}:${encodeURIComponent(need(context.client_secret))}`,
  ).toString('base64')
  const token = await json(
    await fetch(String(as.token_endpoint), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${basic}` },
      body: new URLSearchParams({
        grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer',
        assertion: String(jag.access_token),
      }),
    }),
  )
  return String(token.access_token)
}

async function json(response: Response): Promise<Record<string, unknown>> {
  if (!response.ok) throw new Error(`${response.url}: HTTP ${response.status} ${await response.text()}`)
  return (await response.json()) as Record<string, unknown>
}

function need(value: string | undefined): string {
  if (!value) throw new Error('MCP_CONFORMANCE_CONTEXT lacks a value this scenario needs')
  return value
}

/** Arguments a model might send: each property from its JSON schema type (numbers 1, 2, …; text "x"). */
function sampleArguments(tool: Tool): unknown {
  const schema = z.toJSONSchema(tool.parameters) as { properties?: Record<string, { type?: string }> }
  let n = 0
  const sample = (type: string | undefined): unknown =>
    type === 'number' || type === 'integer' ? ++n : type === 'boolean' ? true : type === 'array' ? [] : type === 'object' ? {} : 'x'
  return Object.fromEntries(Object.entries(schema.properties ?? {}).map(([k, p]) => [k, sample(p.type)]))
}

/** A tool context with every permission granted: the suite's servers are the whole world here. */
function context(): ToolContext {
  return {
    sessionId: 'conformance',
    messageId: 'conformance',
    callId: 'conformance',
    partId: 'conformance',
    agent: 'build',
    directory: process.cwd(),
    abort: new AbortController().signal,
    progress: () => {},
    ask: async () => {},
    check: () => 'allow',
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err)
    process.exit(1)
  },
)
