// A stand-in for an agent CLI (test/agent/kinds/runner.test.ts): records its argv and stdin, then
// replays a recorded stream-json output (writing the file the recording's Write tool wrote, between
// the tool call and its result), or starts a long child and hangs (FAKE_MODE=hang), or fails.
import { spawn } from 'node:child_process'
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs'

let stdin = ''
process.stdin.on('data', (c) => (stdin += c))
process.stdin.on('end', () => {
  appendFileSync(process.env.FAKE_LOG, `${JSON.stringify({ argv: process.argv.slice(2), stdin, home: process.env.HOME, base: process.env.ANTHROPIC_BASE_URL, quiet: process.env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC })}\n`)
  const mode = process.env.FAKE_MODE ?? 'replay'
  if (mode === 'hang') {
    const child = spawn('sleep', ['4343'], { stdio: 'ignore' })
    writeFileSync(process.env.FAKE_PID, String(child.pid))
    setInterval(() => {}, 1000)
    return
  }
  if (mode === 'fail') {
    process.stderr.write('starting\nfatal: something broke\n')
    process.exit(3)
  }
  let written = false
  for (const line of readFileSync(process.env.FAKE_STREAM, 'utf8').split('\n')) {
    if (!written && line.includes('"type":"user"') && line.includes('hello.txt')) {
      writeFileSync('hello.txt', 'hi\n')
      written = true
    }
    if (line) process.stdout.write(`${line}\n`)
  }
})
