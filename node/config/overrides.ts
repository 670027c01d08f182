import { isIP } from 'node:net';
import { CniCode, CniError } from '../cni/errors.js';

/**
 * What a node may override, and where only tests may. The plugin runs as root on every node and signs requests
 * with the node's credentials, so a setting that redirects them or loads code must never be active by accident:
 *
 * - Test mode is `VPC_LEASE_TEST_MODE=1` in the plugin's environment, which is the runtime's (containerd's,
 *   kubelet's). Neither the installer nor the conflist can set it, so a production install never enables it.
 * - Test-only: every `VPC_LEASE_*` variable the binary reads (the native-module directory, the link kind; the
 *   fault points, which test-hooks.ts refuses itself), and an IMDS endpoint other than the instance's own.
 *   Outside test mode they fail the call with a clear error instead of being ignored, so a stray variable is noticed.
 * - Everywhere: a DynamoDB endpoint must be https, or http to a loopback address (a local proxy): plain http to
 *   any other host would carry the session token and every lease in cleartext.
 */
export const TEST_MODE_ENV = 'VPC_LEASE_TEST_MODE';
export const TEST_ONLY_ENV = ['VPC_LEASE_NATIVE_DIR', 'VPC_LEASE_TEST_LINK_KIND'] as const;

/** The instance metadata service's own addresses (IPv4 link-local and the Nitro IPv6 one). */
const IMDS_HOSTS = new Set(['169.254.169.254', '[fd00:ec2::254]']);

export function isTestMode(env: NodeJS.ProcessEnv): boolean {
  return env[TEST_MODE_ENV] === '1';
}

/** Why settings are refused outside test mode: one wording wherever the plugin refuses one (test-hooks.ts too). */
export function testOnlyRefusal(settings: readonly string[], why = 'refusing test-only behaviour'): string {
  return `${settings.join(', ')} ${settings.length > 1 ? 'are' : 'is'} honoured only in test mode (${TEST_MODE_ENV}=1); ${why}`;
}

const OWN_IMDS = 'a node reads its identity from its own IMDS';

function parseUrl(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}

export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '');
  if (host === 'localhost' || host === '::1') return true;
  return isIP(host) === 4 && host.startsWith('127.');
}

/** Why a DynamoDB endpoint is refused, or undefined when it is acceptable (https, or http to loopback). */
export function storeEndpointProblem(url: string): string | undefined {
  const parsed = parseUrl(url);
  if (!parsed) return `${JSON.stringify(url)} is not a URL`;
  if (parsed.protocol === 'https:') return undefined;
  if (parsed.protocol === 'http:' && isLoopbackHost(parsed.hostname)) return undefined;
  if (parsed.protocol === 'http:')
    return `plain http to ${parsed.hostname} would send the node's credentials in cleartext; use https (http only to loopback)`;
  return `unsupported scheme ${parsed.protocol}`;
}

function isImdsEndpoint(url: string): boolean {
  const parsed = parseUrl(url);
  return parsed?.protocol === 'http:' && IMDS_HOSTS.has(parsed.host);
}

interface EndpointConfig {
  readonly imdsEndpoint?: string | undefined;
}

/**
 * Refuses test-only overrides outside test mode, and an environment DynamoDB endpoint the netconf rule would
 * refuse (the netconf's own `dynamoEndpoint` is checked with the rest of the netconf, code 7).
 * @throws CniError code 4 for the environment, 7 for the netconf
 */
export function checkOverrides(env: NodeJS.ProcessEnv, config: EndpointConfig): void {
  const testMode = isTestMode(env);
  const stray = TEST_ONLY_ENV.filter((name) => env[name] !== undefined && env[name] !== '');
  if (!testMode && stray.length > 0) throw new CniError(CniCode.invalidEnvironment, testOnlyRefusal(stray));
  const envImds = env['AWS_EC2_METADATA_SERVICE_ENDPOINT'];
  if (!testMode && envImds && !isImdsEndpoint(envImds))
    throw new CniError(
      CniCode.invalidEnvironment,
      testOnlyRefusal([`AWS_EC2_METADATA_SERVICE_ENDPOINT=${envImds}`], OWN_IMDS),
    );
  if (!testMode && config.imdsEndpoint && !isImdsEndpoint(config.imdsEndpoint))
    throw new CniError(
      CniCode.invalidConfig,
      'invalid network configuration',
      testOnlyRefusal([`imdsEndpoint: ${config.imdsEndpoint}`], OWN_IMDS),
    );
  for (const name of ['AWS_ENDPOINT_URL_DYNAMODB', 'AWS_ENDPOINT_URL'] as const) {
    const value = env[name];
    const problem = value ? storeEndpointProblem(value) : undefined;
    if (problem) throw new CniError(CniCode.invalidEnvironment, `${name}: ${problem}`);
  }
}
