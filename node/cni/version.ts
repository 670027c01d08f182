import { CniCode, CniError } from './errors.js';

/** Spec versions this plugin speaks; results are printed in the one the configuration asks for. */
export const SUPPORTED_VERSIONS = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;
export type CniVersion = (typeof SUPPORTED_VERSIONS)[number];
export const LATEST_VERSION: CniVersion = '1.1.0';

function parts(version: string): [number, number, number] {
  const m = /^(\d+)\.(\d+)\.(\d+)$/.exec(version);
  if (!m) throw new CniError(CniCode.decodeFailure, `invalid cniVersion ${JSON.stringify(version)}`);
  return [Number(m[1]), Number(m[2]), Number(m[3])];
}

export function compareVersions(a: string, b: string): number {
  const pa = parts(a);
  const pb = parts(b);
  for (let i = 0; i < 3; i++) if (pa[i]! !== pb[i]!) return pa[i]! - pb[i]!;
  return 0;
}

export function atLeast(version: string, minimum: string): boolean {
  return compareVersions(version, minimum) >= 0;
}

/** @throws CniError code 1 when the configuration asks for a version this plugin does not speak. */
export function negotiate(requested: unknown): CniVersion {
  if (typeof requested !== 'string' || requested === '') {
    throw new CniError(
      CniCode.incompatibleVersion,
      'incompatible CNI versions',
      `config is "0.1.0" (no cniVersion), plugin supports ${SUPPORTED_VERSIONS.join(', ')}`,
    );
  }
  const match = SUPPORTED_VERSIONS.find((v) => v === requested);
  if (!match) {
    throw new CniError(
      CniCode.incompatibleVersion,
      'incompatible CNI versions',
      `config is ${JSON.stringify(requested)}, plugin supports ${SUPPORTED_VERSIONS.join(', ')}`,
    );
  }
  return match;
}
