/**
 * `npm run -s push-image -- <registry>/<repository>:<tag> [--archive FILE]`: pushes the installer image archive
 * (`npm run image`, dist/vpc-lease-cni-image.tar; one manifest or a multi-platform index) to a registry over its
 * HTTP API with skopeo — no Docker — and prints `registry/repository@sha256:…`, the reference the DaemonSet pulls.
 *
 * Credentials: for an ECR registry (any partition) a token from `aws ecr get-login-password`, handed to skopeo in
 * a private auth file that is removed afterwards; for any other registry, skopeo's own (`skopeo login`, or
 * REGISTRY_AUTH_FILE). Secrets never appear on a command line.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { errorMessage, ValidationError } from '../../shared/errors.js';
import { digestReference, ecrRegion, type ImageReference, parseImageReference } from './reference.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const DEFAULT_ARCHIVE = join(root, 'dist', 'vpc-lease-cni-image.tar');

export interface PushOptions {
  /** The OCI archive to push. */
  readonly archive: string;
  /** `registry/repository:tag`. */
  readonly target: string;
  /** The environment of `aws` and `skopeo` (PATH, AWS_PROFILE, REGISTRY_AUTH_FILE …). @default process.env */
  readonly env?: NodeJS.ProcessEnv;
}

export interface PushResult {
  readonly digest: string;
  /** `registry/repository@digest`. */
  readonly reference: string;
}

/** Loopback registries are reached over plain HTTP, as with the project's other endpoints; any other needs TLS. */
function isLoopback(registry: string): boolean {
  const host = registry.replace(/:\d+$/, '');
  return host === 'localhost' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** skopeo's argv: every platform of an index, digests kept, so what the registry holds is the archive's own. */
export function skopeoCopyArgs(
  archive: string,
  target: ImageReference,
  files: { readonly digestFile: string; readonly authFile?: string },
): string[] {
  return [
    'copy',
    '--all',
    '--preserve-digests',
    '--digestfile',
    files.digestFile,
    ...(files.authFile ? ['--dest-authfile', files.authFile] : []),
    ...(isLoopback(target.registry) ? ['--dest-tls-verify=false'] : []),
    `oci-archive:${archive}`,
    `docker://${target.registry}/${target.repository}:${target.tag}`,
  ];
}

/** The containers-auth.json skopeo reads: ECR's user is always `AWS`, its password the token. */
export function ecrAuthFile(registry: string, token: string): string {
  const auth = Buffer.from(`AWS:${token}`).toString('base64');
  return `${JSON.stringify({ auths: { [registry]: { auth } } })}\n`;
}

function run(file: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    execFile(file, args, { env, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${file} ${args[0]} failed: ${(stderr || err.message).trim().slice(-2000)}`));
      else resolvePromise(stdout);
    });
  });
}

export async function pushImage(options: PushOptions): Promise<PushResult> {
  const target = parseImageReference(options.target);
  if (target.tag === undefined || target.digest !== undefined)
    throw new ValidationError(`push to a tag (registry/repository:tag), not a digest: ${options.target}`);
  // skopeo splits `oci-archive:PATH:REF` at the colon.
  if (options.archive.includes(':'))
    throw new ValidationError(`the archive path may not contain ':': ${options.archive}`);
  if (!existsSync(options.archive))
    throw new ValidationError(`no image archive at ${options.archive}: run \`npm run image\` first`);
  const env = options.env ?? process.env;
  const work = mkdtempSync(join(tmpdir(), 'vpc-lease-push-'));
  try {
    const digestFile = join(work, 'digest');
    const region = ecrRegion(target.registry);
    let authFile: string | undefined;
    if (region !== undefined) {
      const token = (await run('aws', ['ecr', 'get-login-password', '--region', region], env)).trim();
      if (token.length === 0) throw new Error('aws ecr get-login-password printed no token');
      authFile = join(work, 'auth.json');
      writeFileSync(authFile, ecrAuthFile(target.registry, token), { mode: 0o600 });
    }
    await run('skopeo', skopeoCopyArgs(options.archive, target, { digestFile, authFile }), env);
    const digest = readFileSync(digestFile, 'utf8').trim();
    if (!/^sha256:[0-9a-f]{64}$/.test(digest)) throw new Error(`skopeo wrote no digest (${JSON.stringify(digest)})`);
    return { digest, reference: digestReference(target, digest) };
  } catch (err) {
    throw new Error(`failed to push ${options.archive} to ${options.target}: ${errorMessage(err)}`, { cause: err });
  } finally {
    // mkdtemp made the directory 0700, and the token inside it goes with it.
    rmSync(work, { recursive: true, force: true });
  }
}

/** `<target> [--archive FILE]`. */
export function pushOptionsFromArgs(args: readonly string[]): PushOptions {
  const positionals: string[] = [];
  let archive = DEFAULT_ARCHIVE;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--archive' && args[i + 1] !== undefined) archive = resolve(args[++i]!);
    else if (arg.startsWith('-')) throw new ValidationError(`unknown option ${arg}`);
    else positionals.push(arg);
  }
  if (positionals.length !== 1) throw new ValidationError('expected one target, registry/repository:tag');
  return { archive, target: positionals[0]! };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  let options: PushOptions;
  try {
    options = pushOptionsFromArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(
      `push-image: ${errorMessage(err)}\nusage: npm run -s push-image -- <registry>/<repository>:<tag> [--archive FILE]\n`,
    );
    process.exit(2);
  }
  pushImage(options).then(
    (pushed) => {
      process.stderr.write(`pushed ${options.archive} to ${options.target} (${pushed.digest})\n`);
      process.stdout.write(`${pushed.reference}\n`);
    },
    (err: unknown) => {
      process.stderr.write(`push-image: ${errorMessage(err)}\n`);
      process.exit(1);
    },
  );
}
