// No nested user namespace when serve runs as root (docs/runtime.md "Running as root"). An
// unprivileged serve gets this from bubblewrap (`--disable-userns`, inside its own user namespace);
// as root there is no sandbox user namespace (its root would be host root), so the agent, an
// ordinary uid, could otherwise unshare(CLONE_NEWUSER) and hold every capability inside a
// namespace of its own — the first step of most kernel exploits. This seccomp filter (classic BPF,
// handed to `bwrap --seccomp`) refuses unshare() and clone() with CLONE_NEWUSER (EPERM) and
// clone3() altogether (ENOSYS: its flags live in memory a filter cannot read; libc falls back to
// clone()), like the filters of flatpak and Docker. Everything else is allowed.

const LD_W_ABS = 0x20
const JEQ_K = 0x15
const JSET_K = 0x45
const AND_K = 0x54
const RET_K = 0x06

const RET_ALLOW = 0x7fff0000
const RET_ERRNO = 0x00050000
const EPERM = 1
const ENOSYS = 38
const CLONE_NEWUSER = 0x10000000
/** seccomp_data: nr at 0, arch at 4, args[0] (low word, little-endian) at 16. */
const OFF_NR = 0
const OFF_ARCH = 4
const OFF_ARG0 = 16

interface Abi {
  arch: number
  unshare: number
  clone: number
  clone3: number
  /** Bits of `nr` to clear first (x32 syscalls share x86_64's arch with bit 30 set). */
  mask?: number
}

const X86_64: Abi = { arch: 0xc000003e, unshare: 272, clone: 56, clone3: 435, mask: 0xbfffffff }
const I386: Abi = { arch: 0x40000003, unshare: 310, clone: 120, clone3: 435 }
const AARCH64: Abi = { arch: 0xc00000b7, unshare: 97, clone: 220, clone3: 435 }
const ARM: Abi = { arch: 0x40000028, unshare: 337, clone: 120, clone3: 435 }

/** The ABIs a process on this machine can call the kernel through. */
const ABIS: Partial<Record<NodeJS.Architecture, Abi[]>> = {
  x64: [X86_64, I386],
  arm64: [AARCH64, ARM],
}

type Insn = { code: number; jt?: string | number; jf?: string | number; k: number; label?: string }

/** The filter for this machine's architecture, as bwrap reads it; null where it is not known. */
export function userNamespaceFilter(arch: NodeJS.Architecture = process.arch): Buffer | null {
  const abis = ABIS[arch]
  if (!abis) return null
  const prog: Insn[] = [{ code: LD_W_ABS, k: OFF_ARCH }]
  abis.forEach((abi, i) => prog.push({ code: JEQ_K, k: abi.arch, jt: `abi${i}`, jf: i + 1 < abis.length ? `arch${i + 1}` : 'allow', ...(i > 0 ? { label: `arch${i}` } : {}) }))
  abis.forEach((abi, i) => {
    prog.push({ code: LD_W_ABS, k: OFF_NR, label: `abi${i}` })
    if (abi.mask !== undefined) prog.push({ code: AND_K, k: abi.mask })
    prog.push({ code: JEQ_K, k: abi.unshare, jt: 'flags', jf: 0 })
    prog.push({ code: JEQ_K, k: abi.clone, jt: 'flags', jf: 0 })
    prog.push({ code: JEQ_K, k: abi.clone3, jt: 'enosys', jf: 'allow' })
  })
  prog.push({ code: LD_W_ABS, k: OFF_ARG0, label: 'flags' })
  prog.push({ code: JSET_K, k: CLONE_NEWUSER, jt: 'eperm', jf: 'allow' })
  prog.push({ code: RET_K, k: RET_ERRNO | ENOSYS, label: 'enosys' })
  prog.push({ code: RET_K, k: RET_ERRNO | EPERM, label: 'eperm' })
  prog.push({ code: RET_K, k: RET_ALLOW, label: 'allow' })
  return assemble(prog)
}

function assemble(prog: Insn[]): Buffer {
  const at = new Map<string, number>()
  prog.forEach((insn, i) => insn.label && at.set(insn.label, i))
  const offset = (from: number, to: string | number | undefined): number => {
    if (to === undefined || typeof to === 'number') return to ?? 0
    const target = at.get(to)
    if (target === undefined || target <= from || target - from - 1 > 255) throw new Error(`bad jump to ${to}`)
    return target - from - 1
  }
  const out = Buffer.alloc(prog.length * 8)
  prog.forEach((insn, i) => {
    out.writeUInt16LE(insn.code, i * 8)
    out.writeUInt8(offset(i, insn.jt), i * 8 + 2)
    out.writeUInt8(offset(i, insn.jf), i * 8 + 3)
    out.writeUInt32LE(insn.k >>> 0, i * 8 + 4)
  })
  return out
}

/** The fd the launcher opens the filter on for bwrap (0-2 are stdio, 3 the init's status pipe). */
export const SECCOMP_FD = 5
