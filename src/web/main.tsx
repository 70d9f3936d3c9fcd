import './styles.css'
import { render } from 'preact'
import { App } from './app.js'

/** The page's entry (scripts/build-web.mjs bundles from here; docs/WEB.md). */
const root = document.getElementById('app')
if (root) render(<App />, root)
