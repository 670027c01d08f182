import type { CniHandlers, CniRequest } from '../cni/skel.js';
import { toCniError } from '../cni/skel.js';

export interface CommandOutcome {
  /** 0 on success, else the CNI code the skel prints for the failure. */
  readonly code: number;
  readonly durationS: number;
}

/**
 * The plugin's handlers with each call timed and its outcome reported once it settles (an observer that throws
 * is ignored: metrics must never fail a pod). The code is the one skel prints, through the same toCniError.
 */
export function observeHandlers(
  handlers: CniHandlers,
  onDone: (request: CniRequest, outcome: CommandOutcome) => void,
): CniHandlers {
  const wrap =
    (run: CniHandlers[keyof CniHandlers]) =>
    async (request: CniRequest): ReturnType<typeof run> => {
      const startNs = process.hrtime.bigint();
      const report = (code: number) => {
        try {
          onDone(request, { code, durationS: Number(process.hrtime.bigint() - startNs) / 1e9 });
        } catch {
          // an observer's failure is not the command's
        }
      };
      try {
        const out = await run(request);
        report(0);
        return out;
      } catch (err) {
        report(toCniError(err).code);
        throw err;
      }
    };
  return {
    ADD: wrap(handlers.ADD),
    DEL: wrap(handlers.DEL),
    CHECK: wrap(handlers.CHECK),
    GC: wrap(handlers.GC),
    STATUS: wrap(handlers.STATUS),
  };
}
