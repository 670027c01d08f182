import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { appSettingsFromContext } from '../../infra/construct/app-context.js';
import { synthAllocator } from './support/stacks.js';

const URI = `123456789012.dkr.ecr.eu-west-1.amazonaws.com/vpc-lease-cni@sha256:${'e'.repeat(64)}`;

describe('Construct: the installer image URI (nodeImageUri)', () => {
  it('outputs the URI it is given as NodeImageUri, and publishes no image asset', () => {
    const { app, template } = synthAllocator({ nodeImageUri: URI });
    expect(template.findOutputs('NodeImageUri')).toEqual({
      NodeImageUri: expect.objectContaining({ Value: URI }),
    });
    // The assets manifest lists only the Lambdas' files: deploy has no image to load, tag or push.
    const assembly = app.synth();
    const manifest = assembly.artifacts.find((a) => a.id.endsWith('.assets'))!;
    const assets = JSON.parse(readFileSync(join(assembly.directory, `${manifest.id}.json`), 'utf8'));
    expect(assets.dockerImages ?? {}).toEqual({});
  }, 120_000);

  it('outputs nothing without it', () => {
    const { template } = synthAllocator();
    expect(template.findOutputs('NodeImageUri')).toEqual({});
  }, 120_000);

  it('reads the context key nodeImageUri into the allocator props', () => {
    const settings = appSettingsFromContext((k) => (k === 'nodeImageUri' ? URI : undefined));
    expect(settings.allocator.nodeImageUri).toBe(URI);
  });
});
