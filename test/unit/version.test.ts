import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { VPC_LEASE_VERSION } from '../../shared/version.js';

describe('VPC_LEASE_VERSION', () => {
  it('is package.json’s version', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(VPC_LEASE_VERSION).toBe(pkg.version);
  });
});
