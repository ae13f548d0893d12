// Each workspace's agent is a host uid of its own (docs/security.md "One uid per workspace").
// Observed before: as root, every workspace's agent ran as the one uid 64000, so whatever got out
// of one sandbox's namespaces (a kernel bug, a shared mount) was the owner of every other
// workspace's files, processes and IPC objects. Here: the store hands out uids that two
// allocators never share; real bubblewrap sandboxes as root, each attacked by a process of the
// other workspace's uid (what an escaped agent would be); Kubernetes pods through the fake API
// server and its kubelet, run as the pod's runAsUser.
import { execFileSync, spawnSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { kubernetesSettingsFromEnv } from '../../src/runtime/index.js'
import { claimName, openKubeClient } from '../../src/runtime/kubernetes/index.js'
import { DEFAULT_LIMITS } from '../../src/runtime/limits.js'
import { kubernetesRuntime, localRuntime, type KubernetesRuntimeUnderTest, type LocalRuntimeUnderTest } from '../runtime/drivers.js'
import { UidRangeExhaustedError, workspaceUids } from '../../src/store/index.js'
import { openSibling, testDialects } from '../helpers/dialects.js'
import { FakeKube } from '../helpers/fake-kube/index.js'
import { bwrapAvailable } from '../runtime/helpers.js'

const asRoot = process.getuid?.() === 0
const available = asRoot && (await bwrapAvailable())
if (!available && asRoot && process.env.CORRAL_TEST_REQUIRE_BWRAP === '1') throw new Error('the per-workspace uid attacks need bubblewrap as root (CORRAL_TEST_REQUIRE_BWRAP=1)')

for (const d of testDialects()) {
  describe(`uid allocation in the store [${d.name}]`, () => {
    it('two allocators racing over many workspaces never hand out one uid twice, and a workspace keeps its own', async () => {
      // Two stores on one database (file or schema) stand for two replicas.
      const a = await d.open()
      const b = await openSibling(a)
      try {
        const range = { first: 3_000_000, count: 1000 }
        const ids = Array.from({ length: 24 }, (_, i) => `ws_race_${i}`)
        const got = await Promise.all(ids.flatMap((id) => [workspaceUids(a).allocate(id, range), workspaceUids(b).allocate(id, range)]))
        for (let i = 0; i < ids.length; i++) expect(got[2 * i]).toBe(got[2 * i + 1])
        const uids = got.filter((_, i) => i % 2 === 0)
        expect(new Set(uids).size).toBe(ids.length)
        for (const uid of uids) expect(uid >= range.first && uid < range.first + range.count).toBe(true)
      } finally {
        await b.close()
        await a.close()
      }
    })

    it('takes the lowest free uid, reuses one only once released, and says when the range is full', async () => {
      const store = await d.open()
      try {
        const uids = workspaceUids(store)
        const range = { first: 5000, count: 3 }
        const all = await Promise.all(['ws_a', 'ws_b', 'ws_c'].map((id) => uids.allocate(id, range)))
        expect([...all].sort()).toEqual([5000, 5001, 5002])
        await expect(uids.allocate('ws_d', range)).rejects.toBeInstanceOf(UidRangeExhaustedError)
        expect(await uids.allocate('ws_b', range)).toBe(all[1])
        const freed = all[1]!
        await uids.release('ws_b')
        expect(await uids.of('ws_b')).toBeUndefined()
        expect(await uids.allocate('ws_d', range)).toBe(freed)
        await expect(uids.allocate('ws_e', range)).rejects.toThrow(/every uid of the sandbox range 5000-5002/)
      } finally {
        await store.close()
      }
    })
  })
}

/** Runs `argv` on the host as `uid` (no groups, no capability): what an agent out of its namespaces would be. */
function asUid(uid: number, argv: string[], opts: { ipcOf?: number } = {}): { ok: boolean; out: string } {
  const drop = ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--inh-caps=-all', '--', ...argv]
  const cmd = opts.ipcOf ? ['nsenter', `--ipc=/proc/${opts.ipcOf}/ns/ipc`, '--', ...drop] : drop
  const r = spawnSync(cmd[0]!, cmd.slice(1), { encoding: 'utf8' })
  return { ok: r.status === 0, out: `${r.stdout}${r.stderr}` }
}

/** The host pid of the one process whose command line is exactly `line`. */
function pidOf(line: string): number {
  return Number(execFileSync('pgrep', ['-x', '-f', line], { encoding: 'utf8' }).trim().split('\n')[0])
}

async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((r) => setTimeout(r, 50))
}

describe.skipIf(!available)('two workspaces of a root serve (bubblewrap): nothing of one is the other\'s', () => {
  let root: string
  let runtime: LocalRuntimeUnderTest
  const ws = { a: { id: `ws_uid_a_${randomUUID().slice(0, 8)}`, uid: 2_000_000_101, dataDir: '' }, b: { id: `ws_uid_b_${randomUUID().slice(0, 8)}`, uid: 2_000_000_102, dataDir: '' } }
  // Each agent leaves its files, directories and IPC objects as open as an agent can make them
  // (0666, 0777), then waits: only its uid and namespaces stand between it and the other.
  const script = (tag: string) => [
    'id -u > /data/uid.tmp',
    'echo secret > /data/own.txt && chmod 666 /data/own.txt && mkdir -m 777 /data/open',
    'ipcmk -M 4096 -p 0600 | grep -o "[0-9]*$" > /data/shm.tmp',
    'ipcmk -Q -p 0600 | grep -o "[0-9]*$" > /data/mq.tmp',
    `(echo x > /dev/shm/posix-${tag} && chmod 666 /dev/shm/posix-${tag}) 2>/dev/null`,
    'ipcs -m | grep -c "^0x" > /data/seen-shm.tmp; ls /dev/shm > /data/seen-posix.tmp',
    'for f in uid shm mq seen-shm seen-posix; do mv /data/$f.tmp /data/$f; done',
    `exec sleep 36${tag}`,
  ].join('\n')
  const sleeper = { a: 'sleep 3601', b: 'sleep 3602' }

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'corral-ws-uids-'))
    // Every directory above /data open to all: only /data's own owner and mode keep B's out of A's reach.
    chmodSync(root, 0o755)
    runtime = localRuntime({ root, proxy: { host: '127.0.0.1', port: 1 }, warn: () => {}, stopGraceMs: 200, limits: { ...DEFAULT_LIMITS, diskMb: 0 }, allowUnenforcedLimits: true })
    expect((await runtime.check()).ok).toBe(true)
    for (const [tag, w] of [['01', ws.a], ['02', ws.b]] as const) {
      const handle = await runtime.provision({ workspaceId: w.id, agentUid: w.uid })
      w.dataDir = handle.dataDir
      writeFileSync(join(w.dataDir, 'agent.sh'), script(tag))
      await runtime.startAgent(w.id, { command: ['/bin/sh', '/data/agent.sh'], proxyToken: 't' })
    }
    await until(() => ['a', 'b'].every((k) => { try { readFileSync(join(ws[k as 'a'].dataDir, 'seen-posix')); return true } catch { return false } }))
  })
  afterAll(async () => {
    await runtime?.close()
    rmSync(root, { recursive: true, force: true })
  })

  it('each agent runs as its workspace\'s own uid, which owns its /data and closes it to every other uid (0700)', () => {
    for (const w of [ws.a, ws.b]) {
      expect(readFileSync(join(w.dataDir, 'uid'), 'utf8').trim()).toBe(String(w.uid))
      const st = statSync(w.dataDir)
      expect([st.uid, st.gid, st.mode & 0o777]).toEqual([w.uid, w.uid, 0o700])
      expect(statSync(join(w.dataDir, 'own.txt')).uid).toBe(w.uid)
    }
  })

  it('as A\'s uid, B\'s files cannot be read, written or listed, even those B made world-writable', () => {
    const own = join(ws.b.dataDir, 'own.txt')
    expect(asUid(ws.a.uid, ['cat', own])).toMatchObject({ ok: false, out: expect.stringMatching(/Permission denied/) })
    expect(asUid(ws.a.uid, ['sh', '-c', `echo pwned >> ${own}`]).ok).toBe(false)
    expect(asUid(ws.a.uid, ['touch', join(ws.b.dataDir, 'open', 'planted')]).ok).toBe(false)
    expect(asUid(ws.a.uid, ['ls', ws.b.dataDir]).ok).toBe(false)
    expect(readFileSync(own, 'utf8')).toBe('secret\n')
    // The control: B's own uid can.
    expect(asUid(ws.b.uid, ['cat', own])).toEqual({ ok: true, out: 'secret\n' })
  })

  it('as A\'s uid, B\'s processes cannot be signalled', () => {
    const b = pidOf(sleeper.b)
    expect(asUid(ws.a.uid, ['kill', '-0', String(b)])).toMatchObject({ ok: false, out: expect.stringMatching(/not permitted/i) })
    expect(asUid(ws.a.uid, ['kill', '-STOP', String(b)]).ok).toBe(false)
    expect(readFileSync(`/proc/${b}/status`, 'utf8')).toMatch(/State:\s+S/)
    expect(asUid(ws.b.uid, ['kill', '-0', String(b)]).ok).toBe(true)
  })

  it('as A\'s uid inside B\'s IPC namespace, B\'s SysV shared memory and message queue cannot be removed', () => {
    const b = pidOf(sleeper.b)
    const shm = readFileSync(join(ws.b.dataDir, 'shm'), 'utf8').trim()
    const mq = readFileSync(join(ws.b.dataDir, 'mq'), 'utf8').trim()
    expect(asUid(ws.a.uid, ['ipcrm', '-m', shm], { ipcOf: b }).ok).toBe(false)
    expect(asUid(ws.a.uid, ['ipcrm', '-q', mq], { ipcOf: b }).ok).toBe(false)
    // The control: B's own uid can (its queue goes; the segment stays for the other shapes).
    expect(asUid(ws.b.uid, ['ipcrm', '-q', mq], { ipcOf: b }).ok).toBe(true)
  })

  it('inside its sandbox, each agent sees only its own SysV and POSIX IPC objects (private IPC namespace and /dev/shm)', () => {
    for (const w of [ws.a, ws.b]) {
      expect(readFileSync(join(w.dataDir, 'seen-shm'), 'utf8').trim()).toBe('1')
      // /dev/shm is the sandbox's own (bwrap's private /dev): never the other's object.
      expect(readFileSync(join(w.dataDir, 'seen-posix'), 'utf8')).not.toMatch(w === ws.a ? /posix-02/ : /posix-01/)
    }
    const a = pidOf(sleeper.a)
    const b = pidOf(sleeper.b)
    expect(readFileSync(`/proc/${a}/status`, 'utf8')).toMatch(new RegExp(`Uid:\\s+${ws.a.uid}\\s`))
    expect(execFileSync('readlink', [`/proc/${a}/ns/ipc`], { encoding: 'utf8' })).not.toBe(execFileSync('readlink', [`/proc/${b}/ns/ipc`], { encoding: 'utf8' }))
  })

  it('a workspace re-adopted after a restart keeps its uid; one written under the old shared uid is given to its own', async () => {
    const again = localRuntime({ root, proxy: { host: '127.0.0.1', port: 1 }, warn: () => {}, limits: { ...DEFAULT_LIMITS, diskMb: 0 } })
    const id = `ws_uid_c_${randomUUID().slice(0, 8)}`
    const old = await again.provision({ workspaceId: id })
    writeFileSync(join(old.dataDir, 'kept'), 'x')
    expect(statSync(old.dataDir).uid).not.toBe(2_000_000_103)
    const readopted = await again.provision({ workspaceId: id, agentUid: 2_000_000_103 })
    expect(statSync(join(readopted.dataDir, 'kept')).uid).toBe(2_000_000_103)
    expect(statSync(readopted.dataDir).mode & 0o777).toBe(0o700)
    // A restarted driver, told nothing, finds the uid the workspace was given.
    const restarted = localRuntime({ root, proxy: { host: '127.0.0.1', port: 1 }, warn: () => {}, limits: { ...DEFAULT_LIMITS, diskMb: 0 } })
    const agent = await restarted.startAgent(id, { command: ['/bin/sh', '-c', 'id -u > /data/uid'], proxyToken: 't' })
    await agent.exited
    expect(readFileSync(join(readopted.dataDir, 'uid'), 'utf8').trim()).toBe('2000000103')
  })
})

describe.skipIf(!asRoot)('two Kubernetes workspaces: each pod runs as its workspace\'s uid (fake API server, kubelet as runAsUser)', () => {
  let fake: FakeKube
  let dir: string
  const runtimes: KubernetesRuntimeUnderTest[] = []
  function runtime(): KubernetesRuntimeUnderTest {
    const settings = kubernetesSettingsFromEnv({ CORRAL_AGENT_IMAGE: 'corral-agent:test', CORRAL_K8S_KUBECONFIG: join(dir, 'kubeconfig') }, { ...DEFAULT_LIMITS, diskMb: 0 })
    const r = kubernetesRuntime({ root: join(dir, `rt-${runtimes.length}`), proxy: { host: '127.0.0.1', port: 1 }, caCertPath: join(dir, 'ca.pem'), settings, stopGraceMs: 500, warn: () => {}, client: openKubeClient(settings) })
    runtimes.push(r)
    return r
  }
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'corral-k8s-uids-'))
    fake = await FakeKube.start({ root: join(dir, 'kubelet'), runAsPodUser: true })
    writeFileSync(join(dir, 'kubeconfig'), fake.kubeconfig())
    writeFileSync(join(dir, 'ca.pem'), '-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n')
    fake.store.create('services', 'corral', {
      apiVersion: 'v1', kind: 'Service', metadata: { name: 'corral-proxy' },
      spec: { clusterIP: '127.0.0.1', selector: { 'app.kubernetes.io/name': 'corral' }, ports: [{ name: 'proxy', port: 7071, targetPort: 7071 }] },
    })
  })
  afterAll(async () => {
    for (const r of runtimes) await r.close()
    await fake?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('runAsUser, runAsGroup and fsGroup are the workspace\'s own; another replica reads them from the claim', async () => {
    const first = runtime()
    const ids = { a: `ws_k8s_uid_a_${Date.now().toString(16)}`, b: `ws_k8s_uid_b_${Date.now().toString(16)}` }
    const uids = { a: 2_000_000_201, b: 2_000_000_202 }
    for (const k of ['a', 'b'] as const) {
      await first.provision({ workspaceId: ids[k], owner: { orgId: 'org_1', roleId: 'role_1' }, agentUid: uids[k] })
      const agent = await first.startAgent(ids[k], { command: ['sh', '-c', 'id -u > uid; id -g > gid'], proxyToken: 't' })
      expect((await agent.exited).code).toBe(0)
      const claim = fake.kubelet.claimDir(claimName(ids[k]))
      expect(readFileSync(join(claim, 'uid'), 'utf8').trim()).toBe(String(uids[k]))
      expect(readFileSync(join(claim, 'gid'), 'utf8').trim()).toBe(String(uids[k]))
      expect(statSync(join(claim, 'uid')).uid).toBe(uids[k])
    }
    const pods = fake.store.list('pods', 'corral') as unknown as Array<{ metadata: { annotations?: Record<string, string> }; spec: { securityContext: Record<string, unknown> } }>
    const contexts = pods.map((p) => [p.metadata.annotations?.['corral.dev/workspace-id'], p.spec.securityContext])
    for (const k of ['a', 'b'] as const) {
      for (const [id, sc] of contexts) if (id === ids[k]) expect(sc).toMatchObject({ runAsUser: uids[k], runAsGroup: uids[k], fsGroup: uids[k] })
    }
    // Another replica, told nothing but the workspace id, runs A's next agent as A's uid.
    const second = runtime()
    const agent = await second.startAgent(ids.a, { command: ['sh', '-c', 'id -u > uid2'], proxyToken: 't' })
    expect((await agent.exited).code).toBe(0)
    expect(readFileSync(join(fake.kubelet.claimDir(claimName(ids.a)), 'uid2'), 'utf8').trim()).toBe(String(uids.a))
  })
})
