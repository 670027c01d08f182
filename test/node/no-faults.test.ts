import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSea } from '../../packaging/build.js';

/** The fault points' variables, and the error only their code raises. */
const FAULT_NAMES = [
  'VPC_LEASE_TEST_FAIL_AT',
  'VPC_LEASE_TEST_HANG_AT',
  'VPC_LEASE_TEST_SKIP_ENI_UP',
  'injected fault after',
];

/** What the shipped image needs to run on this machine: the link kind (no ipvlan here) and the SDK's endpoints. */
const KEPT_NAMES = ['VPC_LEASE_TEST_LINK_KIND', 'AWS_ENDPOINT_URL_DYNAMODB', 'AWS_EC2_METADATA_SERVICE_ENDPOINT'];

/** Which of `names` any file of a build directory holds (the executable, its natives, the shim). */
function namesIn(dir: string, names: readonly string[]): string[] {
  const files = readdirSync(dir).map((name) => readFileSync(join(dir, name)));
  return names.filter((name) => files.some((bytes) => bytes.includes(name)));
}

describe('the shipped single executable', () => {
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-no-faults-'));
    await buildSea(join(dir, 'shipped'), { reuse: true });
    await buildSea(join(dir, 'dev'), { reuse: true, faults: true });
  }, 480_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('carries none of the fault points: they are compiled out', () => {
    expect(namesIn(join(dir, 'shipped'), FAULT_NAMES)).toEqual([]);
  });

  it('keeps the link kind and the SDK endpoint variables, which the cluster suite runs it with', () => {
    expect(namesIn(join(dir, 'shipped'), KEPT_NAMES)).toEqual(KEPT_NAMES);
  });

  it('the development build carries every one of them, so the search above can find them (the control)', () => {
    expect(namesIn(join(dir, 'dev'), FAULT_NAMES)).toEqual(FAULT_NAMES);
  });
});
