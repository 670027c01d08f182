import { describe, expect, it } from 'vitest';
import { runCells } from './guest/cells.js';
import { type Defended, runWithControls } from './guest/defences.js';
import type { Cell } from './guest/probes.js';
import type { CellResult } from './results.js';

/**
 * The order the fabric runs a configuration's controls in (no VM needed): each control first with its defence
 * lifted, then the matrix, holding the same cells, with every defence back; the matrix's result is the restore's
 * proof. The fakes stand for a defence (a flag) and a control that fails for its reason while the flag is down.
 */
function fabric(options: { undoRestores?: boolean; cellCanFail?: boolean; reason?: string } = {}) {
  const events: string[] = [];
  let defended = true;
  const control: Cell = {
    name: 'negative control: a fake',
    run: async () => {
      events.push(defended ? 'control with defence' : 'control without defence');
      return defended || options.cellCanFail === false ? undefined : (options.reason ?? 'reached node2');
    },
  };
  const defence: Defended = {
    defence: 'the fake defence',
    cell: control,
    failsWith: /reached node2/,
    lift: () => {
      defended = false;
      return () => {
        if (options.undoRestores !== false) defended = true;
      };
    },
  };
  const other: Cell = { name: 'pod ↔ pod', run: async () => void events.push('matrix cell') };
  return { events, defence, matrix: [other, control] };
}

async function run(f: ReturnType<typeof fabric>, matrix = f.matrix): Promise<CellResult[]> {
  const out: CellResult[] = [];
  await runWithControls('l2/boot', matrix, [f.defence], out, runCells);
  return out;
}

const row = (out: CellResult[], prefix: string) => out.find((r) => r.cell.startsWith(prefix));

describe('Function: runWithControls', () => {
  it('runs the control without its defence before the matrix, and takes the restore from the matrix run', async () => {
    const f = fabric();
    const out = await run(f);
    expect(f.events[0]).toBe('control without defence');
    expect(f.events.slice(1).sort()).toEqual(['control with defence', 'matrix cell']);
    expect(row(out, 'control without the fake defence')).toMatchObject({ ok: true });
    expect(row(out, 'control with the fake defence')).toMatchObject({ ok: true });
    expect(out.find((r) => r.cell === 'negative control: a fake')?.ok).toBe(true);
  });

  it('fails the restore row when the undo leaves the defence down (negative control of the proof)', async () => {
    const out = await run(fabric({ undoRestores: false }));
    expect(row(out, 'control without the fake defence')).toMatchObject({ ok: true });
    expect(row(out, 'control with the fake defence')).toMatchObject({ ok: false, detail: 'reached node2' });
  });

  it('fails a control that passes with its defence removed, or fails for another reason', async () => {
    const cannotFail = await run(fabric({ cellCanFail: false }));
    expect(row(cannotFail, 'control without')).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/cannot fail/),
    });
    const otherReason = await run(fabric({ reason: 'no answer from the twin' }));
    expect(row(otherReason, 'control without')).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/not for the missing defence/),
    });
  });

  it('refuses a control whose cell the matrix does not hold (nothing would prove its restore)', async () => {
    const f = fabric();
    await expect(run(f, [f.matrix[0]!])).rejects.toThrow(/controls outside the matrix: negative control: a fake/);
  });

  it('runs the matrix alone when the seed runs no control', async () => {
    const f = fabric();
    const out: CellResult[] = [];
    await runWithControls('l2/boot', f.matrix, [], out, runCells);
    expect(f.events.sort()).toEqual(['control with defence', 'matrix cell']);
    expect(out.map((r) => r.cell).filter((c) => c.startsWith('control '))).toEqual([]);
  });
});
