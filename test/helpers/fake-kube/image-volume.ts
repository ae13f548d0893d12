// What a kubelet does for an image volume (`volumes[].image`, KEP-4639): pulls the image by its
// reference from the registry — here over plain HTTP from the test registry (test/helpers/
// registry.ts), the OCI distribution API: the manifest by digest, then each layer blob, every
// digest checked — and unpacks the layers in order into a directory that is then made read-only
// (files 0444/0555, directories 0555, owned by root).
import { createHash } from 'node:crypto'
import { spawnSync } from 'node:child_process'
import { mkdirSync, writeFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'

const ACCEPT = 'application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json'

function parseReference(ref: string): { host: string; repository: string; digest: string } {
  const m = /^([^/]+)\/(.+)@(sha256:[0-9a-f]{64})$/.exec(ref)
  if (!m) throw new Error(`Failed to pull image "${ref}": the fake kubelet pulls only references by digest`)
  return { host: m[1]!, repository: m[2]!, digest: m[3]! }
}

async function fetchChecked(url: string, digest: string, accept?: string): Promise<Buffer> {
  const res = await fetch(url, accept ? { headers: { accept } } : {})
  if (!res.ok) throw new Error(`Failed to pull image: ${url} answered ${res.status}`)
  const body = Buffer.from(await res.arrayBuffer())
  const got = `sha256:${createHash('sha256').update(body).digest('hex')}`
  if (got !== digest) throw new Error(`Failed to pull image: ${url} is ${got}, not ${digest}`)
  return body
}

export async function pullImageVolume(reference: string, dir: string): Promise<void> {
  const { host, repository, digest } = parseReference(reference)
  const base = `http://${host}/v2/${repository}`
  const manifest = JSON.parse((await fetchChecked(`${base}/manifests/${digest}`, digest, ACCEPT)).toString('utf8')) as { layers?: { digest: string }[] }
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  const scratch = `${dir}.layers`
  mkdirSync(scratch, { recursive: true })
  try {
    for (const [i, layer] of (manifest.layers ?? []).entries()) {
      const file = join(scratch, `${i}.tar`)
      writeFileSync(file, await fetchChecked(`${base}/blobs/${layer.digest}`, layer.digest))
      // GNU tar tells gzip from plain tar by itself; ownership as the image says is not kept.
      const out = spawnSync('tar', ['-x', '-f', file, '-C', dir, '--no-same-owner'], { encoding: 'utf8' })
      if (out.status !== 0) throw new Error(`Failed to unpack layer ${layer.digest}: ${out.stderr}`)
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
  spawnSync('chown', ['-R', '0:0', dir])
  spawnSync('chmod', ['-R', 'a-w', dir])
}
