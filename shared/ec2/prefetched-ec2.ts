import type { Ec2Instance, Ec2Port } from './port.js';

/** Each record's view → the container's port behind it (see `containerPortOf`). */
const innerOf = new WeakMap<Ec2Port, Ec2Port>();

/**
 * One record's view of the EC2 port with its instance already described (by the batch's single
 * DescribeInstances): the first `describeInstance` of that instance is answered from it, as long as it comes
 * before any other EC2 call of the record — after one, EC2 may have changed, so every call goes through.
 */
export function withPrefetchedInstance(inner: Ec2Port, instanceId: string, instance: Ec2Instance | undefined): Ec2Port {
  let fresh = true;
  const view = new Proxy(inner, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== 'function') return value;
      if (property !== 'describeInstance')
        return (...args: unknown[]) => {
          fresh = false;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      return (id: string) => {
        if (fresh && id === instanceId) {
          fresh = false;
          return Promise.resolve(instance);
        }
        fresh = false;
        return target.describeInstance(id);
      };
    },
  });
  innerOf.set(view, containerPortOf(inner));
  return view;
}

/**
 * The port a record's view wraps, or the port itself: what a cache meant to last for the container's life
 * must be keyed on, since every record gets a new view (keyed on the view, it would miss on every record).
 */
export function containerPortOf(ec2: Ec2Port): Ec2Port {
  return innerOf.get(ec2) ?? ec2;
}
