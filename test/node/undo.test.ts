import { describe, expect, it } from 'vitest';
import { faultPoint, InjectedFault, NO_HOOKS, testHooksFromEnv } from '../../node/datapath/test-hooks.js';
import { UndoStack } from '../../node/datapath/undo.js';
import { createLogger } from '../../shared/log.js';

describe('UndoStack', () => {
  it('runs undos in reverse order, keeps going past a failing one and logs it', async () => {
    const lines: string[] = [];
    const stack = new UndoStack(createLogger({ sink: (l) => lines.push(l) }));
    const ran: string[] = [];
    stack.push('a', () => {
      ran.push('a');
    });
    stack.push('b', () => {
      throw new Error('b broke');
    });
    stack.push('c', async () => {
      ran.push('c');
    });
    await stack.unwind(new Error('original'));
    expect(ran).toEqual(['c', 'a']);
    expect(stack.size).toBe(0);
    const failed = lines.map((l) => JSON.parse(l)).find((r) => r.msg === 'failed to undo step');
    expect(failed).toMatchObject({ step: 'b', err: { message: 'b broke' }, cause: { message: 'original' } });
  });

  it('forgets everything on commit', async () => {
    const stack = new UndoStack(createLogger({ sink: () => {} }));
    let ran = false;
    stack.push('x', () => {
      ran = true;
    });
    stack.commit();
    await stack.unwind(new Error('late'));
    expect(ran).toBe(false);
  });
});

describe('testHooksFromEnv', () => {
  it('honours the test switches only in test mode', () => {
    expect(testHooksFromEnv({})).toBe(NO_HOOKS);
    for (const env of [{ VPC_LEASE_TEST_LINK_KIND: 'macvlan' }, { VPC_LEASE_TEST_FAIL_AT: 'claim' }])
      expect(() => testHooksFromEnv(env)).toThrow(expect.objectContaining({ code: 4 }));
    const hooks = testHooksFromEnv({
      VPC_LEASE_TEST_MODE: '1',
      VPC_LEASE_TEST_LINK_KIND: 'macvlan',
      VPC_LEASE_TEST_FAIL_AT: 'add-route',
    });
    expect(hooks).toEqual({ linkKind: 'macvlan', failAt: 'add-route' });
    expect(() => faultPoint(hooks, 'link-up')).not.toThrow();
    expect(() => faultPoint(hooks, 'add-route')).toThrow(InjectedFault);
    expect(() => testHooksFromEnv({ VPC_LEASE_TEST_MODE: '1', VPC_LEASE_TEST_FAIL_AT: 'nope' })).toThrow(
      expect.objectContaining({ code: 4 }),
    );
  });
});
