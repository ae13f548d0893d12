// The files a local driver binds into every sandbox (the init, the agent's /etc/passwd and group,
// the corral CA and a bundle with it), written once per runtime start under the shared dir; and a
// workspace's own passwd and group when its agent has a uid of its own.
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { writeEgressFiles, type EgressFiles } from './egress.js'
import { SANDBOX_INIT_SOURCE } from './sandbox-init.js'

/** Files every workspace shares, written once per runtime start. */
export interface SharedFiles {
  init: string
  passwd: string
  group: string
  /** The corral CA alone (NODE_EXTRA_CA_CERTS) and the system bundle plus it (OpenSSL tools). */
  ca: string | null
  caBundle: string | null
  /** The transparent-egress setup and the sandbox's resolv.conf (egress.ts). */
  egress?: EgressFiles
}

const SYSTEM_BUNDLES = ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt', '/etc/ssl/cert.pem']

/**
 * Writes the shared files into `dir`. The identity is the driver's default one: uid 1000 inside
 * the user namespace, or the driver's own uid as root (a workspace given a uid of its own gets its
 * own passwd and group, writeIdentity).
 */
export async function writeSharedFiles(dir: string, uid: number, caCertPath: string | undefined): Promise<SharedFiles> {
  await mkdir(dir, { recursive: true })
  const init = join(dir, 'init.mjs')
  await writeFile(init, SANDBOX_INIT_SOURCE)
  const { passwd, group } = await writeIdentity(dir, uid)
  const egress = await writeEgressFiles(dir)
  let ca: string | null = null
  let caBundle: string | null = null
  if (caCertPath) {
    ca = join(dir, 'corral-ca.pem')
    await copyFile(caCertPath, ca)
    const corral = await readFile(ca, 'utf8')
    let system = ''
    for (const candidate of SYSTEM_BUNDLES) {
      system = await readFile(candidate, 'utf8').catch(() => '')
      if (system) break
    }
    caBundle = join(dir, 'ca-bundle.pem')
    await writeFile(caBundle, `${system.trimEnd()}\n${corral.trimEnd()}\n`)
  }
  return { init, passwd, group, ca, caBundle, egress }
}

/** The agent's identity (`agent`, uid = gid) in `dir`, so tools that look the user up (ssh, git, pip) find one. */
export async function writeIdentity(dir: string, uid: number): Promise<{ passwd: string; group: string }> {
  const passwd = join(dir, 'passwd')
  await writeFile(passwd, `root:x:0:0:root:/root:/usr/sbin/nologin\nagent:x:${uid}:${uid}:corral agent:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`)
  const group = join(dir, 'group')
  await writeFile(group, `root:x:0:\nagent:x:${uid}:\nnogroup:x:65534:\n`)
  return { passwd, group }
}
