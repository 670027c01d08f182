import type { Ec2Instance, Ec2Port } from './port.js';

/**
 * One record's view of the EC2 port with its instance already described (by the batch's single
 * DescribeInstances): the first `describeInstance` of that instance is answered from it, as long as it comes
 * before any other EC2 call of the record — after one, EC2 may have changed, so every call goes through.
 */
export function withPrefetchedInstance(inner: Ec2Port, instanceId: string, instance: Ec2Instance | undefined): Ec2Port {
  let fresh = true;
  return new Proxy(inner, {
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
}
