import { VpcLeaseError } from '../../shared/errors.js';
import { CniCode, CniError } from '../cni/errors.js';
import { isTestMode, testOnlyRefusal } from '../config/overrides.js';
import { EGRESS_STEPS, ROUTING_STEPS, type RoutingStep } from './pod-routing.js';

/**
 * Test-only switches, honoured only in test mode (overrides.ts) and refused otherwise, so a stray variable on a
 * real node can never change what the plugin does:
 * - VPC_LEASE_TEST_LINK_KIND=macvlan: this machine's kernel has no ipvlan; macvlan takes the same netlink path.
 * - VPC_LEASE_TEST_FAIL_AT=<step>: fail right after <step> completed, to prove its undo runs. The steps of
 *   ROUTING_STEPS (tables, rules, host veth) run only in the configurations that need them (L3/L3S, hostVeth).
 * - VPC_LEASE_TEST_SKIP_ENI_UP=1: setup leaves a down ENI down, the negative control showing that a plugin which
 *   does not bring a hot-plugged ENI up gives its pods no carrier.
 * - VPC_LEASE_TEST_HANG_AT=<step>: block the whole process right after <step>, so a test can SIGKILL the node
 *   agent with an ADD half done at a known point (the agent sets it from its own environment, never a request's).
 * The last three are fault points: the shipped executable is built without them (__VPC_LEASE_FAULTS__).
 */
declare global {
  /**
   * False in the shipped build (packaging/build.ts defines it), so esbuild drops every fault point with its
   * variables' names; unset (on) in TypeScript sources and the development build. Each use reads it afresh:
   * esbuild folds the constant where it stands, not through a variable of a lazily initialised module.
   */
  var __VPC_LEASE_FAULTS__: boolean | undefined;
}

export const FAULT_STEPS = [
  'journal-intent',
  'claim',
  'journal-record',
  'find-master',
  'open-netns',
  'create-link',
  'rename-link',
  'add-address',
  'link-up',
  'add-route',
  'read-back',
  'print-result',
] as const;
/** Steps only a dual-stack ADD takes (between its IPv4 and IPv6 claims); every ADD takes FAULT_STEPS. */
export const DUAL_FAULT_STEPS = ['between-claims'] as const;
export type FaultStep = (typeof FAULT_STEPS)[number] | (typeof DUAL_FAULT_STEPS)[number] | RoutingStep;
const ALL_STEPS: readonly string[] = [...FAULT_STEPS, ...DUAL_FAULT_STEPS, ...ROUTING_STEPS, ...EGRESS_STEPS];

export interface TestHooks {
  readonly linkKind: 'ipvlan' | 'macvlan';
  readonly failAt?: FaultStep;
  readonly skipEniUp?: boolean;
  readonly hangAt?: FaultStep;
}

export class InjectedFault extends VpcLeaseError {
  constructor(readonly step: FaultStep) {
    super(`injected fault after ${step}`);
  }
}

export const NO_HOOKS: TestHooks = { linkKind: 'ipvlan' };

/** The fault points' variables; none in the shipped build. */
const FAULT_ENV =
  globalThis.__VPC_LEASE_FAULTS__ !== false
    ? ['VPC_LEASE_TEST_FAIL_AT', 'VPC_LEASE_TEST_SKIP_ENI_UP', 'VPC_LEASE_TEST_HANG_AT']
    : [];

export function testHooksFromEnv(env: NodeJS.ProcessEnv): TestHooks {
  const kind = env['VPC_LEASE_TEST_LINK_KIND'];
  const set = ['VPC_LEASE_TEST_LINK_KIND', ...FAULT_ENV].filter((name) => env[name]);
  if (set.length === 0) return NO_HOOKS;
  if (!isTestMode(env)) throw new CniError(CniCode.invalidEnvironment, testOnlyRefusal(set));
  if (kind && kind !== 'ipvlan' && kind !== 'macvlan')
    throw new CniError(CniCode.invalidEnvironment, `VPC_LEASE_TEST_LINK_KIND must be ipvlan or macvlan, got ${kind}`);
  return { linkKind: kind === 'macvlan' ? 'macvlan' : 'ipvlan', ...faultsFromEnv(env) };
}

function faultsFromEnv(env: NodeJS.ProcessEnv): Omit<TestHooks, 'linkKind'> {
  if (globalThis.__VPC_LEASE_FAULTS__ === false) return {};
  const failAt = env['VPC_LEASE_TEST_FAIL_AT'];
  const skipEniUp = env['VPC_LEASE_TEST_SKIP_ENI_UP'];
  const hangAt = env['VPC_LEASE_TEST_HANG_AT'];
  if (failAt && !ALL_STEPS.includes(failAt))
    throw new CniError(CniCode.invalidEnvironment, `VPC_LEASE_TEST_FAIL_AT: unknown step ${failAt}`);
  if (hangAt && !ALL_STEPS.includes(hangAt))
    throw new CniError(CniCode.invalidEnvironment, `VPC_LEASE_TEST_HANG_AT: unknown step ${hangAt}`);
  if (skipEniUp && skipEniUp !== '1')
    throw new CniError(CniCode.invalidEnvironment, `VPC_LEASE_TEST_SKIP_ENI_UP must be 1, got ${skipEniUp}`);
  return {
    ...(failAt ? { failAt: failAt as FaultStep } : {}),
    ...(skipEniUp ? { skipEniUp: true } : {}),
    ...(hangAt ? { hangAt: hangAt as FaultStep } : {}),
  };
}

export function faultPoint(hooks: TestHooks, step: FaultStep): void {
  if (globalThis.__VPC_LEASE_FAULTS__ === false) return;
  if (hooks.failAt === step) throw new InjectedFault(step);
  // Synchronous on purpose: nothing else in the process may run on (the test kills it here).
  if (hooks.hangAt === step) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
}

/** The node agent's own hang point (test mode), which it adds to every forwarded call's environment. */
export function agentHangAt(env: NodeJS.ProcessEnv): string | undefined {
  return globalThis.__VPC_LEASE_FAULTS__ !== false && isTestMode(env) ? env['VPC_LEASE_TEST_HANG_AT'] : undefined;
}

/** A forwarded call's environment: without the request's own hang point, with the agent's if it has one. */
export function withAgentHangAt(env: NodeJS.ProcessEnv, hangAt: string | undefined): NodeJS.ProcessEnv {
  if (globalThis.__VPC_LEASE_FAULTS__ === false) return env;
  const { VPC_LEASE_TEST_HANG_AT: _fromRequest, ...rest } = env;
  return hangAt ? { ...rest, VPC_LEASE_TEST_HANG_AT: hangAt } : rest;
}
