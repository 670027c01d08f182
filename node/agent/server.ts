import { chmodSync, lstatSync, mkdirSync, renameSync, statSync, unlinkSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { dirname } from 'node:path';
import { errorMessage } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { CniCode } from '../cni/errors.js';
import { runSkel } from '../cni/skel.js';
import { loadNetnsAddon } from '../datapath/native.js';
import { type CallScope, callScope } from '../journal/call-scope.js';
import { pluginHandlers } from '../plugin/handlers.js';
import { budgetOf, type CallBudget } from './budget.js';
import type { AgentHealth, AgentObserver } from './observer.js';
import {
  ACCEPTED,
  type AgentRequest,
  decodeRequest,
  encodeAcceptWithWait,
  encodeAnswer,
  MAX_FRAME_BYTES,
  REFUSED,
} from './protocol.js';
import type { WarmDeps } from './warm-deps.js';

/** A shim sends its request at once; a connection still incomplete after this is not one worth waiting for. */
const REQUEST_READ_TIMEOUT_MS = 5_000;
/** Only root may connect: the socket and its directory admit no one else (node/README.md, "Agent"). */
const SOCKET_MODE = 0o600;
const DIR_MODE = 0o700;
/** Below the probe's own timeout (daemonset.yaml, timeoutSeconds 5), so a refusal is told apart from a stall. */
const HEALTH_CONNECT_TIMEOUT_MS = 2_000;
/**
 * Calls run at once: enough to keep the store's round trips overlapped, few enough that a burst does not multiply
 * the agent's memory (each call holds its netconf, a netlink socket and the store's pending requests).
 */
export const MAX_RUNNING = 16;
/** Calls accepted beyond those, waiting in order; past this the agent refuses and the shim falls back or retries. */
export const MAX_QUEUED = 256;
/** Calls abandoned at their deadline and still not settled: this many means the agent is wedged (not live). */
const MAX_ABANDONED = MAX_RUNNING;
/** A stat of the socket path: cheap, and a second's overlap of two agents on the metrics port costs nothing. */
const OWNERSHIP_CHECK_MS = 1_000;

export class AgentSocketError extends Error {}

/**
 * Makes the socket's directory root-only: created 0700, or an existing one checked (a directory, not a link,
 * owned by this user) and narrowed. A directory someone else owns could be swapped under us: refuse it.
 */
function secureDirectory(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: DIR_MODE });
  const st = lstatSync(dir);
  if (!st.isDirectory()) throw new AgentSocketError(`${dir} is not a directory`);
  const uid = process.getuid?.() ?? 0;
  if (st.uid !== uid) throw new AgentSocketError(`${dir} belongs to uid ${st.uid}, not ${uid}`);
  if ((st.mode & 0o077) !== 0) chmodSync(dir, DIR_MODE);
}

/**
 * The connecting process's uid (SO_PEERCRED), or undefined when the socket has no descriptor to ask. Node keeps
 * the descriptor on its pipe handle, which it does not type.
 */
function peerUid(socket: Socket): number | undefined {
  const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
  return fd === undefined || fd < 0 ? undefined : loadNetnsAddon().peerUid(fd);
}

/** The network namespace this thread is in (its nsfs inode). */
function threadNetns(): number {
  return statSync('/proc/thread-self/ns/net').ino;
}

export interface AgentServerOptions {
  readonly socketPath: string;
  readonly deps: WarmDeps;
  readonly observer: AgentObserver;
  readonly log: Logger;
  /** Requests the agent leaves to the plugin on the host (answered 'R': the shim falls back). */
  readonly refuse?: (request: AgentRequest) => boolean;
  /** Called when a request left this thread in another network namespace: nothing after it may run here. */
  readonly onNetnsLeak?: () => void;
  /** Told when a newer agent took the socket path (false) and when this one took it back (true). */
  readonly onOwnership?: (owner: boolean) => void;
  /** How often the agent looks at who owns the socket path (default OWNERSHIP_CHECK_MS). */
  readonly ownershipCheckMs?: number;
  /** Calls run at once, and accepted calls waiting (defaults MAX_RUNNING, MAX_QUEUED). */
  readonly maxRunning?: number;
  readonly maxQueued?: number;
  /** Each call's deadline and the shim's wait (default: from the request's netconf, node/agent/budget.ts). */
  readonly budget?: (request: AgentRequest) => CallBudget;
}

/**
 * The node agent's socket: each connection is one CNI call, run with the plugin's own handlers (same code, same
 * per-attachment lock, same journal) and the agent's warm identity, store and netlink binding. Calls run
 * concurrently: every namespace switch (node/datapath/native.ts, inNetns) is synchronous, so no await ever
 * happens while this thread is inside a pod's netns; a check after each call enforces it.
 */
export class AgentServer {
  private readonly sockets = new Set<Socket>();
  private readonly running = new Set<Promise<void>>();
  private draining = false;
  private readonly homeNetns = threadNetns();
  private server: Server = createServer();
  private boundIno = 0;
  /** False once a newer agent took the socket path (a surge rollout): this one finishes its calls and stands by. */
  private owner = true;
  private watch: NodeJS.Timeout | undefined;
  /** Calls holding one of the maxRunning slots, and accepted calls waiting for one, in order. */
  private active = 0;
  private readonly waiting: { grant: () => void }[] = [];
  /** Abandoned at their deadline, not settled yet. */
  private abandonedPending = 0;

  private constructor(private readonly options: AgentServerOptions) {}

  /** Listens on `socketPath` (see bind), then watches who owns the path (see checkOwnership). */
  static async start(options: AgentServerOptions): Promise<AgentServer> {
    secureDirectory(dirname(options.socketPath));
    const agent = new AgentServer(options);
    await agent.bind();
    options.log.info('agent listening', { socket: options.socketPath });
    agent.watch = setInterval(() => void agent.checkOwnership(), options.ownershipCheckMs ?? OWNERSHIP_CHECK_MS);
    agent.watch.unref();
    return agent;
  }

  /**
   * Takes `socketPath`, replacing a socket left there (a crashed agent's, or the previous version's during a
   * rolling update: it keeps serving the connections it has). Bound under a temp name, narrowed to 0600, then
   * renamed: the path never names a socket with a wider mode, nor none while an old one was there.
   */
  private async bind(): Promise<void> {
    const server = createServer();
    server.on('connection', (socket) => this.serve(socket));
    const tmp = `${this.options.socketPath}.${process.pid}.tmp`;
    try {
      unlinkSync(tmp);
    } catch {
      // none
    }
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(tmp, () => {
        server.off('error', reject);
        resolve();
      });
    });
    chmodSync(tmp, SOCKET_MODE);
    renameSync(tmp, this.options.socketPath);
    const previous = this.server;
    this.server = server;
    this.boundIno = statSync(this.options.socketPath).ino;
    this.owner = true;
    if (previous.listening) previous.close();
  }

  /**
   * The handoff (docs/DESIGN.md, "The node agent"): whoever bound the path last serves it and holds the metrics
   * port. An agent whose path now names another socket stands by and lets the port go; a standing-by agent takes
   * the path back when nothing answers there (the newer agent stopped or died), so a node never stays without one.
   */
  private async checkOwnership(): Promise<void> {
    if (this.draining) return;
    if (this.owner) {
      const ino = statSync(this.options.socketPath, { throwIfNoEntry: false })?.ino;
      if (ino === this.boundIno) return;
      if (ino === undefined) {
        // Removed under us, not taken: bind it again and keep the port.
        await this.bind();
        this.options.log.warn('agent: its socket was removed; bound it again', { socket: this.options.socketPath });
        return;
      }
      this.owner = false;
      this.options.log.warn('agent: another agent took the socket; standing by', { socket: this.options.socketPath });
      this.options.onOwnership?.(false);
      return;
    }
    if ((await this.connectError()) === undefined) return;
    await this.bind();
    this.options.log.warn('agent: nothing served the socket; took it back', { socket: this.options.socketPath });
    this.options.onOwnership?.(true);
  }

  /** Why a client's connect to the path fails (closed at once when it succeeds), or undefined. */
  private connectError(): Promise<string | undefined> {
    return new Promise((resolve) => {
      const probe = connect(this.options.socketPath, () => {
        probe.destroy();
        resolve(undefined);
      });
      probe.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
      probe.setTimeout(HEALTH_CONNECT_TIMEOUT_MS, () => {
        probe.destroy();
        resolve('connect timed out');
      });
    });
  }

  /**
   * Serving means: not draining, this process's own socket at the path (not a newer agent's), and the path
   * accepting a connection. A stalled event loop never answers the probe at all, which the kubelet counts as a
   * failure too. `live` tells a standing-by agent (alive, not serving) from a broken one.
   */
  async health(): Promise<AgentHealth> {
    if (this.draining) return { ok: false, live: true, reason: 'draining' };
    if (this.abandonedPending >= MAX_ABANDONED)
      return { ok: false, live: false, reason: `${this.abandonedPending} calls stuck past their deadline` };
    if (!this.server.listening) return { ok: false, live: false, reason: 'the socket server is closed' };
    const ino = statSync(this.options.socketPath, { throwIfNoEntry: false })?.ino;
    if (ino !== undefined && (!this.owner || ino !== this.boundIno))
      return { ok: false, live: true, reason: `standing by: another agent serves ${this.options.socketPath}` };
    const error = await this.connectError();
    if (error) return { ok: false, live: false, reason: `cannot connect to ${this.options.socketPath}: ${error}` };
    return { ok: true, live: true, reason: 'serving' };
  }

  get inFlight(): number {
    return this.running.size;
  }

  private serve(socket: Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => undefined);
    // Modes keep others off the path; the peer's uid holds even if a mount or a chmod widened them.
    const uid = peerUid(socket);
    if (uid !== 0) {
      this.options.log.warn('agent: refused a caller that is not root', { uid: uid ?? 'unknown' });
      socket.destroy();
      return;
    }
    if (this.draining) {
      socket.end(Buffer.from([REFUSED]));
      return;
    }
    const chunks: Buffer[] = [];
    let bytes = 0;
    const timer = setTimeout(() => socket.destroy(), REQUEST_READ_TIMEOUT_MS);
    socket.once('close', () => clearTimeout(timer));
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      bytes += chunk.length;
      let request: AgentRequest | undefined;
      try {
        if (bytes > MAX_FRAME_BYTES + 12) throw new Error(`request over ${MAX_FRAME_BYTES} bytes`);
        request = decodeRequest(Buffer.concat(chunks));
      } catch (err) {
        clearTimeout(timer);
        this.options.log.warn('agent: not a shim request', { error: errorMessage(err) });
        socket.destroy();
        return;
      }
      if (!request) return;
      clearTimeout(timer);
      socket.off('data', onData);
      if (this.draining || this.options.refuse?.(request)) {
        socket.end(Buffer.from([REFUSED]));
        return;
      }
      // Back-pressure: a full queue refuses, and the shim retries or takes one of the node's few fallback slots.
      if (this.waiting.length >= (this.options.maxQueued ?? MAX_QUEUED)) {
        socket.end(Buffer.from([REFUSED]));
        return;
      }
      const budget = (this.options.budget ?? ((r: AgentRequest) => budgetOf(r.stdin)))(request);
      const accept = request.version === 2 ? encodeAcceptWithWait(budget.shimWaitMs) : Buffer.from([ACCEPTED]);
      // Run only once the shim has the verdict: a write that fails means it gave up waiting (ACCEPT_MS) and runs
      // the plugin itself, and running the call here as well would only double the work.
      socket.write(accept, (err) => {
        if (err) return;
        const run = this.runBounded(request, budget).then((answer) => {
          socket.end(answer);
        });
        this.running.add(run);
        void run.finally(() => this.running.delete(run));
      });
    };
    socket.on('data', onData);
  }

  /** A slot among maxRunning, waiting in order until `deadlineAt`; false when the deadline came first. */
  private acquire(deadlineAt: number): Promise<boolean> {
    if (this.active < (this.options.maxRunning ?? MAX_RUNNING)) {
      this.active += 1;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const waiter = {
        grant: () => {
          clearTimeout(timer);
          resolve(true);
        },
      };
      const timer = setTimeout(
        () => {
          this.waiting.splice(this.waiting.indexOf(waiter), 1);
          resolve(false);
        },
        Math.max(0, deadlineAt - performance.now()),
      );
      this.waiting.push(waiter);
    });
  }

  /** Hands the slot to the longest-waiting call, or frees it. */
  private releaseSlot(): void {
    const next = this.waiting.shift();
    if (next) next.grant();
    else this.active -= 1;
  }

  /**
   * One call within its budget: queued for a slot, run, and abandoned at its deadline. An abandoned call answers
   * code 11 at once and its attachment locks are released; whatever it does later is refused at its next step
   * (node/journal/call-scope.ts), so the journal keeps what a plugin killed at that moment would have left.
   */
  private async runBounded(request: AgentRequest, budget: CallBudget): Promise<Buffer> {
    const startedMs = performance.now();
    const deadlineAt = startedMs + budget.deadlineMs;
    const command = request.env['CNI_COMMAND'] ?? '';
    if (!(await this.acquire(deadlineAt)))
      return this.retryable(request, startedMs, `no free slot within the call's ${budget.deadlineMs} ms deadline`);
    const scope: CallScope = { abandoned: false, locks: new Set() };
    const call = callScope.run(scope, () => this.run(request, scope, startedMs));
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), Math.max(0, deadlineAt - performance.now()));
    });
    const answer = await Promise.race([call, expired]);
    clearTimeout(timer);
    this.releaseSlot();
    if (answer) return answer;
    scope.abandoned = true;
    this.abandonedPending += 1;
    void call.finally(() => {
      this.abandonedPending -= 1;
    });
    const locks = [...scope.locks];
    await Promise.allSettled(locks.map((release) => release()));
    this.options.log.warn('agent: abandoned a call at its deadline', {
      command,
      containerId: request.env['CNI_CONTAINERID'] ?? '',
      deadlineMs: budget.deadlineMs,
      locksReleased: locks.length,
    });
    return this.retryable(request, startedMs, `abandoned at its ${budget.deadlineMs} ms deadline`);
  }

  /** Code 11 ("try again later"): the runtime retries the call, by then through a free agent or the fallback. */
  private retryable(request: AgentRequest, startedMs: number, why: string): Buffer {
    const command = request.env['CNI_COMMAND'] ?? '';
    let cniVersion = '1.0.0';
    try {
      const v = (JSON.parse(request.stdin) as { cniVersion?: unknown }).cniVersion;
      if (typeof v === 'string') cniVersion = v;
    } catch {
      // the default
    }
    this.options.observer.commandFinished({
      command,
      ok: false,
      cniCode: CniCode.tryAgainLater,
      durationMs: performance.now() - startedMs,
      path: 'agent',
    });
    const msg = `vpc-lease agent: ${command} ${why}; try again later`;
    return encodeAnswer(1, JSON.stringify({ cniVersion, code: CniCode.tryAgainLater, msg }));
  }

  /** One CNI call, exactly as the plugin process would run it with this environment and stdin. */
  private async run(request: AgentRequest, scope: CallScope, startedMs: number): Promise<Buffer> {
    const command = request.env['CNI_COMMAND'] ?? '';
    const { observer } = this.options;
    observer.commandStarted?.(command);
    // The addon is the agent's own, loaded from beside its executable; a request cannot name another.
    const env: NodeJS.ProcessEnv = { ...request.env };
    delete env['VPC_LEASE_NATIVE_DIR'];
    let stdout = '';
    let cniCode: number | undefined;
    const exitCode = await runSkel(pluginHandlers(this.options.deps.forCall(env)), {
      env,
      readStdin: () => request.stdin,
      writeStdout: (text) => {
        stdout += text;
      },
      onError: (_err, code) => {
        cniCode = code;
      },
    });
    this.checkNetns(command);
    // An abandoned call was reported when it was abandoned.
    if (!scope.abandoned)
      observer.commandFinished({
        command,
        ok: exitCode === 0,
        ...(cniCode !== undefined ? { cniCode } : {}),
        durationMs: performance.now() - startedMs,
        path: 'agent',
      });
    return encodeAnswer(exitCode, stdout);
  }

  private checkNetns(command: string): void {
    if (threadNetns() === this.homeNetns) return;
    this.options.log.error('agent: a request left the main thread in another network namespace; stopping', {
      command,
    });
    (this.options.onNetnsLeak ?? (() => process.exit(70)))();
  }

  /**
   * Stops taking calls (the socket goes at once, so shims fall back to the plugin), lets those in flight finish
   * within `graceMs`, then drops what is left: a shim that loses its connection runs the plugin itself.
   */
  async stop(graceMs: number): Promise<void> {
    this.draining = true;
    clearInterval(this.watch);
    try {
      if (statSync(this.options.socketPath).ino === this.boundIno) unlinkSync(this.options.socketPath);
    } catch {
      // already gone, or a newer agent's
    }
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.running]),
      new Promise((resolve) => {
        timer = setTimeout(resolve, graceMs);
      }),
    ]);
    clearTimeout(timer);
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }
}
