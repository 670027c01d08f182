import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const MANIFEST_TYPES = [
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
  'application/vnd.docker.distribution.manifest.v2+json',
];

/**
 * Debian's docker-registry (the CNCF distribution server) on 127.0.0.1 with a temp storage dir and no auth. It
 * listens on a port the kernel picks; `start` waits for the line in which the server names it.
 */
export class LocalRegistry {
  readonly dir = mkdtempSync(join(tmpdir(), 'vpc-lease-registry-'));
  private process?: ChildProcess;
  /** `127.0.0.1:PORT`, once started. */
  host = '';

  async start(): Promise<void> {
    const config = join(this.dir, 'config.yml');
    writeFileSync(
      config,
      [
        'version: 0.1',
        'log:',
        '  level: info',
        'storage:',
        '  filesystem:',
        `    rootdirectory: ${join(this.dir, 'storage')}`,
        'http:',
        '  addr: 127.0.0.1:0',
      ].join('\n'),
    );
    const child = spawn('docker-registry', ['serve', config], { stdio: ['ignore', 'ignore', 'pipe'] });
    this.process = child;
    let log = '';
    this.host = await new Promise<string>((resolve, reject) => {
      child.on('exit', (code) => reject(new Error(`docker-registry exited (${code}): ${log.slice(-2000)}`)));
      child.stderr?.on('data', (chunk: Buffer) => {
        log += chunk.toString();
        const m = /listening on (127\.0\.0\.1:\d+)/.exec(log);
        if (m) resolve(m[1]!);
      });
    });
  }

  /** What the registry serves for `repository:reference`: its digest and media type. */
  async manifest(
    repository: string,
    reference: string,
  ): Promise<{ status: number; digest?: string; mediaType?: string; body: unknown }> {
    const res = await fetch(`http://${this.host}/v2/${repository}/manifests/${reference}`, {
      headers: { accept: MANIFEST_TYPES.join(', ') },
    });
    const text = await res.text();
    return {
      status: res.status,
      digest: res.headers.get('docker-content-digest') ?? undefined,
      mediaType: res.headers.get('content-type') ?? undefined,
      body: res.ok ? JSON.parse(text) : text,
    };
  }

  close(): void {
    if (this.process && this.process.exitCode === null) this.process.kill('SIGTERM');
    rmSync(this.dir, { recursive: true, force: true });
  }
}
