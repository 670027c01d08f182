import { MAX_CONTAINER_ID_CHARS } from '../../shared/domain/lease.js';
import {
  errorMessage,
  LeaseConflictError,
  NoFreeLeaseError,
  StoreUnavailableError,
  ValidationError,
} from '../../shared/errors.js';
import { CniCode, CniError } from './errors.js';
import { atLeast, type CniVersion, LATEST_VERSION, negotiate, SUPPORTED_VERSIONS } from './version.js';

/**
 * The part of every CNI plugin that is not about networking: the CNI_* environment, the netconf on stdin,
 * version negotiation, and the error JSON. Handlers receive a validated request and return what to print.
 */
export const CNI_COMMANDS = ['ADD', 'DEL', 'CHECK', 'GC', 'STATUS', 'VERSION'] as const;
export type CniCommand = (typeof CNI_COMMANDS)[number];

export interface CniRequest {
  readonly command: Exclude<CniCommand, 'VERSION'>;
  readonly containerId: string;
  readonly netns: string;
  readonly ifName: string;
  readonly args: Readonly<Record<string, string>>;
  readonly path: readonly string[];
  readonly version: CniVersion;
  /** The decoded netconf, unvalidated beyond being a JSON object with a supported cniVersion. */
  readonly netconf: Readonly<Record<string, unknown>>;
}

/** What a handler returns: an object to print as JSON on stdout, or nothing (DEL, GC, STATUS). */
export type CniOutput = Record<string, unknown> | undefined;
export type CniHandler = (request: CniRequest) => Promise<CniOutput>;
export type CniHandlers = Readonly<Record<Exclude<CniCommand, 'VERSION'>, CniHandler>>;

export interface SkelIo {
  readonly env: NodeJS.ProcessEnv;
  readStdin(): string;
  writeStdout(text: string): void;
  /** Called with every failure, before the error JSON is printed (the plugin logs it). */
  onError?(err: unknown, code: number): void;
}

const REQUIRED_ENV: Record<Exclude<CniCommand, 'VERSION'>, readonly string[]> = {
  ADD: ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'],
  CHECK: ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'],
  DEL: ['CNI_CONTAINERID', 'CNI_IFNAME', 'CNI_PATH'],
  GC: ['CNI_PATH'],
  STATUS: ['CNI_PATH'],
};

/** Commands newer than the oldest version we speak: a configuration of an older version may not ask for them. */
const MIN_VERSION: Partial<Record<CniCommand, string>> = { CHECK: '0.4.0', GC: '1.1.0', STATUS: '1.1.0' };

const CONTAINER_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

function envError(msg: string): CniError {
  return new CniError(CniCode.invalidEnvironment, msg);
}

function validateIfName(name: string): void {
  // The kernel's own rule (dev_valid_name): at most 15 bytes, no '/', ':' or whitespace, not "." or "..".
  if (name.length === 0 || Buffer.byteLength(name) > 15 || /[/:\s]/.test(name) || name === '.' || name === '..')
    throw envError(`invalid CNI_IFNAME ${JSON.stringify(name)}`);
}

function parseCniArgs(raw: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!raw) return out;
  for (const pair of raw.split(';')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    if (eq <= 0) throw envError(`invalid CNI_ARGS pair ${JSON.stringify(pair)}`);
    out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return out;
}

/** Maps any failure to the CNI error it is reported as. */
export function toCniError(err: unknown): CniError {
  if (err instanceof CniError) return err;
  if (err instanceof ValidationError)
    return new CniError(CniCode.invalidConfig, err.message, err.problems.join('; '), { cause: err });
  if (err instanceof NoFreeLeaseError || err instanceof StoreUnavailableError || err instanceof LeaseConflictError)
    return new CniError(CniCode.tryAgainLater, err.message, err.name, { cause: err });
  return new CniError(CniCode.internal, errorMessage(err), err instanceof Error ? err.name : undefined, {
    cause: err,
  });
}

function decode(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new CniError(CniCode.decodeFailure, 'failed to decode the network configuration', errorMessage(err));
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new CniError(CniCode.decodeFailure, 'the network configuration must be a JSON object');
  return value as Record<string, unknown>;
}

/** Runs one CNI invocation; returns the process exit code (0, or 1 after printing the error JSON). */
export async function runSkel(handlers: CniHandlers, io: SkelIo): Promise<number> {
  let version: CniVersion = LATEST_VERSION;
  try {
    const command = io.env['CNI_COMMAND'];
    if (command === undefined || command === '') throw envError('required env variable CNI_COMMAND is missing');
    if (!(CNI_COMMANDS as readonly string[]).includes(command))
      throw envError(`unknown CNI_COMMAND ${JSON.stringify(command)}`);
    if (command === 'VERSION') {
      io.writeStdout(JSON.stringify({ cniVersion: LATEST_VERSION, supportedVersions: SUPPORTED_VERSIONS }));
      return 0;
    }
    const cmd = command as Exclude<CniCommand, 'VERSION'>;
    const missingEnv = REQUIRED_ENV[cmd].filter((name) => !io.env[name]);
    if (missingEnv.length > 0) throw envError(`required env variables [${missingEnv.join(',')}] missing`);
    const containerId = io.env['CNI_CONTAINERID'] ?? '';
    if (containerId !== '' && !CONTAINER_ID.test(containerId))
      throw envError(`invalid CNI_CONTAINERID ${JSON.stringify(containerId)}`);
    if (containerId.length > MAX_CONTAINER_ID_CHARS)
      throw envError(
        `CNI_CONTAINERID has ${containerId.length} characters; vpc-lease records at most ${MAX_CONTAINER_ID_CHARS}`,
      );
    const ifName = io.env['CNI_IFNAME'] ?? '';
    if (ifName !== '') validateIfName(ifName);
    const args = parseCniArgs(io.env['CNI_ARGS']);
    const netconf = decode(io.readStdin());
    version = negotiate(netconf['cniVersion']);
    const minimum = MIN_VERSION[cmd];
    if (minimum && !atLeast(version, minimum))
      throw new CniError(CniCode.incompatibleVersion, `config version does not allow ${cmd}`);
    const output = await handlers[cmd]({
      command: cmd,
      containerId,
      netns: io.env['CNI_NETNS'] ?? '',
      ifName,
      args,
      path: (io.env['CNI_PATH'] ?? '').split(':').filter((p) => p !== ''),
      version,
      netconf,
    });
    if (output !== undefined) io.writeStdout(JSON.stringify(output));
    return 0;
  } catch (err) {
    const cniError = toCniError(err);
    io.onError?.(err, cniError.code);
    io.writeStdout(
      JSON.stringify({
        cniVersion: version,
        code: cniError.code,
        msg: cniError.message,
        ...(cniError.details !== undefined ? { details: cniError.details } : {}),
      }),
    );
    return 1;
  }
}
