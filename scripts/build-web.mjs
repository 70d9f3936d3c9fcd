#!/usr/bin/env node
/*
 * The web page (src/web/, docs/WEB.md): bundles src/web/main.tsx with esbuild
 * into <out>/assets/ — the entry's JavaScript (small: it starts the login
 * check, then imports the views, src/web/app.tsx, at once), the chunks loaded
 * with a dynamic import() (code splitting: the views; the syntax highlighter,
 * src/web/highlight.ts, which is not part of a first paint) and one
 * stylesheet, minified, with content hashes in their names — and writes
 * <out>/index.html naming the entry and the stylesheet, and preloading the
 * rest of what a first paint runs (`modulepreload`). Chunks are same-origin scripts under /assets/, which the
 * CSP's script-src 'self' allows.
 * No inline script or style: the server's CSP (script-src 'self',
 * style-src 'self') would block them.
 *
 *   node scripts/build-web.mjs [out]     # default dist/web; prints the gzipped sizes:
 *     each file's, the initial JavaScript (the entry and what it imports statically,
 *     what a first paint loads), all the JavaScript, and the total with the CSS
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
    splitting: true,
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
    chunkNames: '[name]-[hash]',
    assetNames: '[name]-[hash]',
    metafile: true,
    absWorkingDir: root, // the metafile's paths are relative to it
    logLevel: 'warning',
    define: { 'process.env.NODE_ENV': '"production"' },
  })
  const outputs = result.metafile.outputs
  const written = Object.keys(outputs)
  const entry = written.find((f) => f.endsWith('.js') && outputs[f].entryPoint !== undefined)
  const scripts = written.filter((f) => f.endsWith('.js'))
  const css = written.find((f) => f.endsWith('.css'))
  if (!entry || !css || written.filter((f) => f.endsWith('.css')).length !== 1)
    throw new Error(`build-web: expected one entry .js and one .css, got ${written.join(', ')}`)
  // what a first paint loads: the entry, the views it imports at once (its own dynamic imports: main.tsx starts
  // the login check before they are compiled) and the chunks they import statically, transitively; a chunk a
  // view imports dynamically (the highlighter) is not part of it
  const initial = new Set([entry])
  for (const i of outputs[entry].imports) if (i.kind === 'dynamic-import' && !i.external) initial.add(i.path)
  for (const file of initial)
    for (const i of outputs[file].imports) if (i.kind === 'import-statement' && !i.external) initial.add(i.path)
  const js = join(root, entry)
  writeFileSync(join(out, 'index.html'), indexHtml(
      `/assets/${basename(entry)}`,
      `/assets/${basename(css)}`,
      [...initial].filter((f) => f !== entry).map((f) => `/assets/${basename(f)}`),
    ),
  )
  const sizes = Object.fromEntries(
    [...scripts, css].map((file) => {
      const bytes = readFileSync(join(root, file))
      return [basename(file), { bytes: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length }]
    }),
  )
  const sum = (files) => files.reduce((total, f) => total + sizes[basename(f)].gzip, 0)
  const initialJsGzip = sum([...initial])
  const jsGzip = sum(scripts)
  const gzip = jsGzip + sum([css])
  if (!quiet) {
    const list = Object.entries(sizes)
      .map(([name, s]) => `${name} ${kb(s.bytes)} (${kb(s.gzip)} gzipped)`)
      .join(', ')
    console.log(
      `build-web: ${relative(process.cwd(), out) || '.'}/ — ${list}; initial JS ${kb(initialJsGzip)} gzipped, all JS ${kb(jsGzip)} gzipped; total ${kb(gzip)} gzipped`,
    )
  }
  return { out, js, css: join(root, css), sizes, initialJsGzip, jsGzip, gzip }
}

function kb(bytes) {
  return `${(bytes / 1024).toFixed(1)} KB`
}

/** The page's HTML; `preload`: the rest of a first paint's chunks, fetched with the entry rather than after it. */
function indexHtml(script, stylesheet, preload = []) {
  const preloads = preload.map((href) => `<link rel="modulepreload" href="${href}">\n`).join('')
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Chronicle</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${stylesheet}">
${preloads}<script type="module" src="${script}"></script>
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
