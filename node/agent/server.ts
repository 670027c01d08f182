import { chmodSync, lstatSync, mkdirSync, renameSync, statSync, unlinkSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { dirname } from 'node:path';
import { errorMessage } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { runSkel } from '../cni/skel.js';
import { loadNetnsAddon } from '../datapath/native.js';
import { pluginHandlers } from '../plugin/handlers.js';
import type { AgentHealth, AgentObserver } from './observer.js';
import { ACCEPTED, type AgentRequest, decodeRequest, encodeAnswer, MAX_FRAME_BYTES, REFUSED } from './protocol.js';
import type { WarmDeps } from './warm-deps.js';

/** A shim sends its request at once; a connection still incomplete after this is not one worth waiting for. */
const REQUEST_READ_TIMEOUT_MS = 5_000;
/** Only root may connect: the socket and its directory admit no one else (node/README.md, "Agent"). */
const SOCKET_MODE = 0o600;
const DIR_MODE = 0o700;
/** Below the probe's own timeout (daemonset.yaml, timeoutSeconds 5), so a refusal is told apart from a stall. */
const HEALTH_CONNECT_TIMEOUT_MS = 2_000;

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
  private boundIno = 0;

  private constructor(
    private readonly server: Server,
    private readonly options: AgentServerOptions,
  ) {}

  /**
   * Listens on `socketPath`, replacing a socket left there (a crashed agent's, or the previous version's during
   * a rolling update: it keeps serving the connections it has). Bound under a temp name, narrowed to 0600, then
   * renamed: the path never names a socket with a wider mode, nor none while an old one was there.
   */
  static async start(options: AgentServerOptions): Promise<AgentServer> {
    secureDirectory(dirname(options.socketPath));
    const server = createServer();
    const agent = new AgentServer(server, options);
    server.on('connection', (socket) => agent.serve(socket));
    const tmp = `${options.socketPath}.${process.pid}.tmp`;
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
    renameSync(tmp, options.socketPath);
    agent.boundIno = statSync(options.socketPath).ino;
    options.log.info('agent listening', { socket: options.socketPath });
    return agent;
  }

  /**
   * Serving means: not draining, the server listening, and the path the shims use accepting a connection (a
   * client's connect, closed at once). A socket file someone removed, or a closed server, fails it; a stalled event
   * loop never answers the probe at all, which the kubelet counts as a failure too. A newer agent's socket at the
   * path (a surge rollout) passes: shims are served, and this pod is about to be deleted anyway.
   */
  async health(): Promise<AgentHealth> {
    if (this.draining) return { ok: false, reason: 'draining' };
    if (!this.server.listening) return { ok: false, reason: 'the socket server is closed' };
    const error = await new Promise<string | undefined>((resolve) => {
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
    if (error) return { ok: false, reason: `cannot connect to ${this.options.socketPath}: ${error}` };
    return { ok: true, reason: 'serving' };
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
      // Run only once the shim has the verdict: a write that fails means it gave up waiting (ACCEPT_MS) and runs
      // the plugin itself, and running the call here as well would only double the work.
      socket.write(Buffer.from([ACCEPTED]), (err) => {
        if (err) return;
        const run = this.run(request).then((answer) => {
          socket.end(answer);
        });
        this.running.add(run);
        void run.finally(() => this.running.delete(run));
      });
    };
    socket.on('data', onData);
  }

  /** One CNI call, exactly as the plugin process would run it with this environment and stdin. */
  private async run(request: AgentRequest): Promise<Buffer> {
    const startedMs = performance.now();
    const command = request.env['CNI_COMMAND'] ?? '';
    const { observer } = this.options;
    observer.commandStarted?.(command);
    // The addon is the agent's own, loaded from beside its executable; a request cannot name another.
    const env: NodeJS.ProcessEnv = { ...request.env };
    delete env['VPC_LEASE_NATIVE_DIR'];
    delete env['VPC_LEASE_TEST_HANG_AT'];
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
