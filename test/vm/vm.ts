/**
 * Runs a command as root inside a throwaway VM whose kernel has ipvlan (this machine's kernel has none).
 *
 * The guest boots the host's Debian kernel under QEMU with a tiny busybox initramfs, sees the host's whole
 * filesystem read-only over 9p with a tmpfs overlay on top (so it can write anywhere, and nothing survives), and
 * optionally one host folder mounted read-write for results. It has no network card: nothing leaves it.
 * Every argument below is ours — nothing user-supplied reaches a shell.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { synthesizedNodePolicy } from '../../local-cloud/iam/synthesize-node-policy.js';

export interface VmOptions {
  /** Host folder the guest may write (mounted at the same path). */
  readonly outDir?: string;
  readonly memMiB?: number;
  readonly cpus?: number;
  readonly timeoutS?: number;
  /** Environment for the command inside the guest. */
  readonly env?: Readonly<Record<string, string>>;
  /** Where the command starts (default: the current folder). */
  readonly cwd?: string;
  /** Called with each line the guest console prints. */
  readonly onLine?: (line: string) => void;
}

export interface VmResult {
  /** The command's exit status; 124 on timeout, 125 when the guest never ran it. */
  readonly exitCode: number;
  readonly console: string;
}

/** Kernel modules the initramfs loads to mount the host's filesystem (order matters: dependencies first). */
const BOOT_MODULES = [
  'virtio_ring',
  'virtio',
  'virtio_pci_legacy_dev',
  'virtio_pci_modern_dev',
  'virtio_pci',
  'netfs',
  'fscache',
  '9pnet',
  '9pnet_virtio',
  '9p',
  'overlay',
];

/** Link kinds, and what iptables (nf_tables backend) needs for the plugin's NodePort connmark rules. */
const GUEST_MODULES = [
  'ipvlan',
  'macvlan',
  'dummy',
  'veth',
  'nf_tables',
  'nft_compat',
  // The per-pod marks' ct expression, written over nfnetlink.
  'nft_ct',
  'nf_conntrack',
  'nf_nat',
  'nft_chain_nat',
  'xt_conntrack',
  'xt_MASQUERADE',
  'xt_connmark',
  'xt_mark',
  'xt_addrtype',
  // IPv6 (ip6tables in either backend) and the IPv4 egress of IPv6 pods.
  'nf_defrag_ipv6',
  'ip6_tables',
  'ip6table_mangle',
  'ip6table_filter',
  'ip6table_nat',
];

export const VM_PACKAGES = ['qemu-system-x86', 'linux-image-amd64', 'busybox-static', 'cpio', 'kmod'];

/** Why the VM cannot run here, or undefined when it can. */
export function vmUnavailableReason(): string | undefined {
  if (process.getuid?.() !== 0) return 'the VM harness needs root (virtfs of /)';
  if (!existsSync('/usr/bin/qemu-system-x86_64')) return `qemu is missing (apt-get install ${VM_PACKAGES.join(' ')})`;
  if (!findKernel()) return 'no kernel under /boot (apt-get install linux-image-amd64)';
  if (!existsSync('/bin/busybox') && !existsSync('/usr/bin/busybox')) return 'busybox-static is missing';
  return undefined;
}

function findKernel(): { path: string; version: string } | undefined {
  if (!existsSync('/boot')) return undefined;
  const kernels = readdirSync('/boot')
    .filter((f) => f.startsWith('vmlinuz-'))
    .sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
  const last = kernels.at(-1);
  return last ? { path: join('/boot', last), version: last.slice('vmlinuz-'.length) } : undefined;
}

const INIT = `#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
param() { sed -n "s/.* $1=\\([^ ]*\\).*/\\1/p" /proc/cmdline; }
job=$(param vpcjob); out=$(param vpcout)
for m in ${BOOT_MODULES.join(' ')}; do insmod /lib/$m.ko 2>/dev/null; done
if ! mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /lower; then
  echo "vm: cannot mount the host filesystem"; poweroff -f
fi
mount -t tmpfs -o size=75% tmpfs /upper && mkdir -p /upper/u /upper/w
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w /newroot
mount -t tmpfs tmpfs /newroot/run; mkdir -p /newroot/run/netns /newroot/run/lock
if [ -n "$out" ]; then mkdir -p "/newroot$out"; mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 vpcout "/newroot$out"; fi
mount --bind /proc /newroot/proc; mount --bind /sys /newroot/sys; mount --bind /dev /newroot/dev
chroot /newroot /bin/sh "$job"
echo "VPC-VM-EXIT=$?"
poweroff -f
`;

function buildInitramfs(kernelVersion: string): string {
  const cacheDir = join(
    process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'),
    'vpc-lease-vm',
    `${kernelVersion}-v2`,
  );
  const initrd = join(cacheDir, 'initrd.gz');
  if (existsSync(initrd)) return initrd;
  const root = mkdtempSync('/var/tmp/vpc-vm-initrd.');
  try {
    for (const d of ['bin', 'lib', 'proc', 'sys', 'dev', 'lower', 'upper', 'newroot']) mkdirSync(join(root, d));
    const busybox = existsSync('/bin/busybox') ? '/bin/busybox' : '/usr/bin/busybox';
    writeFileSync(join(root, 'bin/busybox'), readFileSync(busybox), { mode: 0o755 });
    for (const mod of BOOT_MODULES) {
      const found = spawnSync('modinfo', ['-k', kernelVersion, '-F', 'filename', mod], { encoding: 'utf8' });
      const file = found.stdout.trim();
      if (found.status !== 0 || !file) continue; // built into this kernel
      const target = join(root, 'lib', `${mod}.ko`);
      if (file.endsWith('.ko')) writeFileSync(target, readFileSync(file));
      else {
        const tool = file.endsWith('.xz') ? ['xz', '-dc', file] : ['zstd', '-dqc', file];
        const unpacked = spawnSync(tool[0]!, tool.slice(1), { maxBuffer: 64 << 20 });
        if (unpacked.status !== 0) throw new Error(`failed to unpack kernel module ${mod}: ${unpacked.stderr}`);
        writeFileSync(target, unpacked.stdout);
      }
    }
    writeFileSync(join(root, 'init'), INIT);
    chmodSync(join(root, 'init'), 0o755);
    mkdirSync(cacheDir, { recursive: true });
    const list = spawnSync('find', ['.'], { cwd: root, encoding: 'utf8' });
    const cpio = spawnSync('cpio', ['-o', '-H', 'newc', '--quiet'], {
      cwd: root,
      input: list.stdout,
      maxBuffer: 256 << 20,
    });
    if (cpio.status !== 0) throw new Error(`failed to build the initramfs: ${cpio.stderr}`);
    const gz = spawnSync('gzip', ['-c'], { input: cpio.stdout, maxBuffer: 256 << 20 });
    writeFileSync(`${initrd}.tmp`, gz.stdout);
    spawnSync('mv', [`${initrd}.tmp`, initrd]);
    return initrd;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

export function shellQuote(arg: string): string {
  return `'${arg.replaceAll("'", `'\\''`)}'`;
}

export async function runInVm(command: readonly string[], options: VmOptions = {}): Promise<VmResult> {
  const reason = vmUnavailableReason();
  if (reason) throw new Error(`cannot start the VM: ${reason}`);
  const kernel = findKernel()!;
  const initrd = buildInitramfs(kernel.version);
  // The job file lives on the host's filesystem, which the guest sees (read-only, under its overlay).
  const jobDir = mkdtempSync('/var/tmp/vpc-vm-job.');
  const job = join(jobDir, 'job.sh');
  const env = {
    PATH: process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin',
    HOME: '/root',
    LANG: 'C.UTF-8',
    ...options.env,
  };
  writeFileSync(
    job,
    [
      ...Object.entries(env).map(([k, v]) => `export ${k}=${shellQuote(v)}`),
      // Loaded up front: the kernel's own module autoloading runs modprobe in the initramfs root, which has none.
      `modprobe -a ${GUEST_MODULES.join(' ')} 2>/dev/null`,
      `cd ${shellQuote(options.cwd ?? process.cwd())} || exit 125`,
      command.map(shellQuote).join(' '),
    ].join('\n'),
  );
  const args = [
    '-accel',
    process.env['VPC_LEASE_VM_ACCEL'] ?? 'tcg',
    '-cpu',
    'max',
    '-m',
    String(options.memMiB ?? 2048),
    '-smp',
    String(options.cpus ?? 2),
    '-nographic',
    '-no-reboot',
    '-nic',
    'none',
    '-kernel',
    kernel.path,
    '-initrd',
    initrd,
    '-append',
    `console=ttyS0 quiet loglevel=3 edd=off panic=-1 no_timer_check vpcjob=${job} vpcout=${options.outDir ?? ''}`,
    '-virtfs',
    'local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap',
  ];
  if (options.outDir) {
    mkdirSync(options.outDir, { recursive: true });
    args.push('-virtfs', `local,path=${options.outDir},mount_tag=vpcout,security_model=none,multidevs=remap`);
  }
  const qemu = spawn('qemu-system-x86_64', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let consoleText = '';
  let pending = '';
  const onData = (chunk: Buffer): void => {
    const text = chunk.toString('utf8');
    consoleText += text;
    pending += text;
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      // Strip the terminal escapes the guest console prints.
      const clean = line.replace(/\r$/, '').replace(/\x1b\[[0-9;?]*[a-zA-Z]|\x1bc/g, '');
      if (!clean.startsWith('VPC-VM-EXIT=')) options.onLine?.(clean);
    }
  };
  qemu.stdout.on('data', onData);
  qemu.stderr.on('data', onData);
  const timeoutMs = (options.timeoutS ?? 900) * 1000;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    qemu.kill('SIGKILL');
  }, timeoutMs);
  await new Promise<void>((resolve) => qemu.once('close', () => resolve()));
  clearTimeout(timer);
  rmSync(jobDir, { recursive: true, force: true });
  if (timedOut) return { exitCode: 124, console: consoleText };
  const marker = /VPC-VM-EXIT=(\d+)/.exec(consoleText);
  return { exitCode: marker ? Number(marker[1]) : 125, console: consoleText };
}

/**
 * Bundles an in-guest entry point to one ESM file run with plain node (vitest and tsx start too slowly under
 * the VM's emulation). netlink, dynalite and iam-simulate resolve from the repository's node_modules at run
 * time: each reads files beside its own code (a native module; iam-simulate's IAM data), which a bundle breaks.
 */
export async function bundleGuest(entry: string, outfile: string): Promise<void> {
  await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    outfile,
    external: ['netlink', 'dynalite', '@cloud-copilot/*'],
    banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
    logLevel: 'warning',
  });
}

/**
 * The node policy synthesized from the construct (cached), as JSON in `outDir` for a guest: the guests judge the
 * plugin's requests with it at an IAM-enforcing endpoint, and never load aws-cdk-lib under emulation.
 */
export async function writeNodePolicy(outDir: string): Promise<string> {
  const path = join(outDir, 'node-policy.json');
  writeFileSync(path, JSON.stringify(await synthesizedNodePolicy()));
  return path;
}
