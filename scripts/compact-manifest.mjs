// Rewrites oclif.manifest.json (written by `oclif manifest`, indented) as compact JSON with every
// character beyond ASCII escaped. oclif keeps the file's text in memory for the process's life (its
// JSON file cache, in production), and a text with any character beyond Latin-1 (the `…` and `—`
// of the commands' descriptions) V8 stores two bytes a character (docs/reliability.md "Memory
// footprint").
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

const file = join(import.meta.dirname, '..', 'oclif.manifest.json')
const text = JSON.stringify(JSON.parse(readFileSync(file, 'utf8')))
writeFileSync(file, text.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) + '\n')
