import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ociImage } from '../../infra/image/oci.js';
import { DAEMONSET_FILE, renderDaemonSet } from '../../infra/image/render-daemonset.js';
import { synthAllocator } from './support/stacks.js';

const dir = mkdtempSync(join(tmpdir(), 'vpc-lease-node-image-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A small stand-in for dist/vpc-lease-cni-image.tar: the construct only stages and references the file. */
function tarball(): string {
  const file = join(dir, 'image.tar');
  const image = ociImage({
    files: [{ path: 'app/vpc-lease-cni', data: Buffer.from('x'), mode: 0o755 }],
    entrypoint: ['/app/vpc-lease-cni', 'install'],
    name: 'vpc-lease/vpc-lease-cni:0.1.0',
  });
  writeFileSync(file, image.tarball);
  return file;
}

function dockerAssets(
  app: ReturnType<typeof synthAllocator>['app'],
): Record<string, { source: { executable?: string[] } }> {
  const assembly = app.synth();
  const manifest = assembly.artifacts.find((a) => a.id.endsWith('.assets'))!;
  const json = JSON.parse(readFileSync(join(assembly.directory, `${manifest.id}.json`), 'utf8'));
  return json.dockerImages ?? {};
}

describe('Construct: the installer image as an ECR asset (nodeImageTarball)', () => {
  it('publishes the archive through docker load and outputs its ECR URI', () => {
    const { app, template } = synthAllocator({ nodeImageTarball: tarball() });
    const outputs = template.findOutputs('NodeImageUri');
    expect(Object.keys(outputs)).toHaveLength(1);
    // The URI is the CDK's container-assets repository in this account and Region, tagged with the asset hash.
    expect(JSON.stringify(outputs['NodeImageUri']!.Value)).toMatch(
      /container-assets-123456789012-eu-west-1:[0-9a-f]{64}/,
    );
    const images = Object.values(dockerAssets(app));
    expect(images).toHaveLength(1);
    expect(images[0]!.source.executable?.join(' ')).toContain('docker load');
  }, 120_000);

  it('publishes nothing without it (opt-in)', () => {
    const { app, template } = synthAllocator();
    expect(template.findOutputs('NodeImageUri')).toEqual({});
    expect(dockerAssets(app)).toEqual({});
  }, 120_000);
});

describe('renderDaemonSet', () => {
  const manifest = readFileSync(DAEMONSET_FILE, 'utf8');
  const uri = `123456789012.dkr.ecr.eu-west-1.amazonaws.com/cdk-hnb659fds-container-assets:${'a'.repeat(64)}`;

  it("sets the install container's image and nothing else", () => {
    const out = renderDaemonSet(manifest, uri);
    expect(out).toContain(`image: ${uri}\n`);
    const changed = out.split('\n').filter((line, i) => line !== manifest.split('\n')[i]);
    expect(changed).toEqual([`          image: ${uri}`]);
    expect(out).toContain('image: registry.k8s.io/pause');
  });

  it('takes a digest reference, and refuses what is not an image reference or a manifest without the installer', () => {
    expect(renderDaemonSet(manifest, `r.example/vpc-lease-cni@sha256:${'b'.repeat(64)}`)).toContain('@sha256:bbbb');
    expect(() => renderDaemonSet(manifest, 'x; rm -rf /')).toThrow(/not an image reference/);
    expect(() => renderDaemonSet(manifest.replace('- name: install', '- name: other'), uri)).toThrow(/found 0/);
  });
});
