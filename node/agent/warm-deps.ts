import type { LeaseStore } from '../../shared/lease-store/port.js';
import type { Logger } from '../../shared/log.js';
import { sleepMs } from '../../shared/sleep.js';
import type { PluginConfig } from '../config/netconf.js';
import { NetlinkDatapath } from '../datapath/netlink-datapath.js';
import { withAgentHangAt } from '../datapath/test-hooks.js';
import { type IdentityOptions, loadIdentity, type NodeIdentity } from '../identity/identity.js';
import { fenced } from '../journal/call-scope.js';
import type { DynamoRequestObserver } from '../metrics/observed-dynamo.js';
import type { PluginDeps } from '../plugin/context.js';
import { readBootId } from '../plugin/status.js';
import { openLeaseStore } from '../store/open-store.js';

/** Credentials this close to expiry are not handed out (the plugin's on-disk cache uses the same margin). */
const CREDENTIAL_MARGIN_MS = 5 * 60_000;
/** How long before an identity stops being handed out it is fetched again, off the request path. */
const REFRESH_AHEAD_MS = 60_000;
/** Configurations and identities seen by one agent: a node has one or two; a bound keeps a bug from growing it. */
const MAX_ENTRIES = 16;

/** What the agent's metrics watch (node/metrics/agent-metrics.ts); every hook is optional and must not throw. */
export interface WarmDepsHooks {
  /** Times each DynamoDB request of the stores the agent opens. */
  readonly observeStore?: DynamoRequestObserver;
  /** After each identity fetch from IMDS (a credential refresh), successful or not. */
  readonly onIdentityFetch?: (ok: boolean) => void;
  /** Each store opened, with the node and configuration it serves. */
  readonly onStoreOpened?: (store: LeaseStore, identity: NodeIdentity, config: PluginConfig) => void;
}

interface WarmIdentity {
  identity: NodeIdentity;
  validUntilMs: number;
  refresh?: Promise<void>;
  timer?: NodeJS.Timeout;
}

function identityKey(options: IdentityOptions): string {
  const env = options.env;
  return JSON.stringify([
    options.dataDir,
    options.endpoint ?? env['AWS_EC2_METADATA_SERVICE_ENDPOINT'] ?? '',
    options.ttlS,
    options.timeoutMs,
    env['AWS_ACCESS_KEY_ID'] ?? '',
    env['AWS_SECRET_ACCESS_KEY'] ?? '',
    env['AWS_SESSION_TOKEN'] ?? '',
  ]);
}

/** `target` with every method called `ms` later (test mode only). */
function delayed<T extends object>(target: T, ms: number): T {
  return new Proxy(target, {
    get(obj, key) {
      const value: unknown = Reflect.get(obj, key, obj);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        await sleepMs(ms);
        return (value as (...a: unknown[]) => unknown).apply(obj, args);
      };
    },
  });
}

/**
 * What a plugin process rebuilds on every call, kept by the agent across calls: the instance identity and role
 * credentials in memory (fetched again from IMDS a minute before the plugin's own cache would stop using them,
 * so no request waits on IMDS), and one lease store per configuration, whose HTTP keep-alive agent keeps the
 * TLS session to DynamoDB open. The netlink binding and the setns addon stay loaded; each call opens its own
 * rtnetlink socket (microseconds), so a request's socket never serves another's netns.
 */
export class WarmDeps {
  private readonly identities = new Map<string, WarmIdentity>();
  private readonly stores = new Map<string, LeaseStore>();
  /** IMDS fetches made by the agent (tests and metrics read it). */
  refreshes = 0;

  constructor(
    private readonly log: Logger,
    private readonly nowMs: () => number = Date.now,
    /** The agent's own hang point (agentHangAt), in place of any a request carries. */
    private readonly hangAt?: string,
    private readonly hooks: WarmDepsHooks = {},
    /** Test mode: every store request waits this long first (a stalled DynamoDB), then meets the call's fence. */
    private readonly storeDelayMs = 0,
  ) {}

  /** The PluginDeps of one forwarded call: the request's own environment, the agent's warm parts. */
  forCall(requestEnv: NodeJS.ProcessEnv): PluginDeps {
    const env = withAgentHangAt(requestEnv, this.hangAt);
    return {
      env,
      nowMs: this.nowMs,
      bootId: () => readBootId(),
      loadIdentity: (options) => this.identity(options),
      // Fenced: a call the agent abandoned at its deadline makes no request after it (node/journal/call-scope.ts).
      openStore: (config, identity) => {
        const store = fenced(this.store(config, identity, env), 'the lease store');
        return this.storeDelayMs > 0 ? delayed(store, this.storeDelayMs) : store;
      },
      openDatapath: async (log, hooks) => fenced(await NetlinkDatapath.open(log, hooks), 'the datapath'),
    };
  }

  async identity(options: IdentityOptions): Promise<NodeIdentity> {
    const key = identityKey(options);
    const warm = this.identities.get(key);
    if (warm && this.nowMs() < warm.validUntilMs) return warm.identity;
    return this.fetch(key, options, false);
  }

  private async fetch(key: string, options: IdentityOptions, force: boolean): Promise<NodeIdentity> {
    // ttlS 0 skips the on-disk copy: a refresh ahead of time must ask IMDS, not reread what is about to expire.
    let identity: NodeIdentity;
    try {
      identity = await loadIdentity({ ...options, nowMs: this.nowMs(), ...(force ? { ttlS: 0 } : {}) });
    } catch (err) {
      this.hooks.onIdentityFetch?.(false);
      throw err;
    }
    if (identity.source === 'imds') {
      this.refreshes++;
      this.hooks.onIdentityFetch?.(true);
    }
    const nowMs = this.nowMs();
    const expiry = identity.credentials.expirationMs;
    const validUntilMs = Math.min(
      nowMs + options.ttlS * 1000,
      expiry === undefined ? Number.POSITIVE_INFINITY : expiry - CREDENTIAL_MARGIN_MS,
    );
    const previous = this.identities.get(key);
    if (previous?.timer) clearTimeout(previous.timer);
    if (!previous && this.identities.size >= MAX_ENTRIES) this.clear();
    const warm: WarmIdentity = { identity, validUntilMs };
    const refreshInMs = validUntilMs - REFRESH_AHEAD_MS - nowMs;
    if (refreshInMs > 0 && Number.isFinite(refreshInMs)) {
      warm.timer = setTimeout(() => this.refreshAhead(key, options, warm), refreshInMs);
      warm.timer.unref();
    }
    this.identities.set(key, warm);
    return identity;
  }

  private refreshAhead(key: string, options: IdentityOptions, warm: WarmIdentity): void {
    warm.refresh ??= this.fetch(key, options, true).then(
      () => undefined,
      // The current identity stays in use until it lapses; the next call then fetches in the foreground.
      (err: unknown) => this.log.warn('identity refresh failed', { error: String(err) }),
    );
  }

  private store(config: PluginConfig, identity: NodeIdentity, env: NodeJS.ProcessEnv): LeaseStore {
    // The light client reads the endpoint variables from its own process; a request's come from the runtime.
    const endpoint = config.dynamoEndpoint ?? env['AWS_ENDPOINT_URL_DYNAMODB'] ?? env['AWS_ENDPOINT_URL'];
    const key = JSON.stringify([
      config.tableName,
      config.region ?? identity.document.region,
      endpoint ?? '',
      config.storeTimeoutMs,
      config.dataDir,
      identity.instanceArn,
    ]);
    let store = this.stores.get(key);
    if (!store) {
      if (this.stores.size >= MAX_ENTRIES) this.stores.clear();
      const options: IdentityOptions = {
        dataDir: config.dataDir,
        ttlS: config.identityCacheTtlS,
        timeoutMs: config.imdsTimeoutMs,
        ...(config.imdsEndpoint ? { endpoint: config.imdsEndpoint } : {}),
        env,
        nowMs: this.nowMs(),
      };
      store = openLeaseStore(
        endpoint ? { ...config, dynamoEndpoint: endpoint } : config,
        identity,
        async () => (await this.identity(options)).credentials,
        this.hooks.observeStore,
      );
      this.stores.set(key, store);
      this.hooks.onStoreOpened?.(store, identity, config);
    }
    return store;
  }

  clear(): void {
    for (const warm of this.identities.values()) if (warm.timer) clearTimeout(warm.timer);
    this.identities.clear();
  }
}
