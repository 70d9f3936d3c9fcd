#!/usr/bin/env node
/*
 * The web page (src/web/, docs/WEB.md): bundles src/web/main.tsx with esbuild
 * into <out>/assets/ — one JavaScript file and one stylesheet, minified, with
 * content hashes in their names — and writes <out>/index.html naming them.
 * No inline script or style: the server's CSP (script-src 'self',
 * style-src 'self') would block them.
 *
 *   node scripts/build-web.mjs [out]     # default dist/web; prints the gzipped sizes
 *
 * scripts/build.mjs calls buildWeb() for dist-next/web, so `npm run build`
 * (and `npm ci`, through prepare) builds the page with the server. The SDK's
 * `import('ws')` (src/client/socket.ts) stays external: the page always passes
 * the browser's WebSocket. Plain JavaScript: it runs before anything is compiled.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { basename, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gzipSync } from 'node:zlib'
import { build } from 'esbuild'

const root = fileURLToPath(new URL('..', import.meta.url))

/**
 * Builds the page into `out` (replacing its assets/ and index.html).
 * Resolves with the files written and their sizes, raw and gzipped.
 */
export async function buildWeb({ out = join(root, 'dist', 'web'), minify = true, quiet = false } = {}) {
  const assets = join(out, 'assets')
  rmSync(assets, { recursive: true, force: true })
  mkdirSync(assets, { recursive: true })
  const result = await build({
    entryPoints: [join(root, 'src', 'web', 'main.tsx')],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['chrome111', 'firefox115', 'safari16.4'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    // the SDK loads `ws` only when no WebSocket is given; the page always gives the browser's
    external: ['ws'],
    minify,
    sourcemap: false,
    legalComments: 'none',
    outdir: assets,
    entryNames: '[name]-[hash]',
    assetNames: '[name]-[hash]',
    metafile: true,
    logLevel: 'warning',
    define: { 'process.env.NODE_ENV': '"production"' },
  })
  const written = Object.keys(result.metafile.outputs).map((file) => join(root, file))
  const js = written.find((f) => f.endsWith('.js'))
  const css = written.find((f) => f.endsWith('.css'))
  if (!js || !css) throw new Error(`build-web: expected one .js and one .css, got ${written.join(', ')}`)
  writeFileSync(join(out, 'index.html'), indexHtml(`/assets/${basename(js)}`, `/assets/${basename(css)}`))
  const sizes = Object.fromEntries(
    [js, css].map((file) => {
      const bytes = readFileSync(file)
      return [basename(file), { bytes: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length }]
    }),
  )
  const gzip = Object.values(sizes).reduce((sum, s) => sum + s.gzip, 0)
  if (!quiet) {
    const list = Object.entries(sizes)
      .map(([name, s]) => `${name} ${kb(s.bytes)} (${kb(s.gzip)} gzipped)`)
      .join(', ')
    console.log(`build-web: ${relative(process.cwd(), out) || '.'}/ — ${list}; total ${kb(gzip)} gzipped`)
  }
  return { out, js, css, sizes, gzip }
}

function kb(bytes) {
  return `${(bytes / 1024).toFixed(1)} KB`
}

function indexHtml(script, stylesheet) {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Chronicle</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${stylesheet}">
<script type="module" src="${script}"></script>
</head>
<body>
<div id="app"></div>
<noscript>Chronicle's page needs JavaScript.</noscript>
</body>
</html>
`
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const out = process.argv[2] ? resolve(process.argv[2]) : undefined
  await buildWeb(out ? { out } : {})
}
