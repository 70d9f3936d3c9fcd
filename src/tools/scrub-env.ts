/**
 * The environment a child process gets: the server's, minus anything that
 * looks like a credential (SECURITY §2.12: *KEY*, *SECRET*, *TOKEN*, …) and
 * Chronicle's own settings. Commands run by the model never see API keys or
 * the server's bearer token.
 */
const SECRET = /(KEY|SECRET|TOKEN|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|CERT)/i
const PREFIXES = ['CHRONICLE_', 'OPENAI_', 'ANTHROPIC_', 'AWS_', 'AZURE_', 'GOOGLE_', 'GCP_', 'GITHUB_', 'GH_', 'NPM_CONFIG_', 'HF_']

export function scrubEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue
    if (SECRET.test(name)) continue
    if (PREFIXES.some((p) => name.toUpperCase().startsWith(p))) continue
    out[name] = value
  }
  return out
}
