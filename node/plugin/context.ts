import { appendFileSync, chmodSync, mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import type { LeaseHolder } from '../../shared/domain/lease.js';
import { errorMessage } from '../../shared/errors.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import { createLogger, type Logger } from '../../shared/log.js';
import type { CniRequest } from '../cni/skel.js';
import { type PluginConfig, parseNetconf } from '../config/netconf.js';
import { checkOverrides } from '../config/overrides.js';
import type { Datapath } from '../datapath/port.js';
import { type TestHooks, testHooksFromEnv } from '../datapath/test-hooks.js';
import { type IdentityOptions, loadIdentity, type NodeIdentity } from '../identity/identity.js';
import { Journal } from '../journal/journal.js';
import { rotateIfFull } from './log-rotation.js';

/**
 * Everything one CNI call works with, built lazily: VERSION needs none of it, STATUS no datapath, and the
 * netlink binding (the largest start-up cost) is loaded only by the commands that touch links.
 */
export interface PluginDeps {
  readonly env: NodeJS.ProcessEnv;
  readonly nowMs: () => number;
  /** The kernel's boot id (STATUS: was the node READY in this boot). */
  readonly bootId: () => string;
  openStore(config: PluginConfig, identity: NodeIdentity): LeaseStore;
  openDatapath(log: Logger, hooks: TestHooks): Promise<Datapath>;
  /** The node agent keeps the identity in memory across calls; a plugin process reads the on-disk cache. */
  loadIdentity?(options: IdentityOptions): Promise<NodeIdentity>;
}

export class CallContext {
  readonly config: PluginConfig;
  readonly log: Logger;
  readonly hooks: TestHooks;
  readonly journal: Journal;
  private identityPromise?: Promise<NodeIdentity>;
  private storeInstance?: LeaseStore;
  private datapathPromise?: Promise<Datapath>;

  constructor(
    readonly request: CniRequest,
    private readonly deps: PluginDeps,
  ) {
    this.hooks = testHooksFromEnv(deps.env);
    this.config = parseNetconf(request.netconf);
    checkOverrides(deps.env, this.config);
    this.log = fileLogger(this.config).child({
      command: request.command,
      ...(request.containerId ? { containerId: request.containerId } : {}),
      ...(request.ifName ? { ifName: request.ifName } : {}),
    });
    this.journal = new Journal(this.config.dataDir);
  }

  nowMs(): number {
    return this.deps.nowMs();
  }

  bootId(): string {
    return this.deps.bootId();
  }

  get holder(): LeaseHolder {
    const podNamespace = this.request.args['K8S_POD_NAMESPACE'];
    const podName = this.request.args['K8S_POD_NAME'];
    return {
      containerId: this.request.containerId,
      ifName: this.request.ifName,
      netns: this.request.netns,
      network: this.config.name,
      ...(podNamespace ? { podNamespace } : {}),
      ...(podName ? { podName } : {}),
    };
  }

  identity(): Promise<NodeIdentity> {
    this.identityPromise ??= (this.deps.loadIdentity ?? loadIdentity)({
      dataDir: this.config.dataDir,
      ttlS: this.config.identityCacheTtlS,
      timeoutMs: this.config.imdsTimeoutMs,
      ...(this.config.imdsEndpoint ? { endpoint: this.config.imdsEndpoint } : {}),
      env: this.deps.env,
      nowMs: this.deps.nowMs(),
    });
    return this.identityPromise;
  }

  async store(): Promise<LeaseStore> {
    this.storeInstance ??= this.deps.openStore(this.config, await this.identity());
    return this.storeInstance;
  }

  datapath(): Promise<Datapath> {
    this.datapathPromise ??= this.deps.openDatapath(this.log, this.hooks);
    return this.datapathPromise;
  }

  async close(): Promise<void> {
    if (this.datapathPromise) (await this.datapathPromise.catch(() => undefined))?.close();
  }
}

/** Pod names, addresses and errors are for root and the log group, not every local user. */
const LOG_FILE_MODE = 0o640;

/** Most bytes a process writes between two looks at the log's size (the first look is at its first line). */
const ROTATION_CHECK_BYTES = 64 * 1024;

/**
 * JSON lines appended to the configured file, created 0640 or stricter whatever the umask (a file an older version
 * left wider is narrowed on first write) and rotated at `logMaxBytes`; a log that cannot be written never fails
 * the call.
 */
export function fileLogger(
  config: Pick<PluginConfig, 'logFile' | 'logLevel' | 'logMaxBytes' | 'logKeepFiles'>,
): Logger {
  let ready = false;
  // A small bound is looked at more often, so no writer overshoots it by more than an eighth.
  const checkEveryBytes = Math.min(ROTATION_CHECK_BYTES, Math.floor(config.logMaxBytes / 8));
  let sinceCheckBytes = checkEveryBytes;
  const bound = { maxBytes: config.logMaxBytes, keepFiles: config.logKeepFiles };
  return createLogger({
    level: config.logLevel,
    fields: { pid: process.pid },
    sink: (line) => {
      try {
        if (!ready) {
          mkdirSync(dirname(config.logFile), { recursive: true, mode: 0o750 });
        }
        if (sinceCheckBytes >= checkEveryBytes) {
          sinceCheckBytes = 0;
          rotateIfFull(config.logFile, bound);
        }
        appendFileSync(config.logFile, `${line}\n`, { mode: LOG_FILE_MODE });
        sinceCheckBytes += line.length + 1;
        if (!ready) {
          ready = true;
          // The mode above applies only on creation, and then through the umask, which may be wider or narrower.
          // Rotated away already by another process: the file it left was created here, 0640 or narrower.
          const mode = statSync(config.logFile, { throwIfNoEntry: false })?.mode ?? 0;
          if ((mode & 0o777 & ~LOG_FILE_MODE) !== 0) chmodSync(config.logFile, LOG_FILE_MODE);
        }
      } catch (err) {
        process.stderr.write(`vpc-lease-cni: cannot write ${config.logFile}: ${errorMessage(err)}\n`);
      }
    },
  });
}
