import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { install, installOptionsFromArgs, SUPPORT_FILES } from '../../node/installer/install.js';
import { missing } from '../support/capabilities.js';

/** A chained plugin that answers VERSION like the reference plugins do, speaking exactly `versions`. */
function fakePlugin(path: string, versions: readonly string[]): void {
  const answer = JSON.stringify({ cniVersion: versions.at(-1), supportedVersions: versions });
  writeFileSync(path, `#!/bin/sh\ncat >/dev/null\necho '${answer}'\n`, { mode: 0o755 });
}

describe('install', () => {
  let dir: string;
  let source: string;
  let binDir: string;
  let confDir: string;
  const args = (...extra: string[]) =>
    installOptionsFromArgs(
      ['--bin-dir', binDir, '--conf-dir', confDir, '--service-cidrs', '10.96.0.0/12', ...extra],
      {},
      source,
    );
  const conflist = () => JSON.parse(readFileSync(join(confDir, '10-vpc-lease.conflist'), 'utf8'));

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-install-'));
    const dist = join(dir, 'dist');
    mkdirSync(dist);
    for (const file of SUPPORT_FILES) writeFileSync(join(dist, file), 'x');
    source = join(dist, 'vpc-lease-cni');
    writeFileSync(source, '#!/bin/sh\n', { mode: 0o755 });
    binDir = join(dir, 'bin');
    confDir = join(dir, 'net.d');
    mkdirSync(binDir);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('writes a cniVersion 1.1.0 conflist by default, so the runtime calls GC and STATUS', () => {
    fakePlugin(join(binDir, 'portmap'), ['0.4.0', '1.0.0', '1.1.0']);
    const options = args();
    expect(options.cniVersion).toBe('1.1.0');
    install(options);
    expect(conflist()).toMatchObject({
      cniVersion: '1.1.0',
      plugins: [{ type: 'vpc-lease-cni' }, { type: 'portmap' }],
    });
  });

  it('refuses a chained plugin that does not speak the version, before writing anything', () => {
    fakePlugin(join(binDir, 'portmap'), ['0.4.0', '1.0.0']);
    expect(() => install(args())).toThrow(/portmap does not speak cniVersion 1\.1\.0 \(it supports 0\.4\.0, 1\.0\.0\)/);
    expect(existsSync(join(confDir, '10-vpc-lease.conflist'))).toBe(false);
    expect(existsSync(join(binDir, 'vpc-lease-cni'))).toBe(false);
    // Chosen explicitly, the older version installs (without GC and STATUS).
    install(args('--cni-version', '1.0.0'));
    expect(conflist()).toMatchObject({ cniVersion: '1.0.0' });
  });

  it('refuses a chained plugin type that is not a plain file name', () => {
    expect(() => install(args('--chain', '../../usr/bin/evil'))).toThrow(/bad chained plugin type/);
  });

  it.skipIf(missing('go-plugins'))('asks the real reference portmap (Debian 1.1.1 speaks up to 1.0.0)', () => {
    copyFileSync('/usr/lib/cni/portmap', join(binDir, 'portmap'));
    expect(() => install(args())).toThrow(/does not speak cniVersion 1\.1\.0.*upgrade the CNI plugins/);
    install(args('--cni-version', '1.0.0'));
    expect(conflist()).toMatchObject({ cniVersion: '1.0.0' });
  });
});
