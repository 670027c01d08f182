/**
 * Debian's iptables for the installer image, so the node agent (a container with no shell and no package
 * manager) can set the NodePort connmark rules itself (node/datapath/connmark.ts). Both xtables multi binaries
 * ship: the agent picks legacy or nft at start, as the host's kube-proxy does (node/agent/iptables-mode.ts).
 *
 * The .debs are pinned here, version and sha256 per CPU, and fetched once with apt-get into a cache shared by
 * builds. apt runs with its own package lists (in the cache) for amd64 and arm64, so the build machine needs no
 * `dpkg --add-architecture` and its own apt state is left alone.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ARCH_INFO, type Arch } from '../cross.js';
import type { TarEntry } from './oci.js';

interface PinnedDeb {
  readonly name: string;
  readonly version: string;
  readonly sha256: Readonly<Record<Arch, string>>;
}

/** Debian bookworm's iptables 1.8.9 and the libraries its two multi binaries load (besides libc). */
export const IPTABLES_DEBS: readonly PinnedDeb[] = [
  {
    name: 'iptables',
    version: '1.8.9-2',
    sha256: {
      x64: '2928d3ca6ca8a3dc3f423f6752822b1f3614a5ba609ff7806bcba4449ffe90e1',
      arm64: '5cb1974950a07f89c2d61a20e62d2dbcd882acb6d522d36ad3c690f6f5d3c643',
    },
  },
  {
    name: 'libxtables12',
    version: '1.8.9-2',
    sha256: {
      x64: 'cb841d66950a43af4a398625313d2f3da9065299c9738538de6c2c3495857040',
      arm64: '8884a42f98b989e5ba2e91d931b5c6e9eb72568e5d3001d97d73d7913890a7b3',
    },
  },
  {
    name: 'libip4tc2',
    version: '1.8.9-2',
    sha256: {
      x64: 'f2c48b367f9ec13f9aa577e7ccf81b371ce5d5fe22dddf9d7aa99f1e0bb7cfc4',
      arm64: 'fc5b488a30f697d13c8547ca32cebf53880141af77ec36c58b04f899b5708208',
    },
  },
  {
    name: 'libip6tc2',
    version: '1.8.9-2',
    sha256: {
      x64: 'be88db3dfa2fe3345ea343207f7c75345602686121e579023d021c348b9b4f4d',
      arm64: 'f921206811bbda3dfa03995142ee704fd13f2bb07291ed418bd41fbea3a1d8cc',
    },
  },
  {
    name: 'libnftnl11',
    version: '1.2.4-2',
    sha256: {
      x64: '9e619e1470a1915264e906020f3bfc046fd8458043b1342686d997b5078213af',
      arm64: 'fd8b6f2ea21d60e25b07dfee8804ece79c2b18309df7773b091a587135565b9f',
    },
  },
  {
    name: 'libmnl0',
    version: '1.0.4-3',
    sha256: {
      x64: '4581f42e3373cb72f9ea4e88163b17873afca614a6c6f54637e95aa75983ea7c',
      arm64: 'd63aafb6f2c07db8fcb135b00ff915baf72ef8a3397e773c9c24d67950c6a46c',
    },
  },
];

/** Where the image keeps the multi binaries; the agent runs them from there (node/agent/iptables-mode.ts). */
export const IMAGE_SBIN_DIR = 'usr/sbin';
export const XTABLES_MULTI_FILES = ['xtables-legacy-multi', 'xtables-nft-multi'] as const;

/**
 * The extensions connmark.ts's rules load (the modules' file names; MASQUERADE is a link to NAT in the .deb), and
 * `comment` for listing kube-proxy's rules. The other 110 (7.8 MB on arm64) stay out.
 */
const EXTENSIONS: Readonly<Record<string, string>> = {
  'libxt_standard.so': 'libxt_standard.so',
  'libxt_CONNMARK.so': 'libxt_CONNMARK.so',
  'libxt_connmark.so': 'libxt_connmark.so',
  'libxt_MARK.so': 'libxt_MARK.so',
  'libxt_mark.so': 'libxt_mark.so',
  'libxt_addrtype.so': 'libxt_addrtype.so',
  'libxt_conntrack.so': 'libxt_conntrack.so',
  'libxt_MASQUERADE.so': 'libxt_NAT.so',
  'libxt_comment.so': 'libxt_comment.so',
};

const debArch = (arch: Arch): string => ARCH_INFO[arch].oci;
const debFile = (deb: PinnedDeb, arch: Arch): string => `${deb.name}_${deb.version}_${debArch(arch)}.deb`;
const sha256Of = (file: string): string => createHash('sha256').update(readFileSync(file)).digest('hex');

/** Content-addressed by the pins: builds of every worktree share it. */
function cacheDir(): string {
  const key = createHash('sha256').update(JSON.stringify(IPTABLES_DEBS)).digest('hex').slice(0, 16);
  return join(tmpdir(), 'vpc-lease-deb-cache', key);
}

/** apt-get with its own lists for both CPUs under `cache`. */
function apt(cache: string, args: readonly string[], cwd?: string): void {
  const options = [
    `Dir::State::Lists=${join(cache, 'lists')}`,
    `Dir::Cache=${join(cache, 'apt')}`,
    'APT::Architectures::=amd64',
    'APT::Architectures::=arm64',
    'Acquire::Languages=none',
    'APT::Sandbox::User=root',
  ].flatMap((o) => ['-o', o]);
  execFileSync('apt-get', ['-q', ...options, ...args], { cwd, stdio: ['ignore', 'ignore', 'inherit'] });
}

/** The pinned .debs of `arch`, fetched when missing and each checked against its pin. */
export function iptablesDebs(arch: Arch): string[] {
  const cache = cacheDir();
  const debs = join(cache, 'debs');
  const wanted = IPTABLES_DEBS.filter((d) => !existsSync(join(debs, debFile(d, arch))));
  if (wanted.length > 0) {
    mkdirSync(join(cache, 'lists', 'partial'), { recursive: true });
    if (!existsSync(join(cache, 'lists', 'updated'))) {
      apt(cache, ['update']);
      writeFileSync(join(cache, 'lists', 'updated'), '');
    }
    const work = `${debs}.${process.pid}.tmp`;
    mkdirSync(work, { recursive: true });
    try {
      apt(cache, ['download', ...wanted.map((d) => `${d.name}:${debArch(arch)}=${d.version}`)], work);
      mkdirSync(debs, { recursive: true });
      for (const d of wanted) {
        const got = sha256Of(join(work, debFile(d, arch)));
        if (got !== d.sha256[arch]) throw new Error(`${debFile(d, arch)}: sha256 ${got}, pinned ${d.sha256[arch]}`);
        renameSync(join(work, debFile(d, arch)), join(debs, debFile(d, arch)));
      }
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
  return IPTABLES_DEBS.map((d) => {
    const file = join(debs, debFile(d, arch));
    if (sha256Of(file) !== d.sha256[arch]) throw new Error(`${file} does not match its pin: delete it and rebuild`);
    return file;
  });
}

/** The .debs of `arch` unpacked (dpkg-deb -x) into the cache, once. */
function unpacked(arch: Arch): string {
  const dir = join(cacheDir(), `root-${debArch(arch)}`);
  if (existsSync(join(dir, IMAGE_SBIN_DIR, XTABLES_MULTI_FILES[1]))) return dir;
  const work = `${dir}.${process.pid}.tmp`;
  rmSync(work, { recursive: true, force: true });
  for (const deb of iptablesDebs(arch)) execFileSync('dpkg-deb', ['-x', deb, work]);
  try {
    renameSync(work, dir);
  } catch (err) {
    if (!existsSync(join(dir, IMAGE_SBIN_DIR, XTABLES_MULTI_FILES[1]))) throw err;
  }
  rmSync(work, { recursive: true, force: true });
  return dir;
}

/**
 * The image's iptables: the two multi binaries, their libraries under /usr/lib/<triplet> (a path Debian's loader
 * searches) by their sonames, and the extensions where libxtables looks for them (/usr/lib/<triplet>/xtables).
 */
export function iptablesFiles(arch: Arch): TarEntry[] {
  const root = unpacked(arch);
  const lib = `usr/lib/${ARCH_INFO[arch].triplet}`;
  const files: TarEntry[] = XTABLES_MULTI_FILES.map((f) => ({
    path: `${IMAGE_SBIN_DIR}/${f}`,
    data: readFileSync(join(root, IMAGE_SBIN_DIR, f)),
    mode: 0o755,
  }));
  // The sonames are links to the versioned files in the .debs: the image gets each as a plain file.
  for (const name of readdirSync(join(root, lib)).filter((n) => /^lib.*\.so\.\d+$/.test(n)))
    files.push({ path: `${lib}/${name}`, data: readFileSync(join(root, lib, name)), mode: 0o755 });
  for (const [name, source] of Object.entries(EXTENSIONS))
    files.push({ path: `${lib}/xtables/${name}`, data: readFileSync(join(root, lib, 'xtables', source)), mode: 0o755 });
  return files;
}
