import { Aspects, type IAspect, Stack, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { Construct, IConstruct } from 'constructs';

/**
 * Why each wildcard resource in the Lambdas' roles is there. A wildcard that matches none of these is not
 * acknowledged, so cdk-nag (AwsSolutions-IAM5) fails the synth on it: new wildcards need a reason here first.
 */
export const WILDCARD_REASONS: readonly { readonly resource: RegExp; readonly reason: string }[] = [
  {
    resource: /^\*$/,
    reason:
      'Actions without resource-level permissions: EC2 Describe* (limited to this Region by aws:RequestedRegion), ' +
      'X-Ray PutTraceSegments/PutTelemetryRecords, and dynamodb:ListStreams for the stream event source.',
  },
  {
    resource: /:network-interface\/\*$/,
    reason:
      'ENI ids exist only after CreateNetworkInterface. Every statement on ENIs is conditioned on the cluster tag: ' +
      'aws:RequestTag on create, ec2:CreateAction for tag-on-create, ec2:ResourceTag on every later call.',
  },
  {
    resource: /:(subnet|security-group)\/\*$/,
    reason:
      'Subnets and security groups are chosen per instance at run time (boot ENI, tags or ids); ' +
      'the ec2:Vpc condition keeps them inside the cluster VPC.',
  },
  {
    resource: /:instance\/\*$/,
    reason:
      'Instances are launched by Auto Scaling at run time; ec2:ResourceTag/aws:autoscaling:groupName limits ' +
      'attach/detach to instances of the attached groups.',
  },
  {
    resource: /:autoScalingGroup:\*:autoScalingGroupName\/[^*]+$/,
    reason: 'The group UUID in an Auto Scaling group ARN is unknown before creation; the group name part is exact.',
  },
  {
    resource: /\.Arn>\/index\/\*$/,
    reason: 'Table-wide read/write for the Lambdas covers its indexes; the table has one, the claimable index.',
  },
];

/** cdk-nag's way of writing a CloudFormation value as a string (Ref → <Id>, GetAtt → <Id.Attr>, Join). */
export function flattenForNag(value: unknown): string {
  if (value === undefined) return '';
  if (typeof value === 'string') return value.replace(/\$\{/g, '<').replace(/}/g, '>');
  if (typeof value === 'object' && value !== null) {
    const o = value as Record<string, unknown>;
    if (Array.isArray(o['Fn::Join'])) {
      const [delimiter, items] = o['Fn::Join'] as [string, unknown[]];
      return items.map(flattenForNag).join(delimiter);
    }
    if (Array.isArray(o['Fn::GetAtt'])) {
      const [id, attr] = o['Fn::GetAtt'] as [unknown, unknown];
      return `<${flattenForNag(id)}.${flattenForNag(attr)}>`;
    }
    if (o.Ref !== undefined) return `<${flattenForNag(o.Ref)}>`;
  }
  return JSON.stringify(value);
}

interface ResolvedStatement {
  readonly Effect?: string;
  readonly Resource?: unknown;
}

/** Acknowledges, on each policy under the scope, exactly the wildcard resources that have a reason above. */
class WildcardAcknowledger implements IAspect {
  visit(node: IConstruct): void {
    if (!(node instanceof iam.CfnPolicy)) return;
    const doc = Stack.of(node).resolve(node.policyDocument) as { Statement?: ResolvedStatement[] };
    const found = new Set<string>();
    for (const statement of doc.Statement ?? []) {
      if (statement.Effect !== 'Allow') continue;
      const resources = Array.isArray(statement.Resource) ? statement.Resource : [statement.Resource];
      for (const r of resources) {
        const flat = flattenForNag(r);
        if (flat.includes('*')) found.add(flat);
      }
    }
    for (const flat of found) {
      const reason = WILDCARD_REASONS.find((w) => w.resource.test(flat))?.reason;
      if (reason !== undefined)
        Validations.of(node).acknowledge({ id: `AwsSolutions-IAM5[Resource::${flat}]`, reason });
    }
  }
}

/** Runs at synthesis, after every grant is in place, so it sees the final policies. */
export function suppressAllocatorFindings(allocator: Construct): void {
  Aspects.of(allocator).add(new WildcardAcknowledger());
}
